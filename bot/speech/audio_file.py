"""Speech as an audio file (/tts): text and voice rendered to Ogg/Opus, a bounded number at once per guild."""

from __future__ import annotations

import contextlib
import io
import logging
import time
from collections.abc import AsyncIterator

import discord

from bot.errors import UserError
from engine.base import AudioChunk, Engine, EngineError, Voice
from engine.encoders import OPUS_RATE, ogg_opus

log = logging.getLogger(__name__)


class AudioFiles:
    """Renders files off the voice channels; at most `limit` renders of one guild are in flight."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._in_flight: dict[int, int] = {}

    async def render(self, guild_id: int, text: str, voice: Voice, *, limit: int) -> bytes:
        """The whole utterance as Ogg/Opus (48 kHz mono), or a UserError saying why not."""
        if self._in_flight.get(guild_id, 0) >= limit:
            raise UserError(f"{limit} audio files are being made in this server already; try again in a moment.")
        self._in_flight[guild_id] = self._in_flight.get(guild_id, 0) + 1
        t0 = time.perf_counter()
        try:
            stream = self.engine.stream(text, voice, key=guild_id, rate=OPUS_RATE, channels=1)
            async with contextlib.aclosing(stream):
                data = await ogg_opus(_pcm(stream))
        except EngineError as exc:
            raise UserError(str(exc)) from None
        finally:
            left = self._in_flight[guild_id] - 1
            if left:
                self._in_flight[guild_id] = left
            else:
                del self._in_flight[guild_id]
        log.info("audio file guild=%s chars=%d bytes=%d seconds=%.2f", guild_id, len(text), len(data),
                 time.perf_counter() - t0)
        return data


async def _pcm(stream: AsyncIterator[AudioChunk]) -> AsyncIterator[bytes]:
    async for chunk in stream:
        yield chunk.pcm


def attachment(data: bytes, filename: str = "speech.ogg") -> discord.File:
    """An Ogg/Opus file as a Discord attachment (Discord plays .ogg inline)."""
    return discord.File(io.BytesIO(data), filename)
