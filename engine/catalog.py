"""VoiceCatalog: the engine's voices (the configured backend's, voices registered under a backend it reads, and the
voices backend packages hold beside it), the languages each speaks, and which voice speaks a message in a language."""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable
from typing import Any

from engine.backends import PACKAGES
from engine.base import AsyncBackend, Backend, BackendUnavailable, Voice
from engine.languages import base
from engine.settings import EngineSettings
from engine.voices import features

log = logging.getLogger(__name__)
MakeBackend = Callable[[str], Backend | AsyncBackend]  # a backend by its name in engine.backends.BACKENDS


class VoiceCatalog:
    """The configured backend (its default voice, registered voices) and extra voices, each a backend of its own
    known by a Voice.name (engine.backends.Package.voices: a folder's voices, a fallback for many languages): a
    language that neither the chosen voice nor the configured backend speaks goes to the first extra that does. All of
    them run in the same StreamingEngine: the same scheduler, pool, framing and loudness."""

    def __init__(self, primary: Backend | AsyncBackend, extras: dict[str, Backend] | None = None,
                 make: MakeBackend | None = None) -> None:
        self.primary = primary
        self.extras = dict(extras or {})  # Voice.name -> its backend, in the order routing tries them
        self._make = make  # a backend by its name (engine.backends.BACKENDS), for `primary.info.reads`
        self._readers: dict[str, Backend | None] = {}  # made on the first voice they speak; None: not made
        self._lock = threading.Lock()  # (voices are routed on the event loop and, for the CLI, on worker threads)

    @classmethod
    def build(cls, primary: Backend | AsyncBackend, settings: EngineSettings,
              make: MakeBackend | None = None) -> VoiceCatalog:
        """The primary backend with the extra voices of every backend package (engine.backends.Package.voices), in
        the registry's order, a name already taken skipped; `make` builds a backend whose registered voices the
        primary reads (`info.reads`), on the first such voice."""
        extras: dict[str, Backend] = {}
        for package in PACKAGES.values():
            taken = {*primary.info.voices, *extras}
            try:
                found = package.extra_voices(settings, taken)
            except ImportError as exc:
                log.warning("the voices of %s are off: %s", package.package, exc)
                continue
            for name, backend in found.items():
                if name in taken:
                    log.warning("voice %r of %s: the name is taken; skipped", name, package.package)
                    backend.close()
                else:
                    extras[name] = backend
        return cls(primary, extras, make)

    def _reader(self, blob: bytes) -> Backend | None:
        """The backend that speaks a registered voice's `blob` when the primary does not speak its kind: the first of
        `primary.info.reads` that declares it (made once); None when the primary speaks it (or none does)."""
        kinds, kind = self.primary.info.features, features.kind(blob)
        if not kinds or kind in kinds or self._make is None:
            return None
        for name in self.primary.info.reads:
            with self._lock:
                if name not in self._readers:
                    try:
                        made = self._make(name)
                        self._readers[name] = made if isinstance(made, Backend) else None
                    except BackendUnavailable as exc:
                        log.warning("voices registered under %s cannot speak until fitted again: %s", name, exc)
                        self._readers[name] = None
                reader = self._readers[name]
            if reader is not None and kind in reader.info.features:
                return reader
        return None

    @property
    def default_language(self) -> str:
        """The language of the configured backend's own voice."""
        return self.primary.info.languages[0] if self.primary.info.languages else "en"

    def backend_for(self, voice: Voice) -> tuple[Backend | AsyncBackend, Voice]:
        """The backend that speaks `voice`, and the voice as that backend names it (an extra's: its own default
        voice, at the voice's speed, pitch and language)."""
        extra = self.extras.get(voice.name)
        if extra is not None:
            return extra, dataclasses.replace(voice, name="default", profile=None, speaker_id=None)
        reader = self._reader(voice.profile.features) if voice.profile is not None else None
        if reader is not None:  # registered under a backend the primary reads, until it is fitted again
            return reader, dataclasses.replace(voice, name="default")
        return self.primary, voice

    def speaks(self, voice: Voice) -> tuple[str, ...]:
        """The languages `voice` speaks, as its backend says (all of the backend's, or each voice its own)."""
        backend, named = self.backend_for(voice)
        return backend.voice_languages(named)

    def languages(self) -> dict[str, str]:
        """Every language some voice speaks: base code -> English name (the first a backend declares in its
        `info.language_names`; else the code)."""
        backends = (self.primary, *self.extras.values())
        names: dict[str, str] = {}
        for backend in backends:
            for code, name in backend.info.language_names:
                names.setdefault(code, name)
        codes = {c for backend in backends for c in backend.info.languages}
        return {c: names.get(c, c) for c in sorted(codes)}

    def route(self, voice: Voice, language: str) -> Voice:
        """`voice` when it speaks `language`; else the configured backend's own voice when it does; else the
        first extra voice that does; else `voice` all the same."""
        code = base(language)
        if not code or code in self.speaks(voice):
            return dataclasses.replace(voice, language=code)
        keep: dict[str, Any] = {"speed": voice.speed, "pitch": voice.pitch, "language": code}
        if code in self.primary.info.languages:
            return Voice(**keep)
        for name, backend in self.extras.items():
            if code in backend.info.languages:
                return Voice(name=name, **keep)
        return dataclasses.replace(voice, language=code)

    @property
    def sessions_alive(self) -> int | None:
        """Inference sessions of every backend made so far (None where the primary does not count them)."""
        counted = self.primary.sessions_alive if isinstance(self.primary, Backend) else None
        if counted is None:
            return None
        with self._lock:
            others = [*self.extras.values(), *(b for b in self._readers.values() if b is not None)]
        return counted + sum(b.sessions_alive or 0 for b in others)

    def close(self) -> None:
        """Close the readers and the extra voices (the primary is closed by its engine)."""
        with self._lock:
            readers, self._readers = [b for b in self._readers.values() if b is not None], {}
        for backend in (*readers, *self.extras.values()):
            try:
                backend.close()
            except Exception:  # noqa: BLE001 - one voice failing to close must not keep the others open
                log.exception("closing a voice failed")
