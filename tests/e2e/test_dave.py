"""The bot through end-to-end encrypted voice (DAVE): heard by a listening client's davey session, nothing dropped."""

from __future__ import annotations

import asyncio

import discord
import pytest

from tests.audio_util import assert_same_speech, mono, rms
from tests.e2e.test_speech import engine_say

pytestmark = pytest.mark.e2e
TEXT = "The quick brown fox jumps over the lazy dog near the river bank."
LONG = ("Seven silver spoons sat quietly inside a wooden drawer all winter, while the wind outside "
        "kept rattling the old kitchen window until the spring finally came back to the valley.")


class Outcomes:
    """Each finished utterance's outcome and how many frames its player read."""

    def __init__(self, bot) -> None:
        self.items: list[tuple[str, int]] = []
        self.event = asyncio.Event()
        bot.speech.listeners.append(self._on)

    def _on(self, guild_id, utt, outcome) -> None:
        self.items.append((outcome.value, utt.source.frames_read if utt.source else 0))
        self.event.set()

    async def first(self, timeout: float = 90.0) -> tuple[str, int]:
        await asyncio.wait_for(self.event.wait(), timeout)
        return self.items[0]


async def say(sb, user, channel, text):
    it = await sb.slash(user, channel, "say", text=text)
    return await it.wait_text(timeout=30)


async def join(sb, demo) -> str:
    it = await sb.slash(demo.alice, demo.general, "join")
    return await it.wait_text(timeout=20)


def listener_decryptions(sb, demo, bot_id: int):
    import davey
    human = sb.voice.dave.group(demo.voice.id).listener(bot_id)
    return human.session.get_decryption_stats(bot_id, davey.MediaType.audio)


async def speaking(sb, demo, bot) -> tuple[Outcomes, object]:
    """Joined with E2EE ready, then a long /say that has been heard for a second."""
    assert "Joined" in await join(sb, demo)
    await sb.wait_dave_ready(demo.guild)
    outcomes = Outcomes(bot)
    capture = sb.capture(demo.guild)
    capture.clear()
    await say(sb, demo.alice, demo.general, LONG)
    await capture.wait_for_audio(1.0, timeout=60)
    return outcomes, capture


def assert_every_frame_heard(capture, frames_read: int) -> None:
    """Nothing the player sent was dropped by the listener, and the stream has no hole (seq and timestamps)."""
    assert capture.dropped == 0, capture.stats()
    voiced = capture.voiced
    assert abs(len(voiced) - frames_read) <= 1, (len(voiced), frames_read)
    seqs = [p.seq for p in voiced]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))
    assert {p.timestamp - voiced[0].timestamp for p in voiced} == {960 * i for i in range(len(voiced))}


async def test_say_right_after_join_is_heard_from_the_first_word(sb, demo, bot, tmp_path):
    """The MLS handshake takes 0.8 s here: discord.py would send those first words as plain Opus, which every
    listener drops. The bot waits for E2EE, so the listener hears the whole sentence."""
    sb.voice.dave.proposal_delay_s = 0.8
    outcomes = Outcomes(bot)
    capture = sb.capture(demo.guild)
    assert await say(sb, demo.alice, demo.general, TEXT) == "Speaking."     # /say joins the channel itself
    outcome, frames_read = await outcomes.first()
    await capture.wait_until_silent(0.3, timeout=30)
    assert outcome == "played"
    assert_every_frame_heard(capture, frames_read)
    assert listener_decryptions(sb, demo, bot.user.id).passthroughs == 0        # all of it E2EE
    # the heard speech is the engine's rendering from its start: same length, same loudness envelope
    heard = mono(capture.pcm())
    assert rms(heard[:48_000]) > 0.02                                           # the first second is speech
    assert_same_speech(heard, engine_say(TEXT, tmp_path / "ref.wav"))


async def test_encryption_that_never_gets_ready_is_reported_and_nothing_is_sent(sb, demo, bot):
    sb.voice.dave.proposal_delay_s = 60.0                       # the handshake does not finish within the wait
    bot.speech.speaker(demo.guild.id).player.e2ee_wait_s = 1.0
    capture = sb.capture(demo.guild)
    it = await sb.slash(demo.alice, demo.general, "say", text=TEXT)
    await it.wait(lambda i: "encryption did not get ready" in (i.final_text() or ""), 30, "the E2EE message")
    assert "Try again" in it.final_text()
    assert not capture.voiced and capture.dropped == 0          # not one frame that nobody could hear


async def test_join_answers_with_the_voice_privacy_code(sb, demo, bot):
    answer = await join(sb, demo)
    code = sb.privacy_code(demo.guild)
    assert code and "Voice privacy code: " + " ".join(code[i:i + 5] for i in range(0, 30, 5)) in answer
    assert bot.speech.speaker(demo.guild.id).connection.privacy_code.replace(" ", "") == code


async def test_members_joining_and_leaving_mid_utterance_lose_nothing(sb, demo, bot):
    carol, bob = sb.user("carol"), sb.user("bob")
    await sb.user_joins_voice(carol, demo.voice)
    group = sb.dave_group(demo.voice)
    outcomes, capture = await speaking(sb, demo, bot)
    epoch = group.epoch
    await sb.user_joins_voice(bob, demo.voice)                     # a new epoch: Add, commit, welcome
    await sb._signal.wait_for(lambda: bob.id in group.in_group and not group.awaiting, 10, "bob in the group")
    await sb.user_leaves_voice(carol, demo.guild)                  # and another: Remove
    await sb._signal.wait_for(lambda: carol.id not in group.in_group and not group.awaiting, 10, "carol out")
    voiced_at_changes = len(capture.voiced)
    outcome, frames_read = await outcomes.first()
    assert group.epoch >= epoch + 2
    assert outcome == "played" and voiced_at_changes < frames_read              # the changes were mid-utterance
    assert_every_frame_heard(capture, frames_read)


async def test_moved_mid_utterance_speaks_on_once_the_new_channels_group_is_ready(sb, demo, bot):
    other = demo.guild.voice_channel("Other")
    bob = sb.user("bob")
    await sb.user_joins_voice(bob, other)
    outcomes, capture = await speaking(sb, demo, bot)
    await sb.move_member(sb.bot_user, other)                     # a new voice connection, a new MLS group
    outcome, frames_read = await outcomes.first()
    assert sb.bot_voice_channel(demo.guild) is other
    assert set(sb.dave_group(other).in_group) == {bot.user.id, bob.id}
    assert outcome == "played"
    assert_every_frame_heard(capture, frames_read)                # alice heard the start, bob the rest


async def test_voice_resume_mid_utterance_rejoins_the_group_and_drops_nothing(sb, demo, bot):
    outcomes, capture = await speaking(sb, demo, bot)
    assert await sb.close_voice_ws(demo.guild, 4015)            # discord.py RESUMEs; its DAVE session starts over
    outcome, frames_read = await outcomes.first()
    assert any(o.direction == "in" and o.op == 7 for o in sb.voice_log)
    rejoined = [e for e in sb.voice.dave.events if e.what == "proposals"
                and ("remove", bot.user.id) in e.detail and ("add", bot.user.id) in e.detail]
    assert rejoined, "the bot's old leaf was not replaced"
    assert outcome == "played"
    assert_every_frame_heard(capture, frames_read)


async def test_bad_commit_mid_utterance_recovers_through_op31(sb, demo, bot):
    outcomes, capture = await speaking(sb, demo, bot)
    sb.corrupt_next_commit()
    await sb.user_joins_voice(sb.user("bob"), demo.voice)       # the bot gets a damaged commit for bob's epoch
    outcome, frames_read = await outcomes.first()
    assert any(o.direction == "in" and o.op == 31 for o in sb.voice_log)
    assert any(e.what == "invalid" and e.user_id == bot.user.id for e in sb.voice.dave.events)
    assert outcome == "played"
    assert_every_frame_heard(capture, frames_read)
    await sb.wait_dave_ready(demo.guild)
    assert bot.speech.speaker(demo.guild.id).connection.privacy_code.replace(" ", "") == sb.privacy_code(demo.guild)


async def test_client_without_dave_is_refused_with_4017_and_told_why(sb, demo, bot, monkeypatch):
    # a discord.py without davey offers max_dave_protocol_version 0 (voice_state.has_dave False)
    monkeypatch.setattr(discord.voice_state.VoiceConnectionState, "max_dave_protocol_version",
                        property(lambda state: 0))
    answer = await join(sb, demo)
    assert "end-to-end encrypted voice (DAVE)" in answer and "davey" in answer
    assert sb.voice.refused_no_dave >= 1
    await sb._signal.wait_for(lambda: sb.bot_voice_channel(demo.guild) is None, 10, "the bot out of voice")
    assert bot.get_guild(demo.guild.id).voice_client is None
