"""feed: an engine stream's chunks into a StreamingSource, on the loop: cut into frames (the engine framed them),
marking where each segment after the first starts, waiting while the buffer is full."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from engine.base import FRAME_BYTES, AudioChunk

if TYPE_CHECKING:
    from bot.speech.playback.source import StreamingSource

log = logging.getLogger(__name__)


async def feed(source: StreamingSource, chunks: AsyncIterator[AudioChunk]) -> None:
    """Fill `source` from `chunks` until they end, fail or the source is closed; then finish it."""
    segment: int | None = None
    try:
        async for chunk in chunks:
            if chunk.segment != segment:
                if segment is not None:
                    source.mark_boundary()
                segment = chunk.segment
            await _push(source, chunk.pcm)
            if source.closed:
                break
    except asyncio.CancelledError:
        source.error = source.error or asyncio.CancelledError()
    except Exception as exc:  # noqa: BLE001 - reported to the speaker, never raised in the player thread
        source.error = exc
    finally:
        closer = getattr(chunks, "aclose", None)
        if closer is not None:
            try:
                await closer()
            except Exception:
                log.debug("closing the engine stream failed", exc_info=True)
        source.finish()


async def _push(source: StreamingSource, pcm: bytes) -> None:
    """Add a chunk's frames: the engine frames audio once (engine.audio.FrameConverter), here it is only cut."""
    if len(pcm) % FRAME_BYTES:
        raise ValueError(f"the engine sent {len(pcm)} bytes of audio, not whole 20 ms frames")
    for offset in range(0, len(pcm), FRAME_BYTES):
        frame = pcm[offset:offset + FRAME_BYTES]
        while not source.closed and not source.offer(frame):
            await source.wait_space()
        if source.closed:
            return
    source.grew()
