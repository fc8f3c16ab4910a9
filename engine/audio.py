"""Streaming conversion of backend audio (float mono) to s16le frames: stateful resampling, loudness, edge fades."""

from __future__ import annotations

import numpy as np
import soxr

from engine.base import DISCORD_CHANNELS, DISCORD_RATE

_MIN_GAIN, _MAX_GAIN = 0.1, 10.0
_PEAK_CEILING = 0.98
_SILENCE_RMS = 1e-3  # below this a chunk is treated as silence and keeps the previous gain


def resample(x: np.ndarray, src_rate: int, rate: int) -> np.ndarray:
    """A whole piece of float32 mono audio at another rate (itself when the rates are equal)."""
    x = np.asarray(x, dtype=np.float32).reshape(-1)
    return x if src_rate == rate or not len(x) else soxr.resample(x, src_rate, rate, quality="HQ").astype(np.float32)


class LoudnessNormalizer:
    """RMS normalization to a target level, with the gain ramped between chunks (no steps, no clicks).

    Each chunk's target gain brings its RMS (of the louder half of its 20 ms blocks, so pauses don't
    count) to `target_dbfs`, bounded so the chunk's peak stays under the ceiling. The gain moves
    linearly from the previous chunk's gain to the new one: down within 10 ms, up across the chunk.
    """

    def __init__(self, target_dbfs: float | None) -> None:
        self.target = None if target_dbfs is None else 10.0 ** (target_dbfs / 20.0)
        self._gain: float | None = None

    def _chunk_gain(self, x: np.ndarray, rate: int) -> float | None:
        block = max(1, rate // 50)
        n = len(x) // block
        if n == 0:
            rms = float(np.sqrt(np.mean(x * x))) if len(x) else 0.0
        else:
            energies = np.mean(x[: n * block].reshape(n, block) ** 2, axis=1)
            loud = np.sort(energies)[n // 2 :]
            rms = float(np.sqrt(np.mean(loud)))
        if rms < _SILENCE_RMS or self.target is None:
            return None
        gain = min(max(self.target / rms, _MIN_GAIN), _MAX_GAIN)
        peak = float(np.max(np.abs(x)))
        if peak * gain > _PEAK_CEILING:
            gain = _PEAK_CEILING / peak
        return gain

    def process(self, x: np.ndarray, rate: int) -> np.ndarray:
        if self.target is None or len(x) == 0:
            return x
        new = self._chunk_gain(x, rate)
        if new is None:
            new = self._gain if self._gain is not None else 1.0
        old = self._gain if self._gain is not None else new
        self._gain = new
        if old == new:
            return x * np.float32(new)
        # Louder gain -> softer: ramp down within 10 ms, and start no higher than keeps that stretch
        # under the ceiling. Softer -> louder: ramp up slowly, across the whole chunk.
        n = min(len(x), max(1, rate // 100)) if new < old else len(x)
        head_peak = float(np.max(np.abs(x[:n])))
        if head_peak > 0:
            old = min(old, _PEAK_CEILING / head_peak)
        gain = np.full(len(x), new, dtype=np.float32)
        gain[:n] = np.linspace(old, new, num=n, dtype=np.float32)
        return x * gain


class FrameConverter:
    """Float32 mono at `src_rate` in, s16le at `rate`/`channels` out, in whole 20 ms frames.

    `feed` returns the whole frames ready so far (it holds back a short tail so the utterance's last
    frame can be faded); `flush` ends the utterance: drains the resampler, fades out, pads the last
    frame with silence. One resampler stream lives for the whole utterance, so segment joins are
    continuous. Fades happen only at the utterance's first and last samples.
    """

    def __init__(
        self,
        src_rate: int,
        rate: int = DISCORD_RATE,
        channels: int = DISCORD_CHANNELS,
        *,
        loudness_dbfs: float | None = -20.0,
        fade_ms: float = 5.0,
    ) -> None:
        if channels not in (1, 2):
            raise ValueError("channels must be 1 or 2")
        self.src_rate, self.rate, self.channels = src_rate, rate, channels
        self.frame_samples = rate // 50
        self._resampler = (
            None if src_rate == rate else soxr.ResampleStream(src_rate, rate, 1, dtype="float32", quality="HQ")
        )
        self._loudness = LoudnessNormalizer(loudness_dbfs)
        self._fade = max(0, int(rate * fade_ms / 1000.0))
        self._pending = np.zeros(0, dtype=np.float32)
        self._faded_in = 0  # output samples of the fade-in done so far
        self._fed = False  # any audio given to the resampler
        self._done = False
        self.samples_out = 0

    def _resample(self, x: np.ndarray, last: bool) -> np.ndarray:
        if self._resampler is None:
            return x
        return self._resampler.resample_chunk(x, last=last)

    def _encode(self, x: np.ndarray) -> bytes:
        pcm = np.clip(x * 32767.0, -32768.0, 32767.0).astype("<i2")
        if self.channels == 2:
            pcm = np.repeat(pcm, 2)
        self.samples_out += len(x)
        return pcm.tobytes()

    def _take_frames(self, hold: int) -> bytes:
        """Emit whole frames from the pending buffer, keeping at least `hold` samples back."""
        usable = max(0, len(self._pending) - hold)
        n = (usable // self.frame_samples) * self.frame_samples
        if n == 0:
            return b""
        out, self._pending = self._pending[:n], self._pending[n:]
        return self._encode(out)

    def feed(self, audio: np.ndarray) -> bytes:
        if self._done:
            raise RuntimeError("feed after flush")
        x = np.asarray(audio, dtype=np.float32).reshape(-1)
        if len(x) == 0:
            return b""
        self._fed = True
        x = self._loudness.process(x, self.src_rate)
        y = self._resample(x, last=False)
        if len(y):
            self._pending = np.concatenate([self._pending, self._fade_in(y)])
        return self._take_frames(hold=self._fade)

    def _fade_in(self, y: np.ndarray) -> np.ndarray:
        """Continue the utterance's fade-in over its first `fade` output samples, across calls."""
        n = min(self._fade - self._faded_in, len(y))
        if n <= 0:
            return y
        y = y.copy()
        y[:n] *= np.arange(self._faded_in, self._faded_in + n, dtype=np.float32) / np.float32(self._fade)
        self._faded_in += n
        return y

    def flush(self) -> bytes:
        """End of utterance: drain, fade out, pad the last frame. Returns b"" if nothing was fed."""
        if self._done:
            return b""
        self._done = True
        if self._resampler is not None and self._fed:
            tail = self._resampler.resample_chunk(np.zeros(0, dtype=np.float32), last=True)
            if len(tail):
                self._pending = np.concatenate([self._pending, self._fade_in(tail)])
        if len(self._pending) == 0:
            return b""
        x = self._pending.copy()
        k = min(self._fade, len(x))
        if k:
            x[-k:] *= np.linspace(1.0, 0.0, num=k, dtype=np.float32)
        pad = (-len(x)) % self.frame_samples
        if pad:
            x = np.concatenate([x, np.zeros(pad, dtype=np.float32)])
        self._pending = np.zeros(0, dtype=np.float32)
        return self._encode(x)

    def close(self) -> None:
        """Free the native resampler now: an utterance's end (or failure) must not leave it to the garbage
        collector, since a traceback can keep the converter alive until exit (soxr then reports a leak)."""
        self._done = True
        self._resampler = None
