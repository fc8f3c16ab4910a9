"""VoiceRecordings (bot.recordings): a consenting member's voice kept from the bot's call, up to 30 s or Stop."""

from __future__ import annotations

import asyncio
import io
import time
import wave
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import discord
import numpy as np

from bot.errors import UserError
from bot.speech.connection.member_audio import FRAME_S, MemberAudio
from bot.speech.connection.voice_connection import VoiceConnection
from bot.speech.service import Ending, SpeechService
from engine.voices.clip import MAX_SPEECH_S

TICK_S = 0.25  # how often a recording looks at how it stands (its progress shown, the member still there)
RATE = 48_000  # the call's PCM: 48 kHz stereo s16


@dataclass(frozen=True)
class End:
    """Why a recording ended: `keep` registers what was heard; otherwise `message` tells the member why not."""

    keep: bool
    message: str = ""


DONE = End(True)  # Stop pressed, or the time or the length was reached
LEFT = End(False, "You left my voice channel, so the recording ended; nothing was kept.")
BOT_LEFT = End(False, "I left the voice channel, so the recording ended; nothing was kept.")
STOPPED = End(False, "/stop ended the recording; nothing was kept.")
KEY_LOST = End(False, "The call's end-to-end encryption changed in a way I could not follow, so the recording "
                      "ended; nothing was kept. Try /voice record again.")
NOTHING_HEARD = End(False, "I heard nothing from you in the call (is your microphone muted?); nothing was kept.")
BY_ENDING: dict[Ending, End] = {"stop": STOPPED, "left": BOT_LEFT}


class Recording:
    """One member's voice being kept from the call: only their packets are opened (VoiceConnection.record); ends
    on Stop, at MAX_SPEECH_S, or when the member, the bot or the call's keys go."""

    def __init__(self, connection: VoiceConnection, member: discord.Member, channel_id: int, *,
                 decoder: Callable[[], Any] | None = None) -> None:
        self.connection = connection
        self.member = member
        self.channel_id = channel_id
        self.audio: MemberAudio = connection.record(member.id, MAX_SPEECH_S, decoder)
        self.started = time.monotonic()
        self.end: End | None = None
        self._ended = asyncio.Event()

    def finish(self, end: End = DONE) -> None:
        """End it (the first reason wins)."""
        if self.end is None:
            self.end = end
            self._ended.set()

    @property
    def heard_s(self) -> float:
        return self.audio.frames * FRAME_S

    @property
    def speech_s(self) -> float:
        return self.audio.speech_frames * FRAME_S

    def progress(self) -> str:
        left = max(0.0, MAX_SPEECH_S - (time.monotonic() - self.started))
        return (f"Recording your voice: {self.heard_s:.1f} s heard ({self.speech_s:.1f} s speech, "
                f"{self.heard_s - self.speech_s:.1f} s silence); {left:.0f} s left. Speak, then press Stop.")

    def _how_it_stands(self) -> End | None:
        if not self.connection.is_connected() or self.connection.channel_id != self.channel_id:
            return BOT_LEFT
        voice = self.member.guild.get_member(self.member.id)
        if voice is None or voice.voice is None or voice.voice.channel is None \
                or voice.voice.channel.id != self.channel_id:
            return LEFT
        if self.audio.key_lost:
            return KEY_LOST
        if self.audio.full or time.monotonic() - self.started >= MAX_SPEECH_S:
            return DONE
        return None

    async def run(self, show: Callable[[str], None]) -> End:
        """Until it ends, `show` its progress each tick; then the member's packets are no longer taken."""
        try:
            while self.end is None:
                now = self._how_it_stands()
                if now is not None:
                    self.finish(now)
                    break
                show(self.progress())
                try:
                    await asyncio.wait_for(self._ended.wait(), TICK_S)
                except asyncio.TimeoutError:
                    pass
        finally:
            self.connection.stop_recording(self.member.id)
        assert self.end is not None
        if self.end.keep and not self.audio.frames:
            self.end = NOTHING_HEARD
        if not self.end.keep:
            self.audio.forget()
        return self.end

    def take_wav(self) -> bytes:
        """What was heard as a mono 48 kHz 16-bit WAV (as a member would upload it); the recording keeps nothing."""
        stereo = np.frombuffer(bytes(self.audio.pcm), dtype="<i2").reshape(-1, 2).astype(np.int32)
        self.audio.forget()
        out = io.BytesIO()
        with wave.open(out, "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(RATE)
            w.writeframes(((stereo[:, 0] + stereo[:, 1]) // 2).astype("<i2").tobytes())
        return out.getvalue()


class VoiceRecordings:
    """Who is being recorded in each guild; ended by /stop and by the bot leaving (SpeechService.on_end)."""

    def __init__(self, speech: SpeechService) -> None:
        self.speech = speech
        self.decoder: Callable[[], Any] | None = None  # discord.py's Opus decoder unless a test counts its calls
        self.active: dict[tuple[int, int], Recording] = {}  # (guild, member) -> their recording
        speech.on_end.append(self._speech_ended)

    def check(self, member: discord.Member) -> int:
        """The bot's voice channel, where `member` must be and is not already being recorded, or a UserError."""
        channel = self.speech.voice_channel(member.guild.id)
        if channel is None or not self.speech.is_connected(member.guild.id):
            raise UserError("I'm not in a voice channel here. Use /join, then /voice record in my channel.")
        if member.voice is None or member.voice.channel is None or member.voice.channel.id != channel.id:
            raise UserError(f"Join my voice channel, {channel.mention}, to record your voice there.")
        if (member.guild.id, member.id) in self.active:
            raise UserError("You are being recorded already; press Stop on that recording first.")
        return channel.id

    def start(self, member: discord.Member) -> Recording:
        """Keep `member`'s voice (they consented) from the bot's call."""
        channel_id = self.check(member)
        recording = Recording(self.speech.connection(member.guild.id), member, channel_id, decoder=self.decoder)
        self.active[member.guild.id, member.id] = recording
        return recording

    async def run(self, recording: Recording, started: Awaitable[object], show: Callable[[str], None]) -> End:
        """`started` (the member shown the recording and its Stop button), then the recording until it ends; if
        either fails, the member's packets are no longer taken and nothing is kept."""
        try:
            await started
            return await recording.run(show)
        except BaseException:
            recording.connection.stop_recording(recording.member.id)
            recording.audio.forget()
            raise
        finally:
            self.active.pop((recording.member.guild.id, recording.member.id), None)

    def _speech_ended(self, guild_id: int, why: Ending) -> None:
        for (guild, _), recording in list(self.active.items()):
            if guild == guild_id:
                recording.finish(BY_ENDING[why])
