"""Registering a voice from a reference clip: check it, embed it, extract each backend's features once."""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import time
from dataclasses import dataclass, field

import numpy as np

from engine.base import Backend, BackendInfo, Progress, TextRejected, Voice, VoiceProfile
from engine.settings import EngineSettings
from engine.voices import embedding
from engine.voices.clip import load_clip, to_flac
from engine.voices.features import MATCH_PROFILE
from engine.voices.features import kind as feature_kind
from engine.voices.profile import MatchProfile

log = logging.getLogger(__name__)

MAX_TRANSCRIPT_CHARS = 1000
REGISTRATION_FORMAT = 1
FeatureKey = tuple[str, str]  # (backend name, backend version)


@dataclass(frozen=True)
class Registration:
    """What storage keeps for a voice: the reference, its embedding and per-backend feature blobs."""

    voice_id: str
    flac: bytes
    duration_s: float  # speech in the clip
    transcript: str
    embedding: bytes  # 256 little-endian float32
    features: dict[FeatureKey, bytes] = field(default_factory=dict)
    profile: MatchProfile | None = None  # the voice-matching profile among the features, parsed
    timings: dict[str, float] = field(default_factory=dict)

    def voice_profile(self, info: BackendInfo) -> VoiceProfile | None:
        """The VoiceProfile a request passes to the backend described by info (None: none stored)."""
        blob = self.features.get((info.name, info.version))
        if blob is None:
            return None
        return VoiceProfile(self.voice_id, info.name, info.version, blob, self.transcript)

    def voice(self, info: BackendInfo, *, speed: float = 1.0, pitch: float = 0.0) -> Voice:
        return Voice(name=self.voice_id, speed=speed, pitch=pitch, profile=self.voice_profile(info))

    def to_json(self) -> str:
        return json.dumps(
            {
                "format": REGISTRATION_FORMAT,
                "voice_id": self.voice_id,
                "duration_s": self.duration_s,
                "transcript": self.transcript,
                "embedding": _b64(self.embedding),
                "flac": _b64(self.flac),
                "features": [
                    {"backend": name, "version": version, "blob": _b64(blob)}
                    for (name, version), blob in sorted(self.features.items())
                ],
            },
            indent=1,
        )

    @classmethod
    def from_json(cls, text: str) -> Registration:
        from engine.voices.clip import ClipRejected

        try:
            raw = json.loads(text)
            if raw.get("format") != REGISTRATION_FORMAT:
                raise ValueError("unknown format")
            features = {
                (str(f["backend"]), str(f["version"])): base64.b64decode(f["blob"]) for f in raw["features"]
            }
            reg = cls(
                voice_id=str(raw["voice_id"]),
                flac=base64.b64decode(raw["flac"]),
                duration_s=float(raw["duration_s"]),
                transcript=str(raw["transcript"]),
                embedding=base64.b64decode(raw["embedding"]),
                features=features,
            )
            embedding.from_bytes(reg.embedding)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ClipRejected("That is not a voice profile written by `python -m engine register`.") from exc
        return cls(**{**reg.__dict__, "profile": _match_profile(features)})


def _match_profile(blobs: dict[FeatureKey, bytes]) -> MatchProfile | None:
    """The voice-matching profile among the features, parsed (None when there is none)."""
    blob = next((blob for blob in blobs.values() if feature_kind(blob) == MATCH_PROFILE), None)
    return MatchProfile.from_bytes(blob) if blob is not None else None


def _b64(blob: bytes) -> str:
    return base64.b64encode(blob).decode("ascii")


def synthesize_default(backend: Backend, text: str) -> tuple[np.ndarray, int]:
    """The backend's default voice speaking text, as one float32 array and its rate."""
    parts = [np.asarray(a, dtype=np.float32).reshape(-1) for a in backend.synthesize(text, Voice())]
    audio = np.concatenate(parts) if parts else np.zeros(0, dtype=np.float32)
    return audio, backend.info.sample_rate


def clean_transcript(transcript: str) -> str:
    text = " ".join("".join(ch if ch.isprintable() else " " for ch in transcript or "").split())
    if len(text) > MAX_TRANSCRIPT_CHARS:
        raise TextRejected(f"The transcript is {len(text)} characters; keep it under {MAX_TRANSCRIPT_CHARS}.")
    return text


def register_clip(
    data: bytes,
    transcript: str,
    backends: list[Backend],
    settings: EngineSettings | None = None,
    *,
    max_bytes: int | None = None,
    progress: Progress | None = None,
) -> Registration:
    """Check and process a reference clip for every backend (blocking: callers run it in a thread)."""
    settings = settings or EngineSettings()
    cap = max_bytes if max_bytes is not None else settings.server.max_upload_bytes
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    text = clean_transcript(transcript)
    clip = load_clip(data, max_bytes=cap)
    timings["decode"] = time.perf_counter() - t0
    t = time.perf_counter()
    ref = embedding.embed(clip.samples)
    timings["embed"] = time.perf_counter() - t
    features: dict[FeatureKey, bytes] = {}
    for backend in backends:
        key = (backend.info.name, backend.info.version)
        if key in features:
            continue
        t = time.perf_counter()
        blob = backend.extract_features(clip.samples, clip.sample_rate, text, reference_embedding=ref,
                                        progress=progress)
        if blob is not None:
            features[key] = bytes(blob)
        timings[backend.info.name] = time.perf_counter() - t
    flac = to_flac(clip)
    timings["total"] = time.perf_counter() - t0
    log.debug("registered clip: %.1f s speech, timings %s", clip.speech_s, timings)
    return Registration(
        voice_id=voice_id_for(flac),
        flac=flac,
        duration_s=clip.speech_s,
        transcript=text,
        embedding=embedding.to_bytes(ref),
        features=features,
        profile=_match_profile(features),
        timings=timings,
    )


def voice_id_for(flac: bytes) -> str:
    return "v" + hashlib.sha256(flac).hexdigest()[:16]

