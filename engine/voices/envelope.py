"""Spectral envelope statistics of a voice, and the per-frame log-spectral correction toward another voice's.

The envelope is read on a fixed mel grid up to 8 kHz (the same at every sample rate, so statistics made at
16 kHz apply to Piper's 22.05 kHz), as a cepstrum over that grid. A voice's statistics are the mean and
spread of each cepstral coefficient over its voiced frames (and over its unvoiced speech); the correction
standardizes a frame to the source statistics and rescales it to the target's. It is a smooth log-spectral
curve, applied to the waveform as a filter (engine.voices.spectral), so the frame's fine detail is kept.
Coefficient 0 (loudness) is left alone. The broad shape (coefficients below a fixed order) is corrected the
same on every frame, by the voiced frames' mean correction: a recognizer's cepstral mean normalization
removes a steady correction, so it moves the timbre without moving the phones.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
from scipy.fft import dct, idct

BANDS = 40
TOP_HZ = 8000.0
SPREAD_RATIO = (0.5, 2.0)  # how far a coefficient's spread may be rescaled
UNVOICED_FLOOR_DB = 30.0  # unvoiced frames this far below the loudest frame are pauses, not speech
_LOG_FLOOR = 1e-12


@dataclass(frozen=True)
class EnvelopeStats:
    """Per-coefficient mean and spread of a voice's voiced frames."""

    mean: tuple[float, ...]
    std: tuple[float, ...]
    u_mean: tuple[float, ...] = ()  # the same over unvoiced speech (fricatives, bursts); () when too few
    u_std: tuple[float, ...] = ()


def _mel(hz: np.ndarray) -> np.ndarray:
    return 2595.0 * np.log10(1.0 + hz / 700.0)


@functools.lru_cache(maxsize=16)
def _grid(bins: int, sr: int) -> tuple[np.ndarray, np.ndarray]:
    """(bands x bins) matrix reading an envelope at the mel grid's centres, and (bins x bands) spreading a
    per-band correction back over the bins (flat past the grid's ends)."""
    freqs = np.arange(bins) * (sr / 2.0) / (bins - 1)
    centres_mel = np.linspace(_mel(np.array(60.0)), _mel(np.array(min(TOP_HZ, sr / 2.0))), BANDS)
    centres = 700.0 * (10.0 ** (centres_mel / 2595.0) - 1.0)
    read = _interpolation(np.interp(centres, freqs, np.arange(bins)), bins)
    spread = _interpolation(np.interp(_mel(freqs), centres_mel, np.arange(BANDS)), BANDS)
    return read, spread


def _interpolation(positions: np.ndarray, size: int) -> np.ndarray:
    """(len(positions) x size) matrix reading a vector of `size` linearly at fractional positions."""
    lo = np.floor(positions).astype(int)
    hi = np.minimum(lo + 1, size - 1)
    frac = positions - lo
    out = np.zeros((len(positions), size))
    rows = np.arange(len(positions))
    np.add.at(out, (rows, lo), 1.0 - frac)
    np.add.at(out, (rows, hi), frac)
    return out


def cepstra(sp: np.ndarray, sr: int) -> np.ndarray:
    """Each frame's envelope as BANDS cepstral coefficients over the mel grid."""
    read, _ = _grid(sp.shape[1], sr)
    return dct(np.log(np.maximum(sp, _LOG_FLOOR)) @ read.T, type=2, norm="ortho", axis=1)


def unvoiced_speech(f0: np.ndarray, sp: np.ndarray) -> np.ndarray:
    """Unvoiced frames within UNVOICED_FLOOR_DB of the loudest frame."""
    power_db = 10.0 * np.log10(np.sum(sp, axis=1) + _LOG_FLOOR)
    return (f0 <= 0) & (power_db > power_db.max() - UNVOICED_FLOOR_DB)


def measure(f0: np.ndarray, sp: np.ndarray, sr: int) -> EnvelopeStats:
    """The statistics of one voice from its envelope (voiced frames, and unvoiced speech)."""
    voiced = f0 > 0
    if np.count_nonzero(voiced) < 10:
        raise ValueError("too few voiced frames")
    cep = cepstra(sp[voiced], sr)
    unvoiced = unvoiced_speech(f0, sp)
    ucep = cepstra(sp[unvoiced], sr) if np.count_nonzero(unvoiced) >= 10 else np.zeros((0, BANDS))
    return EnvelopeStats(
        mean=tuple(float(v) for v in cep.mean(axis=0)),
        std=tuple(float(v) for v in cep.std(axis=0)),
        u_mean=tuple(float(v) for v in ucep.mean(axis=0)) if len(ucep) else (),
        u_std=tuple(float(v) for v in ucep.std(axis=0)) if len(ucep) else (),
    )


def correction_db(
    sp: np.ndarray, f0: np.ndarray, sr: int, src: EnvelopeStats, dst: EnvelopeStats, strength: float,
    steady_order: int = 0,
) -> np.ndarray:
    """The log-spectral correction in dB (frames x bins) that moves sp's voiced frames, and its unvoiced speech
    when both voices have statistics for it, from src's statistics toward dst's (strength 0..). Coefficients
    below steady_order get the voiced frames' mean correction on every frame, pauses included; with 0 every
    coefficient moves per frame and pauses are left alone."""
    voiced = f0 > 0
    if strength <= 0.0 or not np.any(voiced):
        return np.zeros_like(sp)
    delta = np.zeros((len(sp), BANDS))
    delta[voiced] = _delta(sp[voiced], sr, (src.mean, src.std), (dst.mean, dst.std))
    if src.u_mean and dst.u_mean:
        unvoiced = unvoiced_speech(f0, sp)
        if np.any(unvoiced):
            delta[unvoiced] = _delta(sp[unvoiced], sr, (src.u_mean, src.u_std), (dst.u_mean, dst.u_std))
    delta[:, :steady_order] = delta[voiced, :steady_order].mean(axis=0)
    delta[:, 0] = 0.0
    _, spread_m = _grid(sp.shape[1], sr)
    return (10.0 / np.log(10.0)) * strength * (idct(delta, type=2, norm="ortho", axis=1) @ spread_m.T)


def _delta(frames: np.ndarray, sr: int, src: tuple, dst: tuple) -> np.ndarray:
    """Per frame, the cepstral change that standardizes it to src's (mean, std) and rescales it to dst's."""
    ms, ss = np.asarray(src[0]), np.maximum(np.asarray(src[1]), 1e-3)
    md, sd = np.asarray(dst[0]), np.asarray(dst[1])
    cep = cepstra(frames, sr)
    return (cep - ms) * np.clip(sd / ss, *SPREAD_RATIO) + md - cep


def speech_seconds(audio: np.ndarray, sr: int, floor_db: float = 35.0) -> float:
    """Seconds of 10 ms frames within floor_db of the loudest: speaking time without pauses."""
    n = max(1, int(sr * 0.01))
    frames = len(audio) // n
    if frames == 0:
        return 0.0
    power = np.mean(np.square(np.asarray(audio[: frames * n], dtype=np.float64).reshape(frames, n)), axis=1)
    db = 10.0 * np.log10(power + 1e-12)
    return float(np.count_nonzero(db > db.max() - floor_db)) * 0.01
