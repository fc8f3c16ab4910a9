"""A smooth, time-varying spectral correction applied to the waveform itself (STFT, overlap-add)."""

from __future__ import annotations

import numpy as np
from scipy.signal import istft, stft

MAX_GAIN_DB = 24.0  # a correction is clipped to this either way
WINDOW_S = 0.023  # analysis window; the FFT is the envelope's, zero-padded


def apply_gain(x: np.ndarray, sr: int, gain_db: np.ndarray, frame_s: float) -> np.ndarray:
    """x filtered by gain_db (frames x bins, bins = n_fft / 2 + 1, one row per frame_s), interpolated to the
    STFT's frames; x's own fine structure and phase are kept."""
    n_fft = (gain_db.shape[1] - 1) * 2
    nperseg = min(n_fft, 1 << int(round(np.log2(sr * WINDOW_S))))
    hop = nperseg // 4
    _, times, spec = stft(x, sr, window="hann", nperseg=nperseg, noverlap=nperseg - hop, nfft=n_fft,
                          boundary="even", padded=True)
    rows = np.clip(times / frame_s, 0, len(gain_db) - 1)
    lo = np.floor(rows).astype(np.int64)
    hi = np.minimum(lo + 1, len(gain_db) - 1)
    frac = (rows - lo)[:, None]
    g = np.clip(gain_db[lo] * (1 - frac) + gain_db[hi] * frac, -MAX_GAIN_DB, MAX_GAIN_DB)
    spec *= (10.0 ** (g / 20.0)).T
    _, y = istft(spec, sr, window="hann", nperseg=nperseg, noverlap=nperseg - hop, nfft=n_fft, boundary=True)
    y = y[: len(x)]
    return np.pad(y, (0, len(x) - len(y))) if len(y) < len(x) else y
