"""Speech through the sandbox with the real discord.py client, real Opus and real encryption."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
import wave
from pathlib import Path

import numpy as np
import pytest

from engine.base import Voice
from tests.audio_util import assert_same_speech, band_profile, mono, rms, utterances
from tests.e2e.conftest import STEADY_CLI

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
TEXT = "The quick brown fox jumps over the lazy dog near the river bank."
OTHER = "Seven silver spoons sat quietly inside a wooden drawer all winter."


def engine_say(text: str, out: Path) -> np.ndarray:
    subprocess.run([sys.executable, "-m", "engine", "say", text, "--out", str(out), *STEADY_CLI], cwd=ROOT, check=True,
                   capture_output=True, timeout=120)
    with wave.open(str(out)) as w:
        assert w.getframerate() == 48_000
        return mono(w.readframes(w.getnframes()), w.getnchannels())


async def say(sb, user, channel, text, **kw):
    it = await sb.slash(user, channel, "say", text=text, **kw)
    return it, await it.wait_text(timeout=30)


async def test_join_then_say_is_heard_and_matches_the_engine_cli(sb, demo, bot, tmp_path):
    it = await sb.slash(demo.alice, demo.general, "join")
    assert "Joined" in await it.wait_text(timeout=20)
    assert it.ephemeral
    await sb.wait_voice_connected(demo.guild)
    capture = sb.capture(demo.guild)
    _, answer = await say(sb, demo.alice, demo.general, TEXT)
    assert answer == "Speaking."
    await capture.wait_for_audio(0.5, timeout=30)
    await capture.wait_until_silent(0.6, timeout=60)
    heard = mono(capture.pcm())
    assert capture.decrypt_errors == 0
    # Same speech as the engine CLI's rendering (steady Piper, tests/e2e/conftest.py): the same length
    # and loudness envelope, far from another sentence's, and the coarse spectrum close.
    reference = engine_say(TEXT, tmp_path / "ref.wav")
    assert rms(heard) > 0.02
    assert_same_speech(heard, reference, engine_say(OTHER, tmp_path / "other.wav"))
    d_same = np.linalg.norm(band_profile(heard) - band_profile(reference))
    assert d_same < 2.0, d_same
    # packets contiguous and paced
    voiced = capture.voiced
    seqs = [p.seq for p in voiced]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))
    assert {p.timestamp - voiced[0].timestamp for p in voiced} == {960 * i for i in range(len(voiced))}


async def test_say_without_voice_channel_or_with_bad_input_gets_clear_ephemeral_errors(sb, demo, bot):
    bob = sb.user("bob")
    demo.guild.add_member(bob)
    it, text = await say(sb, bob, demo.general, "hello")
    assert "Join a voice channel first" in text and it.ephemeral
    it, text = await say(sb, demo.alice, demo.general, "x" * 501)
    assert "too long" in text and "500" in text and it.ephemeral
    it, text = await say(sb, demo.alice, demo.general, "\u0000\u0007 ~~ ** ")
    assert "nothing I can say" in text
    it = await sb.slash(bob, demo.general, "skip")
    assert "Join my voice channel" in await it.wait_text()
    assert not sb.capture(demo.guild).packets


async def test_missing_connect_permission_is_reported(sb, demo, bot):
    locked = demo.guild.voice_channel("Locked")
    view, send, connect, speak = 1 << 10, 1 << 11, 1 << 20, 1 << 21
    demo.guild.bot_role.edit(permissions=view | send | connect | speak)
    locked.set_overwrite(sb.bot_user, deny=connect)
    await sb.user_joins_voice(demo.alice, locked)
    it = await sb.slash(demo.alice, demo.general, "join")
    text = await it.wait_text(timeout=20)
    assert "permission to connect" in text and it.ephemeral


async def test_skip_cuts_playback_within_100ms_of_audio(sb, demo, bot):
    capture = sb.capture(demo.guild)
    await say(sb, demo.alice, demo.general, " ".join([TEXT] * 4))
    await capture.wait_for_audio(1.0, timeout=30)
    sent = time.monotonic()
    it = await sb.slash(demo.alice, demo.general, "skip")
    assert await it.wait_text() == "Skipped."
    await asyncio.sleep(0.5)
    after = [p for p in capture.voiced if p.at > sent]
    assert len(after) <= 5, f"{len(after)} voiced frames after /skip"
    assert capture.voiced_seconds < 6


async def test_queue_plays_in_order_and_queue_command_lists_it(sb, demo, bot):
    capture = sb.capture(demo.guild)
    texts = ["Short one.", "This second sentence is clearly quite a lot longer than the first one was.",
             "A middle length third sentence."]
    engine = bot.engine
    expected = []
    for t in texts:
        pcm = await engine.synthesize_all(t, Voice(), key="ref")
        expected.append(len(pcm) / (48_000 * 4))
    for t in texts:
        await say(sb, demo.alice, demo.general, t)
    it = await sb.slash(demo.alice, demo.general, "queue")
    listing = await it.wait_text()
    assert it.ephemeral and ("Now:" in listing or "1." in listing)
    await capture.wait_for_audio(sum(expected) * 0.8, timeout=60)
    await capture.wait_until_silent(0.8, timeout=60)
    heard = [len(u) * 0.02 for u in utterances(capture.packets)]
    assert len(heard) == 3, heard
    order_heard = np.argsort(heard)
    order_expected = np.argsort(expected)
    assert list(order_heard) == list(order_expected), (heard, expected)


async def test_two_guilds_speak_at_once(sb, demo, bot):
    other = sb.guild("Second Guild")
    general2 = other.text_channel("general")
    voice2 = other.voice_channel("Voice")
    carol = sb.user("carol")
    other.add_member(carol)
    await sb.user_joins_voice(carol, voice2)
    await asyncio.sleep(0.5)  # GUILD_CREATE reaches the bot
    c1, c2 = sb.capture(demo.guild), sb.capture(other)
    await asyncio.gather(say(sb, demo.alice, demo.general, TEXT), say(sb, carol, general2, OTHER))
    await asyncio.gather(c1.wait_for_audio(1.5, timeout=40), c2.wait_for_audio(1.5, timeout=40))
    # both were playing at the same time: their voiced spans overlap
    s1 = (c1.voiced[0].at, c1.voiced[-1].at)
    s2 = (c2.voiced[0].at, c2.voiced[-1].at)
    assert min(s1[1], s2[1]) - max(s1[0], s2[0]) > 0.5
    assert c1.ssrcs.isdisjoint(c2.ssrcs)


async def test_dropped_voice_websocket_reconnects_and_the_rest_of_the_queue_is_heard(sb, demo, bot):
    capture = sb.capture(demo.guild)
    texts = ["First of three messages, spoken before the drop.", "Second message.", "Third and last message."]
    for t in texts:
        await say(sb, demo.alice, demo.general, t)
    await capture.wait_for_audio(0.4, timeout=30)
    assert await sb.close_voice_ws(demo.guild, 4015)
    await capture.wait_for_audio(3.0, timeout=60)
    await capture.wait_until_silent(1.0, timeout=60)
    assert len(utterances(capture.packets)) >= 3
    assert sb.voice_connected(demo.guild)


async def test_follows_when_moved_and_leaves_when_alone(sb, demo, bot):
    it = await sb.slash(demo.alice, demo.general, "join")
    await it.wait_text(timeout=20)
    await sb.wait_voice_connected(demo.guild)
    lounge = demo.guild.voice_channel("Lounge")
    await sb.user_joins_voice(demo.alice, lounge)
    await sb.move_member(sb.bot_user, lounge, demo.guild)
    await asyncio.sleep(1.0)
    assert sb.bot_voice_channel(demo.guild) is lounge
    capture = sb.capture(demo.guild)
    await say(sb, demo.alice, demo.general, "Still here after the move.")
    await capture.wait_for_audio(0.5, timeout=30)
    assert bot.speech.voice_channel(demo.guild.id).id == lounge.id
    await capture.wait_until_silent(0.5, timeout=30)
    await sb.user_leaves_voice(demo.alice, demo.guild)
    await sb.wait_voice_connected(demo.guild, timeout=15, connected=False)


async def test_leaves_after_idle_time(sb, demo, tmp_path):
    from demo.sandbox_bot import sandbox_settings, start_bot
    from tests.e2e.conftest import make_settings

    running = await start_bot(sb, sandbox_settings(make_settings(tmp_path, speech={"idle_leave_s": 1.5}), sb))
    try:
        await say(sb, demo.alice, demo.general, "Then silence.")
        await sb.wait_voice_connected(demo.guild, timeout=20)
        await sb.capture(demo.guild).wait_for_audio(0.3, timeout=30)
        await sb.wait_voice_connected(demo.guild, timeout=15, connected=False)
        assert demo.alice.id in {m for m in demo.guild.members}  # the user is still there; the bot left
    finally:
        await running.stop()


async def test_join_another_channel_moves_the_bot_and_speech_follows(sb, demo, bot):
    it = await sb.slash(demo.alice, demo.general, "join")
    await it.wait_text(timeout=20)
    await sb.wait_voice_connected(demo.guild)
    lounge = demo.guild.voice_channel("Lounge")
    await sb.user_joins_voice(demo.alice, lounge)
    it = await sb.slash(demo.alice, demo.general, "join")
    assert "Joined" in await it.wait_text(timeout=25), it.final_text()
    assert sb.bot_voice_channel(demo.guild) is lounge
    capture = sb.capture(demo.guild)
    await say(sb, demo.alice, demo.general, "Speaking in the lounge now.")
    await capture.wait_for_audio(0.5, timeout=30)


async def test_queue_full_is_told_and_nothing_accepted_is_dropped(sb, demo, bot):
    await bot.prefs.update_guild(demo.guild.id, max_queue=2)
    answers = []
    for i in range(5):
        _, text = await say(sb, demo.alice, demo.general, f"Message number {i} is a fairly long sentence to say.")
        answers.append(text)
    full = [a for a in answers if "queue is full" in a]
    accepted = [a for a in answers if a == "Speaking." or a.startswith("Queued")]
    assert len(full) >= 1 and len(full) + len(accepted) == 5, answers
    assert "2 waiting" in full[0]
    capture = sb.capture(demo.guild)
    await capture.wait_for_audio(1.0, timeout=30)
    await capture.wait_until_silent(1.0, timeout=90)
    assert len(utterances(capture.packets)) == len(accepted)


async def test_after_skip_the_next_utterance_starts_after_the_end_of_speech_burst(sb, demo, bot, monkeypatch):
    """/skip stops the player thread, which still sends its five end-of-speech silence frames: the next
    utterance's packets come after them, not interleaved with them from a second player thread. The stopped
    thread is made slow to get there (as on a busy machine), so a next utterance that did not wait would show."""
    from discord.player import AudioPlayer
    send_silence = AudioPlayer.send_silence

    def late_silence(self, count: int = 5) -> None:
        time.sleep(0.3)
        send_silence(self, count)
    monkeypatch.setattr(AudioPlayer, "send_silence", late_silence)
    capture = sb.capture(demo.guild)
    await say(sb, demo.alice, demo.general, " ".join([TEXT] * 4))
    await say(sb, demo.alice, demo.general, OTHER)
    await capture.wait_for_audio(1.0, timeout=30)
    sent = time.monotonic()
    it = await sb.slash(demo.alice, demo.general, "skip")
    assert await it.wait_text() == "Skipped."
    await capture.wait_for_audio(capture.voiced_seconds + 2.0, timeout=30)
    await capture.wait_until_silent(0.8, timeout=30)
    after = [p for p in capture.packets if p.at > sent]
    runs, run = [], 0
    for p in after:
        if p.silence:
            run += 1
        elif run:
            runs.append(run)
            run = 0
    runs.append(run)
    # the skipped one's burst, then the next one's at its end: two whole bursts, nothing split
    assert [r for r in runs if r] == [5, 5], runs
