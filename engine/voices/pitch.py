"""F0 tracking for voice matching: YIN on 10 ms frames, vectorized with numpy (about 1 ms per audio second)."""

from __future__ import annotations

import numpy as np
import soxr

TRACK_RATE = 8000  # F0 of speech lies far below 4 kHz; tracking at 8 kHz keeps every frame small
DIP_THRESHOLD = 0.15  # YIN: the first lag whose normalized difference dips below this is the period
VOICED_MAX = 0.35  # frames whose best dip stays above this are aperiodic (unvoiced)
SILENCE_DB = 40.0  # frames this far below the loudest frame are unvoiced
_WALK_STEPS = 8  # from the first dip below the threshold down to its local minimum, at most this many lags


def track_f0(
    audio: np.ndarray, sr: int, f0_floor: float, f0_ceil: float, frame_period_ms: float = 10.0
) -> tuple[np.ndarray, np.ndarray]:
    """F0 in Hz per frame (0 where unvoiced) and the frame times in seconds, as pyworld's trackers return.

    YIN (de Cheveigne & Kawahara 2002): cumulative mean normalized difference function, first dip
    below a threshold, parabolic interpolation. On the default Piper voice it agrees with pYIN and its
    WORLD re-synthesis is closer to the input than with harvest, at about 1/100 of harvest's cost.
    """
    x = np.asarray(audio, dtype=np.float32).reshape(-1)
    n_frames = int(len(x) / sr * 1000.0 / frame_period_ms) + 1
    times = np.arange(n_frames) * (frame_period_ms / 1000.0)
    if len(x) == 0:
        return np.zeros(n_frames), times
    y = (soxr.resample(x, sr, TRACK_RATE) if sr != TRACK_RATE else x).astype(np.float64)
    max_lag = int(np.ceil(TRACK_RATE / f0_floor))
    min_lag = max(2, int(TRACK_RATE / f0_ceil))
    window = max_lag
    span = window + max_lag
    padded = np.pad(y, (span, span))
    starts = np.round(times * TRACK_RATE).astype(np.int64) + span - span // 2
    frames = padded[starts[:, None] + np.arange(span)[None, :]]
    cmnd, energy = _normalized_difference(frames, window, max_lag)

    rows = np.arange(n_frames)
    search = cmnd[:, min_lag:max_lag]
    below = search < DIP_THRESHOLD
    lag = np.where(below.any(axis=1), np.argmax(below, axis=1), np.argmin(search, axis=1))
    for _ in range(_WALK_STEPS):
        step = np.minimum(lag + 1, search.shape[1] - 1)
        lag = np.where(search[rows, step] < search[rows, lag], step, lag)
    lag = lag + min_lag
    before, at, after = cmnd[rows, lag - 1], cmnd[rows, lag], cmnd[rows, np.minimum(lag + 1, max_lag)]
    curve = before - 2.0 * at + after
    with np.errstate(divide="ignore", invalid="ignore"):
        shift = np.where(np.abs(curve) > 1e-12, 0.5 * (before - after) / curve, 0.0)
    period = lag + np.clip(shift, -1.0, 1.0)
    loud = energy > energy.max() * 10.0 ** (-SILENCE_DB / 10.0) if energy.max() > 0 else np.zeros(n_frames, bool)
    voiced = (at < VOICED_MAX) & loud
    f0 = np.where(voiced, TRACK_RATE / period, 0.0)
    return np.clip(f0, 0.0, f0_ceil), times


def _normalized_difference(frames: np.ndarray, window: int, max_lag: int) -> tuple[np.ndarray, np.ndarray]:
    """YIN's cumulative mean normalized difference d'(lag) for lags 0..max_lag of each frame, and the
    frame's energy. d(lag) = e(0) + e(lag) - 2 r(lag), with r by FFT and e by running sums."""
    n = 1 << int(np.ceil(np.log2(frames.shape[1] + window)))
    head = frames[:, :window]
    r = np.fft.irfft(np.conj(np.fft.rfft(head, n)) * np.fft.rfft(frames, n), n)[:, : max_lag + 1]
    sums = np.concatenate([np.zeros((len(frames), 1)), np.cumsum(frames * frames, axis=1)], axis=1)
    lags = np.arange(max_lag + 1)
    e0 = sums[:, window]
    diff = e0[:, None] + (sums[:, lags + window] - sums[:, lags]) - 2.0 * r
    diff[:, 0] = 0.0
    running = np.cumsum(diff[:, 1:], axis=1)
    cmnd = np.ones_like(diff)
    cmnd[:, 1:] = diff[:, 1:] * lags[1:] / np.maximum(running, 1e-12)
    return cmnd, e0 / window
