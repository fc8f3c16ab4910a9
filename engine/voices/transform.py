"""A matching profile applied to audio: the F0 mapped (PSOLA) and the envelope corrected per segment."""

from __future__ import annotations

import functools
import math
import warnings
from dataclasses import dataclass

import numpy as np

from engine.base import EngineError, Voice
from engine.voices import envelope, psola, spectral
from engine.voices.envelope import EnvelopeStats
from engine.voices.pitch import track_f0
from engine.voices.profile import MatchProfile, clamp, profile_for

with warnings.catch_warnings():  # pyworld imports pkg_resources, which warns on import
    warnings.simplefilter("ignore")
    import pyworld

FRAME_PERIOD_MS = 10.0  # the envelope's frames; the correction is interpolated between them
F0_FLOOR = 55.0
F0_CEIL = 600.0
# F0 tracking: engine.voices.pitch (YIN). harvest costs ~0.12 real time per segment and reports twice the
# true F0 (~90 Hz) on many of the default voice's frames; dio does so on most. Re-synthesis with YIN's
# F0 is the closest to its input of the three (Resemblyzer cosine 0.94, harvest 0.87, dio 0.82).
DEFAULT_TRACK_RANGE = (60.0, 400.0)
_FLOOR = 1e-12


@dataclass(frozen=True)
class Transform:
    """What to do to one segment: a log-F0 mapping and an envelope warp."""

    src_mean: float = 0.0
    src_std: float = 1.0
    track_range: tuple[float, float] = DEFAULT_TRACK_RANGE
    dst_mean: float = 0.0
    dst_std: float = 1.0
    map_stats: bool = False
    shift_semitones: float = 0.0
    warp: float = 1.0
    env_src: EnvelopeStats | None = None
    env_dst: EnvelopeStats | None = None
    env_strength: float = 0.0
    env_steady: int = 0
    vocoded: bool = False

    @property
    def identity(self) -> bool:
        return not self.map_stats and self.shift_semitones == 0.0 and self.warp == 1.0 and self.env_strength == 0.0

    @classmethod
    def for_profile(cls, profile: MatchProfile | None, semitones: float = 0.0) -> Transform:
        if profile is None:
            return cls(shift_semitones=semitones)
        return cls(
            track_range=track_range(profile.source_lf0_mean, profile.source_lf0_std),
            src_mean=profile.source_lf0_mean,
            src_std=profile.source_lf0_std,
            dst_mean=profile.target_lf0_mean,
            dst_std=profile.target_lf0_std * profile.f0_scale,
            map_stats=True,
            shift_semitones=semitones,
            warp=profile.warp,
            env_src=profile.env_src,
            env_dst=profile.env_dst,
            env_strength=profile.env_strength if profile.env_src and profile.env_dst else 0.0,
            env_steady=profile.env_steady,
            vocoded=profile.vocoded,
        )


def apply_voice(audio: np.ndarray, sr: int, voice: Voice) -> np.ndarray:
    """Speak one segment in the voice's matched pitch and timbre; float32 mono in and out, same rate."""
    transform = Transform.for_profile(profile_for(voice), float(voice.pitch or 0.0))
    return apply_transform(audio, sr, transform)


@dataclass(frozen=True)
class Analysis:
    """One piece of audio, its F0 contour and its WORLD spectral envelope."""

    x: np.ndarray  # float64 mono
    f0: np.ndarray
    sp: np.ndarray
    sr: int
    rms: float

    @functools.cached_property
    def ap(self) -> np.ndarray:
        """WORLD's aperiodicity (d4c), made on first use: only matching "close" re-synthesizes, and a fit scores
        its every candidate on one analysis."""
        return pyworld.d4c(self.x, self.f0, np.arange(len(self.f0)) * (FRAME_PERIOD_MS / 1000.0), self.sr)


def analyze(audio: np.ndarray, sr: int, f0_range: tuple[float, float] = DEFAULT_TRACK_RANGE) -> Analysis:
    """F0 (YIN) within f0_range and the cheaptrick envelope."""
    xd = np.asarray(audio, dtype=np.float64).reshape(-1)
    f0, times = track_f0(xd, sr, f0_range[0], f0_range[1], FRAME_PERIOD_MS)
    sp = pyworld.cheaptrick(xd, f0, times, sr)
    rms = float(np.sqrt(np.mean(xd * xd))) if len(xd) else 0.0
    return Analysis(x=xd, f0=f0, sp=sp, sr=sr, rms=rms)


def render(analysis: Analysis, transform: Transform) -> np.ndarray:
    """The analysed audio itself with its F0 mapped (PSOLA) and its envelope warped and moved toward the
    target's statistics by a smooth filter (STFT), at the input's level: Piper's own excitation and phase are
    kept. A vocoded transform re-synthesizes instead (_vocode)."""
    f0 = map_f0(analysis.f0, transform)
    if transform.vocoded:
        return _vocode(analysis, f0, transform)
    y = analysis.x
    if not np.allclose(f0, analysis.f0, rtol=1e-6, atol=0.0):  # (exp(log(f0)) is not always f0)
        y = psola.shift(y, analysis.sr, analysis.f0, f0, FRAME_PERIOD_MS / 1000.0)
    gain = correction_db(analysis, transform)
    if gain is not None:
        y = spectral.apply_gain(y, analysis.sr, gain, FRAME_PERIOD_MS / 1000.0)
    return match_level(y, analysis.rms)


def _vocode(analysis: Analysis, f0: np.ndarray, transform: Transform) -> np.ndarray:
    """The analysed audio re-synthesized by WORLD with F0 f0 and its envelope (and aperiodicity) warped and
    corrected per frame, at the input's level (matching "close")."""
    ap = analysis.ap if transform.warp == 1.0 else warp_envelope(analysis.ap, transform.warp)
    gain = correction_db(analysis, transform)
    sp = analysis.sp if gain is None else analysis.sp * 10.0 ** (gain / 10.0)
    y = pyworld.synthesize(f0, sp, ap, analysis.sr, FRAME_PERIOD_MS)[: len(analysis.x)]
    return match_level(np.pad(y, (0, len(analysis.x) - len(y))), analysis.rms)


def correction_db(analysis: Analysis, transform: Transform) -> np.ndarray | None:
    """The per-frame log-spectral correction (dB) of the formant warp and the envelope statistics, or None."""
    sp, gain = analysis.sp, None
    if transform.warp != 1.0:
        warped = warp_envelope(sp, transform.warp)
        gain = 10.0 * np.log10(np.maximum(warped, _FLOOR) / np.maximum(sp, _FLOOR))
        sp = warped
    if transform.env_strength > 0.0 and transform.env_src and transform.env_dst:
        moved = envelope.correction_db(sp, analysis.f0, analysis.sr, transform.env_src, transform.env_dst,
                                       transform.env_strength, transform.env_steady)
        gain = moved if gain is None else gain + moved
    return gain


def apply_transform(audio: np.ndarray, sr: int, transform: Transform) -> np.ndarray:
    """Audio with its F0 mapped and its envelope corrected as the transform says (render)."""
    x = np.asarray(audio, dtype=np.float32).reshape(-1)
    if transform.identity or len(x) < int(sr * 0.05) or not np.any(x):
        return x.copy()
    return render(analyze(x, sr, transform.track_range), transform)


def track_range(lf0_mean: float, lf0_std: float) -> tuple[float, float]:
    """The F0 search range for a voice with these log-F0 statistics (narrow = fewer octave errors)."""
    spread = 2.5 * max(lf0_std, 0.1)
    low = clamp(math.exp(lf0_mean - spread), F0_FLOOR, 200.0)
    high = clamp(math.exp(lf0_mean + spread), max(low * 2.5, 150.0), F0_CEIL)
    return low, high


def map_f0(f0: np.ndarray, transform: Transform) -> np.ndarray:
    """Map voiced frames in the log domain: standardize to the source stats, rescale to the target, shift."""
    out = f0.copy()
    voiced = out > 0
    if not np.any(voiced):
        return out
    lf0 = np.log(out[voiced])
    if transform.map_stats:
        lf0 = (lf0 - transform.src_mean) / max(transform.src_std, 1e-3) * transform.dst_std + transform.dst_mean
    lf0 += transform.shift_semitones * math.log(2.0) / 12.0
    out[voiced] = np.clip(np.exp(lf0), F0_FLOOR * 0.8, F0_CEIL * 1.2)
    return out


def warp_envelope(env: np.ndarray, alpha: float) -> np.ndarray:
    """Stretch each frame's envelope along frequency: new(f) = old(f / alpha)."""
    bins = env.shape[1]
    src = np.arange(bins, dtype=np.float64) / alpha
    np.clip(src, 0, bins - 1, out=src)
    lo = np.floor(src).astype(np.int64)
    hi = np.minimum(lo + 1, bins - 1)
    frac = src - lo
    return np.ascontiguousarray(env[:, lo] * (1.0 - frac) + env[:, hi] * frac)


def match_level(y: np.ndarray, rms_x: float) -> np.ndarray:
    """`y` at the level `rms_x`, its peak kept under 0.99."""
    rms_y = float(np.sqrt(np.mean(np.square(y))))
    if rms_y > 1e-9:
        y = y * (rms_x / rms_y)
    peak = float(np.max(np.abs(y))) if len(y) else 0.0
    if peak > 0.99:
        y = y * (0.99 / peak)
    return y.astype(np.float32)


def log_f0_stats(samples: np.ndarray, sr: int) -> tuple[float, float, float]:
    """Log-F0 mean and spread of the voiced frames, and the voiced fraction."""
    f0, _ = track_f0(samples, sr, F0_FLOOR, F0_CEIL, FRAME_PERIOD_MS)
    voiced = f0[f0 > 0]
    if len(voiced) < 10:
        raise EngineError("No voiced speech found in the clip; record yourself speaking clearly.")
    lf0 = np.log(voiced)
    return float(np.mean(lf0)), float(np.std(lf0)), len(voiced) / len(f0)

