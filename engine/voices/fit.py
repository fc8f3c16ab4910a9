"""How a matching profile is fitted to a clip: analysis-by-synthesis of the default voice's calibration audio."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import soxr

from engine.base import EngineError
from engine.voices import envelope
from engine.voices.clip import ClipRejected
from engine.voices.parts import SHIPPED_PARTS
from engine.voices.profile import LOG_F0_RANGE, LOG_F0_STD_RANGE, RATE_RANGE, WARP_RANGE, MatchProfile, clamp
from engine.voices.transform import Analysis, Transform, analyze, log_f0_stats, render, track_range, warp_envelope

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
    return clamp((phonemes / speech_s) / (default_phonemes / default_speech_s), *RATE_RANGE)


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
        target_lf0_mean=clamp(tgt_mean, *LOG_F0_RANGE) if "f0" in parts else calibration.lf0_mean,
        target_lf0_std=clamp(tgt_std, *LOG_F0_STD_RANGE) if "f0" in parts else src_std,
        source_lf0_mean=calibration.lf0_mean,
        source_lf0_std=src_std,
        rate=clamp(rate, *RATE_RANGE) if "rate" in parts else 1.0,
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
        candidates += [with_warp(best, clamp(best.warp + dw, *WARP_RANGE)) for dw in (-WARP_REFINE, WARP_REFINE)]
    if best.env_strength > 0.0:
        candidates += [replace(best, env_strength=s) for s in ENV_STRENGTHS]
    best_score, best = _best_of(score, best_score, best, candidates)
    if "f0" in parts:
        step = math.log(2.0) / 12.0
        offsets = [replace(best, target_lf0_mean=clamp(best.target_lf0_mean + o * step, *LOG_F0_RANGE))
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
