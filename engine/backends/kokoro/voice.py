"""A registered voice on Kokoro: a style blended from the stock packs nearest the clip's speaker, then corrected.

How a clip becomes a style (`StyleFit`), each step kept because the bench (bench/voices.py --ablation) measured it
paying on real speakers and on both of its speaker encoders:
1. The clip's speaker embedding (Resemblyzer) is compared with each stock pack's, computed once from a render of
   CALIBRATION_TEXT and stored beside the packs (`pack_embeddings.npz`, made by setup or on first use).
2. The nearest packs are blended, weighted by their similarity: a few blends are rendered and scored by their
   cosine to the clip. A candidate whose median F0 is further than F0_GUARD semitones from the clip's, or whose
   F0 range is not within F0_RANGE_GUARD of the clip's, is refused (men drifted to a woman's pitch in the probes).
3. Correction: the blend's own voice is corrected toward the clip as Piper's voices are (engine/voices/
   fit.py, the `clear` parts: pitch statistics, formant warp, the envelope's statistics), fitted against a
   render of the blend; the rendered audio is corrected when the voice speaks.
A refinement that pushed each half of the style (the vocoder's timbre half, the predictors' prosody half) away from
the packs' centre was measured and dropped: it raised the fitting encoder's score and lowered the other's, and
cost words (docs/architecture.md has the figures).
The result is a small JSON profile (`KokoroStyle`): pack weights and the correction; the style rows are made from
the installed packs when the voice speaks.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from engine.base import EngineError, Progress
from engine.voices import embedding
from engine.voices.parts import SHIPPED_PARTS
from engine.voices.pitch import track_f0

if TYPE_CHECKING:  # engine.voices.profile and fit (scipy, pyworld: ~80 MB): imported when a voice is read or fitted
    from engine.voices.profile import MatchProfile

log = logging.getLogger(__name__)

STYLE_FORMAT = 1  # the profile's layout ("match" is optional: format 1 profiles made before it still read)
STYLE_KIND = "kokoro-style"  # its feature blob's kind (engine/voices/features.py)
FIT_VERSION = 2  # 2: the `clear` correction; a new fit makes stored voices refit from their clips (bot/voices.py)
EMBEDDINGS_FILE = "pack_embeddings.npz"  # beside the packs: each pack's speaker embedding and F0 statistics
CALIBRATION_TEXT = ("Hello there, this is a short recording of my own voice. I read a few plain sentences at a "
                    "steady pace.")
FIT_TEXT = "Please call Stella and ask her to bring these things with her from the store."  # what candidates say
BLENDS = ((1, 0.0), (2, 0.02), (3, 0.02), (4, 0.02), (4, 0.05), (6, 0.05))  # (packs, temperature; 0: equal)
F0_GUARD = 3.0  # semitones between the render's median F0 and the clip's
F0_RANGE_GUARD = 3.0  # the render's F0 spread (semitones, 10th-90th percentile, +2) at most this factor from the clip's
STAGES = ("nearest", "blend", "clear")  # how far a fit goes: the nearest pack, the best blend, that corrected
RATE = 16_000


class StyleError(EngineError):
    """A stored Kokoro style cannot be read."""


@dataclass(frozen=True)
class KokoroStyle:
    """A registered voice's style: packs and their weights, and the correction of its audio toward the clip
    (`match`; None: spoken as the blend renders it)."""

    weights: dict[str, float]
    match: MatchProfile | None = None
    format: int = STYLE_FORMAT

    def to_bytes(self) -> bytes:
        raw: dict[str, object] = {"kind": STYLE_KIND, "format": self.format, "weights": self.weights}
        if self.match is not None:
            raw["match"] = json.loads(self.match.to_bytes())
        return json.dumps(raw, sort_keys=True).encode()

    @classmethod
    def from_bytes(cls, blob: bytes) -> KokoroStyle:
        try:
            raw = json.loads(blob.decode())
            if not isinstance(raw, dict) or raw.get("kind") != STYLE_KIND or raw.get("format") != STYLE_FORMAT:
                raise ValueError("not a Kokoro style")
            weights = {str(k): float(v) for k, v in dict(raw["weights"]).items()}
            match = _match(raw["match"]) if "match" in raw else None
        except (UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError, EngineError) as exc:
            raise StyleError("This voice's profile is damaged; register the voice again.") from exc
        if not weights or not all(math.isfinite(v) and v >= 0 for v in weights.values()) or sum(weights.values()) <= 0:
            raise StyleError("This voice's profile is damaged; register the voice again.")
        return cls(weights=weights, match=match)

    @staticmethod
    def is_style(blob: bytes) -> bool:
        return blob[:64].lstrip().startswith(b"{") and f'"kind": "{STYLE_KIND}"'.encode() in blob

    def rows(self, style: Callable[[str], np.ndarray]) -> np.ndarray:
        """The style rows [510, 256]: the packs (`style(name)`) blended by their weights."""
        total = sum(self.weights.values())
        return np.asarray(sum((w / total) * style(name) for name, w in self.weights.items()), dtype=np.float32)


@dataclass(frozen=True)
class Voiceprint:
    """What the fit compares: a speaker embedding and the F0 median and spread (semitones re 100 Hz)."""

    embedding: np.ndarray
    f0_median: float
    f0_spread: float

    @classmethod
    def of(cls, audio16k: np.ndarray, vec: np.ndarray | None = None) -> Voiceprint:
        vec = embedding.embed(audio16k) if vec is None else vec
        f0, _ = track_f0(audio16k, RATE, 55.0, 600.0)
        voiced = 12 * np.log2(f0[f0 > 0] / 100.0)
        if len(voiced) < 10:
            return cls(vec, float("nan"), float("nan"))
        lo, mid, hi = np.percentile(voiced, [10, 50, 90])
        return cls(vec, float(mid), float(hi - lo))


@dataclass
class FitReport:
    """What a fit tried and chose: (label, score, refused) per render, and its time."""

    tried: list[tuple[str, float, bool]] = field(default_factory=list)
    seconds: float = 0.0
    score: float = 0.0


Render = Callable[[str, np.ndarray], np.ndarray]  # English text, style rows -> 16 kHz audio


class StyleFit:
    """The search for one clip's style over the packs of one language (`candidates`)."""

    def __init__(self, clip: Voiceprint, packs: dict[str, Voiceprint], style: Callable[[str], np.ndarray],
                 render: Render, progress: Progress | None = None, *, stages: str = "clear",
                 audio: np.ndarray | None = None) -> None:
        self.clip = clip
        self.audio = audio  # the clip at RATE (the correction is fitted to it; without it there is none)
        self.packs = packs
        self.style = style
        self.render = render
        self.progress = progress or (lambda _: None)
        if stages not in STAGES:
            raise ValueError(f"stages must be one of {STAGES}")
        self.stages = stages
        self.report = FitReport()
        self._total = len(BLENDS) + (stages == "clear")
        self._cache: dict[bytes, float] = {}
        self._heard: dict[bytes, Voiceprint] = {}

    def score(self, candidate: KokoroStyle, label: str) -> float:
        """The render's cosine to the clip's speaker, or -inf when it fails a guard."""
        key = candidate.to_bytes()
        if key in self._cache:
            return self._cache[key]
        audio = self.render(FIT_TEXT, candidate.rows(self.style))
        heard = self._heard[key] = Voiceprint.of(audio)
        value = embedding.similarity(heard.embedding, self.clip.embedding)
        refused = not self._guarded(heard)
        self.report.tried.append((label, value, refused))
        self._cache[key] = -math.inf if refused else value
        self.progress(min(0.99, len(self._cache) / self._total))
        return self._cache[key]

    def _guarded(self, heard: Voiceprint) -> bool:
        if not math.isfinite(self.clip.f0_median) or not math.isfinite(heard.f0_median):
            return True
        if abs(heard.f0_median - self.clip.f0_median) > F0_GUARD:
            return False
        ratio = (heard.f0_spread + 2.0) / (self.clip.f0_spread + 2.0)
        return 1 / F0_RANGE_GUARD <= ratio <= F0_RANGE_GUARD

    def blends(self) -> list[KokoroStyle]:
        """The BLENDS of the packs nearest the clip's speaker (the nearest pitch first among equals)."""
        sims = {n: embedding.similarity(p.embedding, self.clip.embedding) for n, p in self.packs.items()}
        order = sorted(sims, key=lambda n: -sims[n])
        out = []
        for k, temperature in BLENDS:
            top = order[:k]
            if temperature <= 0:
                weights = {n: 1.0 for n in top}
            else:
                best = sims[top[0]]
                weights = {n: round(math.exp((sims[n] - best) / temperature), 4) for n in top}
            candidate = KokoroStyle(weights)
            if candidate not in out:
                out.append(candidate)
        return out

    def run(self) -> KokoroStyle:
        start = time.perf_counter()
        candidates = self.blends()[:1] if self.stages == "nearest" else self.blends()
        if len(candidates) == 1:
            best, value = candidates[0], 0.0
        else:
            scored = [(self.score(c, f"blend of {len(c.weights)}"), i, c) for i, c in enumerate(candidates)]
            value, _, best = max(scored)
            if value == -math.inf:  # every blend refused by the F0 guard: the one nearest the clip's pitch
                best = min(candidates, key=lambda c: abs(self._heard[c.to_bytes()].f0_median - self.clip.f0_median))
        if self.stages == "clear" and self.audio is not None:
            best = self._corrected(best)
        self.report.seconds = time.perf_counter() - start
        self.report.score = value
        self.progress(1.0)
        return best

    def _corrected(self, best: KokoroStyle) -> KokoroStyle:
        """The style with `clear` matching's correction toward the clip, fitted against the style's own render."""
        from engine.voices import fit

        rows = best.rows(self.style)
        assert self.audio is not None  # (run() corrects only a fit with the clip's audio)
        try:
            calibration = fit.calibrate(lambda text: (self.render(text, rows), RATE))
            match = fit.estimate_profile(self.audio, RATE, calibration=calibration,
                                         reference_embedding=self.clip.embedding, parts=SHIPPED_PARTS)
        except EngineError as exc:  # no voice heard in the render or the clip: the style as it renders
            log.info("no correction for this style: %s", exc)
            return best
        return KokoroStyle(best.weights, match=match)


def _match(raw: object) -> MatchProfile:
    """A style's correction read from its JSON (ProfileError when damaged)."""
    from engine.voices.profile import MatchProfile

    return MatchProfile.from_bytes(json.dumps(raw).encode())


# -- the packs' voiceprints, made once ----------------------------------------------------------------


def load_voiceprints(path: Path, stamp: str) -> dict[str, Voiceprint] | None:
    """The packs' voiceprints stored at `path` for this model (`stamp`), or None."""
    if not path.is_file():
        return None
    try:
        with np.load(path) as data:
            if str(data["stamp"]) != f"{stamp}; {CALIBRATION_TEXT}":
                return None
            return {str(n): Voiceprint(e.astype(np.float32), float(m), float(s))
                    for n, e, m, s in zip(data["names"], data["embeddings"], data["f0_median"], data["f0_spread"])}
    except (OSError, ValueError, KeyError):
        return None


def save_voiceprints(path: Path, prints: dict[str, Voiceprint], stamp: str) -> None:
    names = sorted(prints)
    tmp = path.with_suffix(".part.npz")
    np.savez(tmp, stamp=np.array(f"{stamp}; {CALIBRATION_TEXT}"), names=np.array(names),
             embeddings=np.array([prints[n].embedding for n in names], dtype=np.float32),
             f0_median=np.array([prints[n].f0_median for n in names]),
             f0_spread=np.array([prints[n].f0_spread for n in names]))
    tmp.replace(path)
