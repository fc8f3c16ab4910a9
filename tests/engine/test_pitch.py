"""F0 tracking (engine.pitch): known pitches are found, silence and noise are unvoiced, odd input is safe."""

from __future__ import annotations

import numpy as np
import pytest

from engine.voices.pitch import track_f0

SR = 22_050


def harmonic(f0: np.ndarray, sr: int = SR, harmonics: int = 12) -> np.ndarray:
    """A voiced-like signal: decaying harmonics of an F0 contour given per sample (fundamental included)."""
    phase = 2 * np.pi * np.cumsum(f0) / sr
    out = sum((0.8**k) * np.sin((k + 1) * phase) for k in range(harmonics))
    return (0.3 * out / np.max(np.abs(out))).astype(np.float32)


@pytest.mark.parametrize("hz", [70.0, 110.0, 220.0, 350.0])
def test_steady_pitch_is_found(hz: float) -> None:
    f0, times = track_f0(harmonic(np.full(SR, hz)), SR, 55.0, 600.0)
    assert len(f0) == len(times) and times[1] - times[0] == pytest.approx(0.01)
    inner = f0[5:-5]
    assert np.all(inner > 0)
    assert np.max(np.abs(inner / hz - 1)) < 0.02


def test_missing_fundamental_is_not_reported_an_octave_up() -> None:
    hz = 100.0
    phase = 2 * np.pi * hz * np.arange(SR) / SR
    x = sum(np.sin(k * phase) for k in range(2, 10)).astype(np.float32)  # no energy at 100 Hz itself
    f0, _ = track_f0(x * 0.05, SR, 55.0, 600.0)
    assert np.median(f0[5:-5]) == pytest.approx(hz, rel=0.03)


def test_glide_is_followed() -> None:
    contour = np.linspace(100.0, 200.0, SR)
    f0, times = track_f0(harmonic(contour), SR, 55.0, 400.0)
    expected = np.interp(times, np.arange(SR) / SR, contour)
    inner = slice(5, -5)
    assert np.max(np.abs(f0[inner] / expected[inner] - 1)) < 0.03


def test_silence_and_noise_are_unvoiced() -> None:
    rng = np.random.default_rng(1)
    pitched = harmonic(np.full(SR // 2, 150.0))
    x = np.concatenate([np.zeros(SR // 2, np.float32), pitched, 0.2 * rng.standard_normal(SR // 2).astype(np.float32)])
    f0, times = track_f0(x, SR, 55.0, 600.0)
    silent, voiced, noise = (times < 0.45), (times > 0.55) & (times < 0.95), times > 1.05
    assert np.all(f0[silent] == 0)
    assert np.mean(f0[voiced] > 0) > 0.95
    assert np.mean(f0[noise] > 0) < 0.1


@pytest.mark.parametrize("x", [np.zeros(0, np.float32), np.zeros(10, np.float32), np.zeros(SR, np.float32)])
def test_degenerate_input_gives_unvoiced_frames(x: np.ndarray) -> None:
    f0, times = track_f0(x, SR, 55.0, 600.0)
    assert len(f0) == len(times) >= 1 and np.all(f0 == 0)


def test_default_voice_is_tracked_at_its_low_register(piper_backend) -> None:
    """The bundled voice speaks around 90 Hz; trackers that double it (dio, harvest on some frames)
    re-synthesize it an octave up."""
    from engine.base import Voice

    audio = np.concatenate(list(piper_backend.synthesize("We will meet at the station at half past seven.", Voice())))
    f0, _ = track_f0(audio, piper_backend.info.sample_rate, 55.0, 400.0)
    voiced = f0[f0 > 0]
    assert np.mean(f0 > 0) > 0.3
    assert 70.0 < np.median(voiced) < 120.0
