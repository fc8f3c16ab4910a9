"""Voice matching for single-speaker backends: pitch (PSOLA) and a smooth spectral correction per segment."""

from __future__ import annotations

import functools
import json
import math
import threading
import warnings
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace

import numpy as np
import soxr

from engine.base import EngineError, Voice
from engine.voices import envelope, features, psola, spectral
from engine.voices.clip import ClipRejected
from engine.voices.envelope import EnvelopeStats
from engine.voices.pitch import track_f0

with warnings.catch_warnings():  # pyworld imports pkg_resources, which warns on import
    warnings.simplefilter("ignore")
    import pyworld

PROFILE_FORMAT = 3  # 3: no aperiodicity, a steady order; 2 added the envelope and rate; 1 and 2 still read
FRAME_PERIOD_MS = 10.0  # the envelope's frames; the correction is interpolated between them
F0_FLOOR = 55.0
F0_CEIL = 600.0
# F0 tracking: engine.voices.pitch (YIN). harvest costs ~0.12 real time per segment and reports twice the
# true F0 (~90 Hz) on many of the default voice's frames; dio does so on most. Re-synthesis with YIN's
# F0 is the closest to its input of the three (Resemblyzer cosine 0.94, harvest 0.87, dio 0.82).
DEFAULT_TRACK_RANGE = (60.0, 400.0)
# No warp below 0.96: the default voice is already a low male voice, and its formants lowered further (0.88,
# 0.92 fitted for two bench speakers) doubled or tripled PocketSphinx's word errors on them.
WARP_RANGE = (0.96, 1.35)
LOG_F0_RANGE = (math.log(50.0), math.log(500.0))
LOG_F0_STD_RANGE = (0.02, 0.6)
RATE_RANGE = (0.75, 1.35)
ENV_STRENGTH_MAX = 1.5  # past the reference speaker's statistics (a caricature) when the fit finds it closer
_CACHE_SIZE = 64
_FLOOR = 1e-12


class ProfileError(EngineError):
    """A stored voice-matching profile cannot be read."""


@dataclass(frozen=True)
class MatchProfile:
    """How to turn the default voice into a registered one: log-F0 statistics and a formant warp."""

    target_lf0_mean: float  # reference speaker, natural log of Hz
    target_lf0_std: float
    source_lf0_mean: float  # the default voice this profile was fitted against
    source_lf0_std: float
    warp: float = 1.0  # spectral envelope frequency warp; > 1 raises formants (shorter vocal tract)
    f0_scale: float = 1.0  # how much of the reference's pitch spread to keep, found by the fit
    env_src: EnvelopeStats | None = None  # the (warped) default voice's envelope statistics
    env_dst: EnvelopeStats | None = None  # the reference speaker's
    env_strength: float = 0.0  # how far toward env_dst, found by the fit (0: envelope left alone)
    env_steady: int = 0  # cepstral coefficients below this get one correction on every frame (envelope.correction_db)
    vocoded: bool = False  # re-synthesized by WORLD (matching "close"), not Piper's own audio filtered
    rate: float = 1.0  # speaking rate relative to the default voice
    format: int = PROFILE_FORMAT

    def to_bytes(self) -> bytes:
        return json.dumps({"kind": features.MATCH_PROFILE, **asdict(self)}, sort_keys=True).encode()

    @classmethod
    def from_bytes(cls, blob: bytes) -> MatchProfile:
        try:
            raw = json.loads(blob.decode())
            if not isinstance(raw, dict) or raw.get("format") not in (1, 2, PROFILE_FORMAT):
                raise ValueError("unknown profile format")
            values = {k: float(raw[k]) for k in (
                "target_lf0_mean", "target_lf0_std", "source_lf0_mean", "source_lf0_std", "warp", "f0_scale")}
            values.update({k: float(raw.get(k, d)) for k, d in (("env_strength", 0.0), ("env_steady", 0.0),
                                                                 ("rate", 1.0))})
            env_src, env_dst = _stats(raw.get("env_src")), _stats(raw.get("env_dst"))
            vocoded = raw.get("vocoded", False)
            if not isinstance(vocoded, bool):
                raise ValueError("vocoded must be true or false")
        except (UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
            raise ProfileError("This voice's matching profile is damaged; register the voice again.") from exc
        if not all(math.isfinite(v) for v in values.values()):
            raise ProfileError("This voice's matching profile is damaged; register the voice again.")
        return cls(
            env_src=env_src,
            env_dst=env_dst,
            env_strength=_clamp(values["env_strength"], 0.0, ENV_STRENGTH_MAX) if env_src and env_dst else 0.0,
            env_steady=int(_clamp(values["env_steady"], 0, envelope.BANDS)),
            vocoded=vocoded,
            rate=_clamp(values["rate"], *RATE_RANGE),
            target_lf0_mean=_clamp(values["target_lf0_mean"], *LOG_F0_RANGE),
            target_lf0_std=_clamp(values["target_lf0_std"], *LOG_F0_STD_RANGE),
            source_lf0_mean=_clamp(values["source_lf0_mean"], *LOG_F0_RANGE),
            source_lf0_std=_clamp(values["source_lf0_std"], *LOG_F0_STD_RANGE),
            warp=_clamp(values["warp"], *WARP_RANGE),
            f0_scale=_clamp(values["f0_scale"], 0.0, 2.0),
        )

    @property
    def target_f0_hz(self) -> float:
        return math.exp(self.target_lf0_mean)


def _clamp(value: float, low: float, high: float) -> float:
    return min(max(value, low), high)


def _stats(raw: object) -> EnvelopeStats | None:
    """Envelope statistics read from a profile's JSON (None when absent); ValueError when malformed."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise ValueError("envelope statistics must be an object")
    mean, std, u_mean, u_std = (tuple(float(v) for v in raw.get(k, ())) for k in ("mean", "std", "u_mean", "u_std"))
    if len(mean) != envelope.BANDS or len(std) != envelope.BANDS or {len(u_mean), len(u_std)} - {0, envelope.BANDS}:
        raise ValueError("envelope statistics of the wrong size")
    if not all(math.isfinite(v) for v in (*mean, *std, *u_mean, *u_std)):
        raise ValueError("envelope statistics not finite")
    if len(u_mean) != len(u_std):
        u_mean = u_std = ()
    return EnvelopeStats(mean=mean, std=std, u_mean=u_mean, u_std=u_std)


class _ProfileCache:
    """A small thread-safe LRU of parsed profiles keyed by voice id and blob hash."""

    def __init__(self, size: int = _CACHE_SIZE) -> None:
        self._size = size
        self._items: OrderedDict[tuple[str, int], tuple[bytes, MatchProfile]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, voice_id: str, blob: bytes) -> MatchProfile:
        key = (voice_id, hash(blob))
        with self._lock:
            hit = self._items.get(key)
            if hit is not None and hit[0] == blob:
                self._items.move_to_end(key)
                return hit[1]
        profile = MatchProfile.from_bytes(blob)
        with self._lock:
            self._items[key] = (blob, profile)
            self._items.move_to_end(key)
            while len(self._items) > self._size:
                self._items.popitem(last=False)
        return profile


_profiles = _ProfileCache()


def profile_for(voice: Voice) -> MatchProfile | None:
    """The parsed match profile of a voice (cached), or None when its features are none."""
    prof = voice.profile
    if prof is None or not prof.features or features.kind(prof.features) != features.MATCH_PROFILE:
        return None
    return _profiles.get(prof.voice_id, prof.features)


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
    low = _clamp(math.exp(lf0_mean - spread), F0_FLOOR, 200.0)
    high = _clamp(math.exp(lf0_mean + spread), max(low * 2.5, 150.0), F0_CEIL)
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


# -- fitting a profile by analysis-by-synthesis ---------------------------------------------------

CALIBRATION_TEXT = (
    "When the sunlight strikes raindrops in the air, they act as a prism and form a rainbow. "
    "People look, but no one ever finds the pot of gold at its end."
)
WARP_GRID = (0.96, 1.04, 1.12, 1.2)
WARP_REFINE = 0.04
SEARCH_RATE = 16_000
F0_OFFSETS_ST = (-2.0, 2.0)
ENV_STRENGTHS = (0.5, 0.75)  # tried after the full conversion (1.0) with the best warp
STEADY_ORDER = 13  # with the "steady" part: the broad envelope shape a 13-coefficient MFCC recognizer sees
# What a fit may change. Each part's worth on held-out speakers: bench/voices.py --ablation.
PARTS = frozenset({"f0", "warp", "envelope", "unvoiced", "steady", "vocoded", "rate"})
# What registration fits with engine.piper.matching "clear" (bench/voices.py --ablation, 10 speakers):
# - the envelope and the warp carry the identity (top1 0.6 -> 0.2 without the envelope, 0.4 without the warp);
# - "steady" keeps the words (word errors 1.05x raw Piper's with it, 1.48x without);
# - the pitch moves the speaker models little (gain +0.01) but is what a listener hears first, so it stays;
# - the speaking rate pays a little (d-vector top1 0.6 -> 0.7, gain +0.01, word errors 1.03x -> 1.02x, time to
#   first audio 1.26x -> 1.18x of the bundled voice's: within the run's noise);
# - the unvoiced speech's own correction did not pay (top1 and gain unchanged). Aperiodicity went with WORLD
#   synthesis.
SHIPPED_PARTS = frozenset({"f0", "warp", "envelope", "steady", "rate"})
# engine.piper.matching: what each choice fits. "clear" keeps Piper's own audio and the broad correction steady
# (word errors near raw Piper's); "close" re-synthesizes with WORLD and corrects every band per frame, voiced
# frames and unvoiced speech each by their own statistics: the speaker models find it nearer the speaker, a
# recognizer makes about 1.7 times the word errors (bench/voices.py). It leaves the speaking rate alone: WORLD's
# cost grows with the audio, and a slower voice's first audio came 1.92x the bundled voice's (1.45x without).
MATCHING_MODES = {"clear": SHIPPED_PARTS, "close": (SHIPPED_PARTS - {"steady", "rate"}) | {"unvoiced", "vocoded"}}

SynthesizeFn = Callable[[str], tuple[np.ndarray, int]]


@dataclass(frozen=True)
class Calibration:
    """The default voice speaking the calibration text, analysed once and reused for every registration."""

    analysis: Analysis
    lf0_mean: float
    lf0_std: float
    speech_s: float = 0.0  # its speaking time without pauses (engine.voices.envelope.speech_seconds)


def calibrate(synthesize_reference_fn: SynthesizeFn, text: str = CALIBRATION_TEXT) -> Calibration:
    """Synthesize and analyse the calibration text once.

    Its F0 statistics come from the same tracker at the rate apply_voice sees; the analysis kept
    for the search is made at 16 kHz, the embedding's rate, which halves the cost of every candidate.
    """
    audio, sr = synthesize_reference_fn(text)
    audio = np.asarray(audio, dtype=np.float32).reshape(-1)
    if len(audio) < sr:
        raise EngineError("The default voice produced no usable calibration audio.")
    voiced = analyze(audio, sr).f0
    voiced = voiced[voiced > 0]
    if len(voiced) < 10:
        raise EngineError("The default voice produced no voiced calibration audio.")
    lf0 = np.log(voiced)
    mean, std = float(np.mean(lf0)), float(np.std(lf0))
    audio16 = soxr.resample(audio, sr, SEARCH_RATE) if sr != SEARCH_RATE else audio
    return Calibration(
        analysis=analyze(audio16, SEARCH_RATE, track_range(mean, std)), lf0_mean=mean, lf0_std=std,
        speech_s=envelope.speech_seconds(audio, sr),
    )


def speaking_rate(phonemes: int, speech_s: float, default_phonemes: int, default_speech_s: float) -> float:
    """The clip's phonemes per speaking second over the default voice's, within RATE_RANGE (1.0: unknown)."""
    if phonemes < 20 or speech_s <= 0.0 or default_phonemes <= 0 or default_speech_s <= 0.0:
        return 1.0
    return _clamp((phonemes / speech_s) / (default_phonemes / default_speech_s), *RATE_RANGE)


def estimate_profile(
    samples: np.ndarray,
    sample_rate: int,
    synthesize_reference_fn: SynthesizeFn | None = None,
    *,
    calibration: Calibration | None = None,
    reference_embedding: np.ndarray | None = None,
    parts: frozenset[str] = SHIPPED_PARTS,
    rate: float = 1.0,
) -> MatchProfile:
    """Fit the conversion so the transformed default voice sounds most like the clip.

    The clip's log-F0 statistics come from the F0 tracker and its envelope statistics from its WORLD
    (cheaptrick) envelope; the formant warp, how far to move the envelope and a small pitch offset are
    chosen by rendering the calibration audio and maximizing Resemblyzer cosine to the clip. Only the
    parts named in `parts` are used (the others stay as the default voice has them).
    """
    from engine.voices import embedding

    if calibration is None:
        if synthesize_reference_fn is None:
            raise ValueError("estimate_profile needs synthesize_reference_fn or calibration")
        calibration = calibrate(synthesize_reference_fn)
    target = reference_embedding if reference_embedding is not None else embedding.embed(samples)
    try:
        tgt_mean, tgt_std, _ = log_f0_stats(samples, sample_rate)
    except EngineError as exc:
        raise ClipRejected("I could not hear a voice in the clip; record yourself speaking clearly.") from exc
    src_std = max(calibration.lf0_std, LOG_F0_STD_RANGE[0])
    base = MatchProfile(
        target_lf0_mean=_clamp(tgt_mean, *LOG_F0_RANGE) if "f0" in parts else calibration.lf0_mean,
        target_lf0_std=_clamp(tgt_std, *LOG_F0_STD_RANGE) if "f0" in parts else src_std,
        source_lf0_mean=calibration.lf0_mean,
        source_lf0_std=src_std,
        rate=_clamp(rate, *RATE_RANGE) if "rate" in parts else 1.0,
        vocoded="vocoded" in parts,
    )
    cal = calibration.analysis
    dst = None
    if "envelope" in parts:
        clip = analyze(soxr.resample(samples, sample_rate, SEARCH_RATE) if sample_rate != SEARCH_RATE else samples,
                       SEARCH_RATE, track_range(base.target_lf0_mean, base.target_lf0_std))
        dst = envelope.measure(clip.f0, clip.sp, SEARCH_RATE)
        if "unvoiced" not in parts:  # the envelope of voiced frames only
            dst = replace(dst, u_mean=(), u_std=())

    def with_warp(profile: MatchProfile, warp: float) -> MatchProfile:
        if dst is None:
            return replace(profile, warp=warp)
        src = envelope.measure(cal.f0, warp_envelope(cal.sp, warp), SEARCH_RATE)
        return replace(profile, warp=warp, env_src=src, env_dst=dst, env_strength=1.0,
                       env_steady=STEADY_ORDER if "steady" in parts else 0)

    def score(profile: MatchProfile) -> float:
        audio = render(cal, Transform.for_profile(profile))
        return embedding.similarity(embedding.embed(audio), target)

    grid = WARP_GRID if "warp" in parts else (1.0,)
    best_score, best = max(((score(p), p) for p in (with_warp(base, w) for w in grid)), key=lambda s: s[0])
    candidates: list[MatchProfile] = []
    if "warp" in parts:
        candidates += [with_warp(best, _clamp(best.warp + dw, *WARP_RANGE)) for dw in (-WARP_REFINE, WARP_REFINE)]
    if best.env_strength > 0.0:
        candidates += [replace(best, env_strength=s) for s in ENV_STRENGTHS]
    best_score, best = _best_of(score, best_score, best, candidates)
    if "f0" in parts:
        step = math.log(2.0) / 12.0
        offsets = [replace(best, target_lf0_mean=_clamp(best.target_lf0_mean + o * step, *LOG_F0_RANGE))
                   for o in F0_OFFSETS_ST]
        best_score, best = _best_of(score, best_score, best, offsets)
    return best


def _best_of(score: Callable[[MatchProfile], float], best_score: float, best: MatchProfile,
             candidates: list[MatchProfile]) -> tuple[float, MatchProfile]:
    """The best-scoring of the current best and the candidates, tried in order."""
    for candidate in candidates:
        s = score(candidate)
        if s > best_score:
            best_score, best = s, candidate
    return best_score, best
