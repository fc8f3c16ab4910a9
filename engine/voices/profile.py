"""A registered voice's matching profile: what moves the default voice toward a speaker, stored and read back."""

from __future__ import annotations

import json
import math
import threading
from collections import OrderedDict
from dataclasses import asdict, dataclass

from engine.base import EngineError, Voice
from engine.voices import envelope, features
from engine.voices.envelope import EnvelopeStats

PROFILE_FORMAT = 3  # 3: no aperiodicity, a steady order; 2 added the envelope and rate; 1 and 2 still read
# No warp below 0.96: the default voice is already a low male voice, and its formants lowered further (0.88,
# 0.92 fitted for two bench speakers) doubled or tripled PocketSphinx's word errors on them.
WARP_RANGE = (0.96, 1.35)
LOG_F0_RANGE = (math.log(50.0), math.log(500.0))
LOG_F0_STD_RANGE = (0.02, 0.6)
RATE_RANGE = (0.75, 1.35)
ENV_STRENGTH_MAX = 1.5  # past the reference speaker's statistics (a caricature) when the fit finds it closer
_CACHE_SIZE = 64


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
            env_strength=clamp(values["env_strength"], 0.0, ENV_STRENGTH_MAX) if env_src and env_dst else 0.0,
            env_steady=int(clamp(values["env_steady"], 0, envelope.BANDS)),
            vocoded=vocoded,
            rate=clamp(values["rate"], *RATE_RANGE),
            target_lf0_mean=clamp(values["target_lf0_mean"], *LOG_F0_RANGE),
            target_lf0_std=clamp(values["target_lf0_std"], *LOG_F0_STD_RANGE),
            source_lf0_mean=clamp(values["source_lf0_mean"], *LOG_F0_RANGE),
            source_lf0_std=clamp(values["source_lf0_std"], *LOG_F0_STD_RANGE),
            warp=clamp(values["warp"], *WARP_RANGE),
            f0_scale=clamp(values["f0_scale"], 0.0, 2.0),
        )

    @property
    def target_f0_hz(self) -> float:
        return math.exp(self.target_lf0_mean)


def clamp(value: float, low: float, high: float) -> float:
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
