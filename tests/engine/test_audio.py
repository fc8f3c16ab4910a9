"""Framing and the stateful resampler: whole 20 ms frames, no discontinuity at chunk joins, edge-only fades."""

from __future__ import annotations

import numpy as np

from engine.audio import FrameConverter, LoudnessNormalizer
from engine.base import FRAME_BYTES


def _sine(seconds: float, rate: int = 22050, freq: float = 220.0, amp: float = 0.3) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    return (amp * np.sin(2 * np.pi * freq * t)).astype(np.float32)


def _left(pcm: bytes) -> np.ndarray:
    return np.frombuffer(pcm, dtype="<i2").reshape(-1, 2)[:, 0].astype(np.float64) / 32767.0


def _convert(chunks: list[np.ndarray], **kw: object) -> tuple[bytes, list[int]]:
    conv = FrameConverter(22050, loudness_dbfs=None, **kw)  # type: ignore[arg-type]
    out, sizes = b"", []
    for c in chunks:
        pcm = conv.feed(c)
        sizes.append(len(pcm))
        out += pcm
    tail = conv.flush()
    sizes.append(len(tail))
    return out + tail, sizes


def test_every_chunk_is_whole_frames_and_stereo() -> None:
    rng = np.random.default_rng(1)
    x = _sine(2.0)
    cuts = np.sort(rng.integers(0, len(x), 30))
    out, sizes = _convert(np.split(x, cuts))
    assert all(s % FRAME_BYTES == 0 for s in sizes)
    frames = np.frombuffer(out, dtype="<i2").reshape(-1, 2)
    assert np.array_equal(frames[:, 0], frames[:, 1])
    assert abs(len(frames) / 48000 - 2.0) < 0.03  # the padded last frame at most


def test_resampler_has_no_discontinuity_at_joins() -> None:
    """Chunked conversion equals one-piece conversion; at the joins the waveform stays smooth."""
    x = _sine(1.5)
    rng = np.random.default_rng(2)
    cuts = np.sort(rng.integers(1, len(x) - 1, 40))
    whole, _ = _convert([x], fade_ms=0)
    chunked, _ = _convert(np.split(x, cuts), fade_ms=0)
    a, b = _left(whole), _left(chunked)
    assert len(a) == len(b)
    assert np.max(np.abs(a - b)) < 2e-4  # within int16 rounding
    # a 220 Hz sine at 0.3 changes by at most 2*pi*220*0.3/48000 per sample; a click would be far more
    steps = np.abs(np.diff(b[500:-2000]))
    assert np.max(steps) < 2 * np.pi * 220 * 0.3 / 48000 * 1.5


def test_a_fresh_resampler_per_chunk_would_click() -> None:
    """Guard for the test above: converting chunks independently does show the joins."""
    x = _sine(0.5)
    parts = np.split(x, [2000, 4000, 6000, 8000])
    separate = np.concatenate([_left(_convert([p], fade_ms=0)[0]) for p in parts])
    joined = _left(_convert(parts, fade_ms=0)[0])
    assert len(separate) != len(joined) or np.max(np.abs(np.diff(separate))) > np.max(np.abs(np.diff(joined)))


def test_fades_only_at_utterance_edges() -> None:
    x = np.full(22050, 0.25, dtype=np.float32)  # DC: any fade shows as a dip
    out, _ = _convert(np.split(x, [5000, 11000, 17000]), fade_ms=5.0)
    y = _left(out)
    fade = 240  # 5 ms at 48 kHz
    assert y[0] < 0.01 and y[fade // 2] < 0.2
    real_end = 48000  # one second of real audio, then padding
    assert y[real_end - 1] < 0.01
    middle = y[fade + 200 : real_end - fade - 200]
    assert np.min(middle) > 0.24  # no dips at the three joins


def test_loudness_reaches_target_and_ramps_between_chunks() -> None:
    norm = LoudnessNormalizer(-20.0)
    quiet, loud = _sine(1.0, amp=0.03), _sine(1.0, amp=0.5)
    a = norm.process(quiet, 22050)
    b = norm.process(loud, 22050)
    rms = float(np.sqrt(np.mean(b[-5000:] ** 2)))
    assert abs(20 * np.log10(rms) - (-20.0)) < 0.5
    assert abs(20 * np.log10(float(np.sqrt(np.mean(a**2)))) - (-20.0)) < 0.5
    joined = np.concatenate([a, b])
    assert np.max(np.abs(np.diff(joined))) < 0.1  # the gain change is a ramp, not a step
    assert np.max(np.abs(joined)) <= 0.98 + 1e-6  # and never clips


def test_flush_without_audio_is_empty_and_other_rates_work() -> None:
    assert FrameConverter(22050).flush() == b""
    conv = FrameConverter(22050, rate=16000, channels=1, loudness_dbfs=None)
    pcm = conv.feed(_sine(1.0)) + conv.flush()
    assert len(pcm) % (320 * 2) == 0 and abs(len(pcm) / 2 / 16000 - 1.0) < 0.03
