"""Streaming audio encoders for mono s16 PCM: raw PCM, WAV with unknown sizes, and Ogg/Opus (libsndfile)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
from collections.abc import AsyncIterable

import numpy as np

log = logging.getLogger(__name__)

OPUS_RATE = 48_000
_SFC_SET_OGG_PAGE_LATENCY_MS = 0x1302  # libsndfile >= 1.2


class PcmEncoder:
    content_type = "audio/pcm"

    def __init__(self, rate: int) -> None:
        self.rate = rate

    def header(self) -> bytes:
        return b""

    async def encode(self, pcm: bytes) -> bytes:
        return pcm

    async def finish(self) -> bytes:
        return b""


class WavEncoder(PcmEncoder):
    content_type = "audio/wav"

    def header(self) -> bytes:
        """RIFF/WAVE, PCM s16 mono, both sizes 0xFFFFFFFF: the length is not known while streaming."""
        unknown = 0xFFFFFFFF
        fmt = struct.pack("<HHIIHH", 1, 1, self.rate, self.rate * 2, 2, 16)
        return (b"RIFF" + struct.pack("<I", unknown) + b"WAVE" + b"fmt " + struct.pack("<I", 16) + fmt + b"data"
                + struct.pack("<I", unknown))


class _Sink:
    """A write-only file for libsndfile that hands out what was written since the last take()."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self._pos = 0

    def write(self, data: bytes) -> int:
        self._buf += bytes(data)
        self._pos += len(data)
        return len(data)

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = 0) -> int:
        if (whence in (1, 2) and offset == 0) or (whence == 0 and offset == self._pos):
            return self._pos
        raise OSError("the output stream cannot seek")

    def read(self, n: int = -1) -> bytes:
        return b""

    def take(self) -> bytes:
        out, self._buf = bytes(self._buf), bytearray()
        return out


class OpusEncoder:
    """Ogg/Opus through libsndfile; encoding runs in a thread (it is CPU work)."""

    content_type = "audio/ogg"

    def __init__(self) -> None:
        import soundfile as sf

        self.rate = OPUS_RATE
        self._sink = _Sink()
        self._file = sf.SoundFile(self._sink, "w", samplerate=OPUS_RATE, channels=1, format="OGG", subtype="OPUS")
        try:  # short pages, so the stream is not held back a second at a time (private soundfile API)
            from soundfile import _ffi, _snd

            latency = _ffi.new("double*", 100.0)
            _snd.sf_command(self._file._file, _SFC_SET_OGG_PAGE_LATENCY_MS, latency, _ffi.sizeof("double"))
        except Exception:  # noqa: BLE001 - default pages (about 1 s) still stream
            log.debug("cannot shorten Ogg pages", exc_info=True)

    def header(self) -> bytes:
        return b""

    def _write(self, pcm: bytes) -> bytes:
        self._file.write(np.frombuffer(pcm, dtype="<i2"))
        return self._sink.take()

    def _close(self) -> bytes:
        self._file.close()
        return self._sink.take()

    async def encode(self, pcm: bytes) -> bytes:
        return await asyncio.to_thread(self._write, pcm) if pcm else b""

    async def finish(self) -> bytes:
        return await asyncio.to_thread(self._close)

    def close(self) -> None:
        if not self._file.closed:
            with contextlib.suppress(Exception):
                self._file.close()


def encoder_for(fmt: str, rate: int) -> PcmEncoder | OpusEncoder:
    """A fresh encoder for one stream: "opus" (48 kHz), "wav" or "pcm" at `rate`."""
    if fmt == "opus":
        return OpusEncoder()
    return WavEncoder(rate) if fmt == "wav" else PcmEncoder(rate)


async def ogg_opus(pcm_chunks: AsyncIterable[bytes]) -> bytes:
    """A whole Ogg/Opus file of mono s16 PCM at 48 kHz, encoded as the chunks arrive."""
    encoder = OpusEncoder()
    out = bytearray()
    try:
        async for pcm in pcm_chunks:
            out += await encoder.encode(pcm)
        out += await encoder.finish()
    finally:
        encoder.close()
    return bytes(out)
