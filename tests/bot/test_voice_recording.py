"""A recording ends when the call's keys are lost to it, hands over what it heard as a WAV and keeps nothing after;
one that heard nothing registers nothing (real PyNaCl, real Opus; the call stands in for the voice connection)."""

from __future__ import annotations

import io
import wave
from types import SimpleNamespace

import discord
import pytest

from bot.speech.connection.member_audio import LOST_KEY_FRAMES, CallKeys, MemberAudio
from bot.speech.connection.voice_receive import ReceiveCounts
from bot.voice_recording import DONE, KEY_LOST, NOTHING_HEARD, Recording, VoiceRecordings
from tests.bot.test_member_audio import KEY, KEYS, TONE, Dave, packet

CHANNEL = 5


class Call:
    """Stands for the bot's VoiceConnection in channel CHANNEL: it records as the real one does (a MemberAudio whose
    packets are fed by the test instead of the receive path) and says when the member's packets stop being taken."""

    channel_id = CHANNEL

    def __init__(self, keys: CallKeys) -> None:
        self.keys = keys
        self.taking: set[int] = set()
        self.audio: MemberAudio | None = None

    def is_connected(self) -> bool:
        return True

    def record(self, user_id, max_s, decoder=None) -> MemberAudio:
        self.taking.add(user_id)
        self.audio = MemberAudio(user_id, lambda: self.keys, ReceiveCounts(), max_s=max_s)
        return self.audio

    def stop_recording(self, user_id) -> None:
        self.taking.discard(user_id)


def member_in_the_call():
    """A guild member in the bot's voice channel, as discord.py's cache shows them."""
    guild = SimpleNamespace(id=3)
    member = SimpleNamespace(id=7, guild=guild, voice=SimpleNamespace(channel=SimpleNamespace(id=CHANNEL)))
    guild.get_member = lambda uid: member if uid == member.id else None
    return member


async def test_a_key_the_bot_cannot_follow_ends_it_and_nothing_is_kept():
    call = Call(CallKeys(KEYS.mode, KEY, Dave()))
    recording = Recording(call, member_in_the_call(), CHANNEL)
    opus = discord.opus.Encoder().encode(TONE, 960)
    recording.audio.packet(packet(b"E2EE" + opus), 0.0)
    for n in range(LOST_KEY_FRAMES):
        recording.audio.packet(packet(opus, n), 0.0)
    assert await recording.run(lambda _: None) is KEY_LOST
    assert not recording.audio.pcm and not call.taking


async def test_what_was_heard_is_handed_over_as_a_wav_and_then_forgotten():
    call = Call(KEYS)
    recording = Recording(call, member_in_the_call(), CHANNEL)
    encoder = discord.opus.Encoder()
    for n in range(10):
        recording.audio.packet(packet(encoder.encode(TONE, 960), n), 0.0)
    recording.finish()                                             # Stop pressed
    assert await recording.run(lambda _: None) is DONE and not call.taking
    assert "0.2 s heard (0.2 s speech, 0.0 s silence)" in recording.progress()
    with wave.open(io.BytesIO(recording.take_wav())) as w:
        assert (w.getnchannels(), w.getframerate(), w.getnframes()) == (1, 48_000, 10 * 960)
    assert not recording.audio.pcm


async def test_a_recording_that_heard_nothing_registers_nothing():
    recording = Recording(Call(KEYS), member_in_the_call(), CHANNEL)
    recording.finish()
    assert await recording.run(lambda _: None) is NOTHING_HEARD


async def test_a_recording_that_cannot_be_shown_to_its_member_takes_and_keeps_nothing():
    recordings = VoiceRecordings(SimpleNamespace(on_end=[]))
    call = Call(KEYS)
    member = member_in_the_call()
    recording = recordings.active[member.guild.id, member.id] = Recording(call, member, CHANNEL)
    recording.audio.packet(packet(discord.opus.Encoder().encode(TONE, 960)), 0.0)

    async def shown():
        raise RuntimeError("the message could not be edited")

    with pytest.raises(RuntimeError):
        await recordings.run(recording, shown(), lambda _: None)
    assert not call.taking and not recording.audio.pcm and not recordings.active
