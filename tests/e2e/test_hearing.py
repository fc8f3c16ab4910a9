"""Hearing the channel: the bot's one receive path knows who speaks in its call from the voice gateway and their
packets (the sandbox member's real DAVE- and transport-encrypted Opus), counts what it drops, ignores bots."""

from __future__ import annotations

import asyncio

import discord
import numpy as np
import pytest

from sandbox.talker import wav_frames
from tests.audio_util import aligned_correlation, wav_bytes

pytestmark = pytest.mark.e2e


def voice_wav(seconds: float, rate: int = 48000, level: float = 0.3, pitch: float = 180.0) -> bytes:
    """A voice-like test signal: a buzz with harmonics at `pitch` Hz, syllable-shaped (4 per second)."""
    t = np.arange(int(seconds * rate)) / rate
    buzz = sum(np.sin(2 * np.pi * pitch * k * t) / k for k in range(1, 6))
    signal = level * buzz / np.abs(buzz).max() * (0.6 + 0.4 * np.sin(2 * np.pi * 4 * t) ** 2)
    return wav_bytes(signal, rate)


async def until(predicate, what: str, timeout: float = 10.0) -> None:
    """Wait (bounded) for something the bot's threads change; the sandbox's signal does not see them."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


async def join(sb, demo) -> None:
    it = await sb.slash(demo.alice, demo.general, "join")
    assert "Joined" in await it.wait_text(timeout=20)
    await sb.wait_voice_connected(demo.guild)
    await sb.wait_dave_ready(demo.guild)


async def test_the_bot_hears_who_speaks_and_never_a_bot(sb, demo, bot):
    await join(sb, demo)
    receive = bot.speech.call(demo.guild.id).connection.receive
    heard: list[int] = []
    receive.listen(lambda uid, at: heard.append(uid))
    robot = sb.user("robot", bot=True)
    await sb.user_joins_voice(robot, demo.voice)
    await until(lambda: robot.id in receive.present, "the robot in the call")
    await sb.voice.dave.settle()
    await sb.wait_dave_ready(demo.guild)
    talks = [sb.speak(demo.alice, voice_wav(0.6), demo.guild), sb.speak(robot, voice_wav(0.6), demo.guild)]
    for talk in talks:
        await talk.wait(timeout=10)
    sent = len(talks[0].sent_at)
    await until(lambda: len(heard) + receive.counts.dropped["unknown_ssrc"] >= sent, "alice's packets")
    unnamed = receive.counts.dropped["unknown_ssrc"]      # any that overtook SPEAKING (UDP beside the websocket)
    assert set(heard) == {demo.alice.id} and len(heard) >= sent - 2 and unnamed <= 2
    assert receive.member_of(talks[0].ssrc) == demo.alice.id and receive.member_of(talks[1].ssrc) == robot.id
    assert receive.present >= {demo.alice.id, robot.id}
    text = bot.metrics.render().decode()
    assert f"voicebot_voice_received_packets_total {float(len(heard))}" in text


async def test_packets_of_an_unnamed_ssrc_are_dropped_and_counted(sb, demo, bot):
    await join(sb, demo)
    bob = sb.user("bob")
    await sb.user_joins_voice(bob, demo.voice)
    talk = sb.speak(bob, voice_wav(0.2), demo.guild, announce=False)      # his SPEAKING never came
    await talk.wait(timeout=10)
    await until(lambda: bot.speech.received.dropped["unknown_ssrc"] == len(talk.sent_at), "the drops counted")
    assert bot.speech.received.packets == 0
    assert 'voicebot_voice_receive_dropped_total{reason="unknown_ssrc"}' in bot.metrics.render().decode()
    assert bot.speech.voice_connections() == 1              # the call goes on


LONG = ("The quick brown fox jumps over the lazy dog near the river bank. Seven silver spoons sat quietly inside a "
        "wooden drawer all winter, waiting for the spring.")


async def said(sb, demo):
    """/say LONG; the capture once its first second was heard."""
    capture = sb.capture(demo.guild)
    capture.clear()
    it = await sb.slash(demo.alice, demo.general, "say", text=LONG)
    assert await it.wait_text(timeout=30) == "Speaking."
    await capture.wait_for_audio(1.0, timeout=30)
    return capture


def level_db(frames: list[np.ndarray]) -> float:
    return 10 * np.log10(sum(float(np.sum(f.astype(np.float64) ** 2)) for f in frames) + 1e-9)


def frames_heard(capture) -> list[tuple[float, np.ndarray]]:
    """(arrival, left channel) of each voiced frame the channel heard."""
    return [(p.at, np.frombuffer(pcm, dtype="<i2")[::2]) for p, pcm in capture.decoded(capture.voiced)]


@pytest.mark.parametrize("setting, fall_db", [(None, 10), ("20", 20), ("off", 0)])
async def test_the_bots_level_falls_while_a_member_talks_and_rises_after(sb, demo, bot, setting, fall_db):
    if setting is not None:
        it = await sb.slash(sb.owner, demo.general, "settings set", setting="ducking", value=setting)
        assert (await it.wait_text()).startswith(f"ducking is now {setting}")
    await join(sb, demo)
    capture = await said(sb, demo)                          # nobody talks: the reference (steady Piper repeats)
    await capture.wait_until_silent(0.6, timeout=60)
    reference = frames_heard(capture)
    capture = await said(sb, demo)
    talk = sb.speak(demo.alice, voice_wav(1.2), demo.guild)
    await talk.wait(timeout=10)
    await capture.wait_until_silent(0.6, timeout=60)
    ducked = frames_heard(capture)
    start, end = talk.first_at, talk.last_voiced_at
    during = [i for i, (at, _) in enumerate(ducked) if start + 0.15 <= at <= end]
    after = [i for i, (at, _) in enumerate(ducked) if end + 0.7 <= at <= end + 1.5]
    assert len(during) >= 40 and len(after) >= 30 and len(ducked) == len(reference)

    def change(indices: list[int]) -> float:            # dB against the same frames of the reference
        return level_db([ducked[i][1] for i in indices]) - level_db([reference[i][1] for i in indices])

    assert abs(change(during) + fall_db) < 3, change(during)     # the setting (default 10 dB), off: none
    assert abs(change(after)) < 1.5, change(after)
    before = [i for i, (at, _) in enumerate(ducked) if at < start - 0.1]
    assert abs(change(before)) < 1.5, change(before)


class CountingDecoder:
    """discord.py's Opus decoder, counting what it decodes (and how many were made)."""

    made: list[CountingDecoder] = []

    def __init__(self) -> None:
        CountingDecoder.made.append(self)
        self.calls = 0
        self.decoder = discord.opus.Decoder()

    def decode(self, frame: bytes, fec: bool = False) -> bytes:
        self.calls += 1
        return self.decoder.decode(frame, fec=fec)


async def join_with_bob(sb, demo):
    """The bot joins alice's channel and bob comes in too; the call's end-to-end encryption settled with him."""
    await join(sb, demo)
    bob = sb.user("bob")
    await sb.user_joins_voice(bob, demo.voice)
    await sb.voice.dave.settle()
    await sb.wait_dave_ready(demo.guild)
    return bob


async def test_recording_opens_and_decodes_only_the_consenting_members_packets(sb, demo, bot):
    bob = await join_with_bob(sb, demo)
    connection = bot.speech.call(demo.guild.id).connection
    CountingDecoder.made = decoders = []
    audio = connection.record(demo.alice.id, max_s=30, decoder=CountingDecoder)
    wav = voice_wav(1.0)
    talks = [sb.speak(demo.alice, wav, demo.guild), sb.speak(bob, voice_wav(1.0, pitch=237.0), demo.guild)]
    for talk in talks:
        await talk.wait(timeout=10)
    await until(lambda: audio.frames >= len(talks[0].sent_at) - 2, "alice's frames")
    connection.stop_recording(demo.alice.id)
    assert len(decoders) == 1 and decoders[0].calls == audio.frames        # one decoder, alice's, nobody else's
    assert bot.speech.received.packets >= 2 * len(talks[0].sent_at) - 4    # bob was heard, never opened
    assert not {"transport_failed", "dave_failed", "decode_failed"} & set(bot.speech.received.drops())
    assert aligned_correlation(bytes(audio.pcm), b"".join(wav_frames(wav))) > 0.9
