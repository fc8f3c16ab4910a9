"""ConvertedBackend: a local backend whose registered voices are its own voice converted, segment by segment."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import numpy as np

from engine.base import Backend, BackendDefaults, BackendUnavailable, CancelToken, EngineError, Progress, Voice
from engine.conversion.model import Converter
from engine.streaming import takes_kwarg
from engine.voices.registration import synthesize_default

# Rendered by the backend's own voice once at load: its speaker embedding is the source of every conversion.
SOURCE_TEXT = (
    "The north wind and the sun were disputing which was the stronger, when a traveller came along "
    "wrapped in a warm cloak. They agreed that the one who first made him take it off was the stronger."
)


class ConvertedBackend(BackendDefaults):
    """Wraps a blocking backend (Piper): the default voice and built-in voices are the backend's own; a
    registered voice is the default voice, each piece it yields converted from the default voice's speaker
    embedding to the voice's (its features, from the reference clip) by the operator's converter. It runs
    where the backend runs (a pool thread of the StreamingEngine, with the segment's cancel token), so
    scheduling, framing, loudness and cancellation are the engine's as for any backend."""

    def __init__(self, inner: Backend, converter: Converter) -> None:
        self.inner = inner
        self.converter = converter
        self.info = dataclasses.replace(
            inner.info, name=f"{inner.info.name}+converter", version=f"{inner.info.version}; {converter.version}",
            clones=True,
        )
        self._cancel_kw = takes_kwarg(inner, "cancel")
        audio, self._rate = synthesize_default(inner, SOURCE_TEXT)
        try:
            self.source = converter.embed(audio, self._rate)
            self._sample = audio
            converter.convert(audio[: self._rate], self._rate, self.source, self.source)
        except Exception as exc:  # a graph that loads but does not run as docs/conversion.md says
            raise BackendUnavailable(f"The voice converter {converter.path} does not run: {exc}") from exc

    def warm_up(self) -> None:
        """The backend's warm-up, then one conversion as long as the source sentence: the converter session's
        memory arena reaches a whole segment's size now, not under traffic."""
        warm = getattr(self.inner, "warm_up", None)
        if warm is not None:
            warm()
        self.converter.convert(self._sample, self._rate, self.source, self.source)

    def target(self, voice: Voice) -> np.ndarray | None:
        """The speaker embedding a registered voice is converted to (None: the backend speaks it as it is)."""
        profile = voice.profile
        if profile is None or profile.backend != self.info.name:
            return None
        return self.converter.speaker(profile.features)

    def synthesize(self, text: str, voice: Voice, *, cancel: CancelToken | None = None) -> Iterator[np.ndarray]:
        target = self.target(voice)
        if target is not None:
            voice = dataclasses.replace(voice, name="default", profile=None)
        parts = iter(self.inner.synthesize(text, voice, **({"cancel": cancel} if self._cancel_kw else {})))
        try:
            for audio in parts:
                if cancel is not None and cancel.cancelled:
                    return
                if target is not None:
                    audio = self.converter.convert(audio, self.info.sample_rate, self.source, target, cancel)
                yield audio
        finally:
            close = getattr(parts, "close", None)
            if close is not None:
                close()  # the backend's session goes back to its pool now

    def extract_features(self, clip: np.ndarray, sample_rate: int, transcript: str, *,
                         reference_embedding: np.ndarray | None = None,
                         progress: Progress | None = None) -> bytes | None:
        """The clip's speaker embedding (the converter's target), gin_channels little-endian float32."""
        try:
            return self.converter.embed(clip, sample_rate).astype("<f4").tobytes()
        except EngineError:
            raise
        except Exception as exc:
            raise EngineError(f"The voice converter failed on the clip ({type(exc).__name__}).") from exc

    def close(self) -> None:
        self.converter.close()
        self.inner.close()
