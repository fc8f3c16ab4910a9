"""The conversion's signal processing: PSOLA moves F0 and keeps length and spectrum, the STFT gain filters."""

from __future__ import annotations

import numpy as np
import pytest

from engine.voices import psola, spectral
from engine.voices.pitch import track_f0

SR = 22_050
FRAME_S = 0.01


def buzz(f0_hz: float, seconds: float = 1.0) -> np.ndarray:
    """A vowel-like pulse train at f0_hz through one resonance near 700 Hz (and a quiet tail)."""
    n = int(SR * seconds)
    pulses = np.zeros(n)
    pulses[:: int(SR / f0_hz)] = 1.0
    t = np.arange(int(SR * 0.02)) / SR
    ring = np.exp(-t * 300.0) * np.sin(2 * np.pi * 700.0 * t)
    return np.convolve(pulses, ring)[:n]


def median_f0(x: np.ndarray) -> float:
    f0, _ = track_f0(x, SR, 55.0, 600.0)
    return float(np.median(f0[f0 > 0]))


@pytest.mark.parametrize("ratio", [0.8, 1.5, 2.0])
def test_psola_moves_f0_and_keeps_length(ratio: float) -> None:
    x = buzz(110.0)
    f0, _ = track_f0(x, SR, 55.0, 600.0)
    y = psola.shift(x, SR, f0, f0 * ratio, FRAME_S)
    assert len(y) == len(x)
    assert abs(12 * np.log2(median_f0(y) / median_f0(x)) - 12 * np.log2(ratio)) < 0.5


def test_psola_keeps_the_resonance() -> None:
    x = buzz(110.0)
    f0, _ = track_f0(x, SR, 55.0, 600.0)
    y = psola.shift(x, SR, f0, f0 * 1.5, FRAME_S)
    freqs = np.fft.rfftfreq(len(y), 1 / SR)
    spec = np.abs(np.fft.rfft(y * np.hanning(len(y))))
    band = (freqs > 300) & (freqs < 3000)
    peak = freqs[band][np.argmax(spec[band])]
    assert 500 < peak < 900, peak  # still near 700 Hz: the envelope was not resampled with the pitch


def test_psola_without_voicing_or_change_returns_the_input() -> None:
    x = buzz(110.0)
    f0, _ = track_f0(x, SR, 55.0, 600.0)
    assert np.allclose(psola.shift(x, SR, np.zeros_like(f0), np.zeros_like(f0), FRAME_S), x)
    same = psola.shift(x, SR, f0, f0, FRAME_S)
    assert np.corrcoef(same, x)[0, 1] > 0.95


def test_spectral_gain() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal(SR)
    frames, bins = int(1 / FRAME_S) + 1, 513
    assert np.allclose(spectral.apply_gain(x, SR, np.zeros((frames, bins)), FRAME_S), x)
    freqs = np.arange(bins) * (SR / 2) / (bins - 1)
    gain = np.where(freqs > 4000, -12.0, 0.0)[None, :].repeat(frames, axis=0)
    y = spectral.apply_gain(x, SR, gain, FRAME_S)
    fx, fy = np.abs(np.fft.rfft(x)) ** 2, np.abs(np.fft.rfft(y)) ** 2
    f = np.fft.rfftfreq(len(x), 1 / SR)
    high = 10 * np.log10(fy[f > 5000].sum() / fx[f > 5000].sum())
    low = 10 * np.log10(fy[f < 3000].sum() / fx[f < 3000].sum())
    assert abs(high + 12) < 1.0 and abs(low) < 0.5, (high, low)
