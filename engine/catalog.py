"""VoiceCatalog: the engine's voices (the configured backend's, extra Piper voices from a folder, eSpeak NG),
the languages each speaks, and which voice speaks a message in a given language."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Any

from engine.backends.espeak.backend import VOICE_NAME as ESPEAK_VOICE
from engine.backends.espeak.backend import EspeakBackend
from engine.base import AsyncBackend, Backend, BackendUnavailable, Voice
from engine.languages import base
from engine.settings import EngineSettings

log = logging.getLogger(__name__)


def scan_piper_voices(settings: EngineSettings, taken: set[str]) -> dict[str, Backend]:
    """Every `.onnx` Piper voice (with its `.onnx.json`) in `settings.piper.voices_dir`, by file name; one
    that does not load is logged and skipped, and so is a name already taken."""
    folder = settings.piper.voices_dir
    if not folder:
        return {}
    from engine.backends.piper.backend import PiperBackend

    found: dict[str, Backend] = {}
    path = Path(folder).expanduser()
    if not path.is_dir():
        log.warning("engine.piper.voices_dir %s is not a folder; no extra Piper voices", path)
        return found
    for model in sorted(path.glob("*.onnx")):
        name = model.name.removesuffix(".onnx")
        if name in taken or name in found or name == ESPEAK_VOICE:
            log.warning("Piper voice %s: the name %r is taken; skipped", model, name)
            continue
        try:
            found[name] = PiperBackend(dataclasses.replace(settings.piper, model=str(model)), workers=settings.workers)
        except BackendUnavailable as exc:
            log.warning("Piper voice %s skipped: %s", model, exc)
            continue
        log.info("Piper voice %s speaks %s", name, ", ".join(found[name].info.languages))
    return found


class VoiceCatalog:
    """The configured backend (its default voice, registered voices), extra Piper voices by name, and
    eSpeak NG (Voice.name "espeak-ng", any language it knows). All of them run in the same StreamingEngine:
    the same scheduler, pool, framing and loudness."""

    def __init__(self, primary: Backend | AsyncBackend, extras: dict[str, Backend] | None = None,
                 espeak: EspeakBackend | None = None) -> None:
        self.primary = primary
        self.extras = dict(extras or {})
        self.espeak = espeak

    @classmethod
    def build(cls, primary: Backend | AsyncBackend, settings: EngineSettings) -> VoiceCatalog:
        """The primary backend with the extra Piper voices of the voices folder and, when enabled and
        installed, eSpeak NG (when it is not, a warning says so and routing does without it)."""
        extras = scan_piper_voices(settings, set(primary.info.voices))
        espeak = None
        if settings.espeak.enabled:
            try:
                espeak = EspeakBackend(settings.espeak.command)
            except BackendUnavailable as exc:
                log.warning("eSpeak NG backend off: %s", exc)
        return cls(primary, extras, espeak)

    @property
    def default_language(self) -> str:
        """The language of the configured backend's own voice."""
        return self.primary.info.languages[0] if self.primary.info.languages else "en"

    def backend_for(self, voice: Voice) -> tuple[Backend | AsyncBackend, Voice]:
        """The backend that speaks `voice`, and the voice as that backend names it."""
        if voice.name == ESPEAK_VOICE and self.espeak is not None:
            return self.espeak, voice
        extra = self.extras.get(voice.name)
        if extra is not None:
            return extra, dataclasses.replace(voice, name="default", profile=None, speaker_id=None)
        return self.primary, voice

    def speaks(self, voice: Voice) -> tuple[str, ...]:
        """The languages `voice` speaks, as its backend says (all of the backend's, or each voice its own)."""
        backend, named = self.backend_for(voice)
        return backend.voice_languages(named)

    def languages(self) -> dict[str, str]:
        """Every language some voice speaks: base code -> English name (eSpeak NG's names)."""
        names = self.espeak.names if self.espeak is not None else {}
        codes = {*self.primary.info.languages, *(c for b in self.extras.values() for c in b.info.languages)}
        if self.espeak is not None:
            codes |= set(self.espeak.voices)
        return {c: names.get(c, c) for c in sorted(codes)}

    def route(self, voice: Voice, language: str) -> Voice:
        """`voice` when it speaks `language`; else the configured backend's own voice when it does; else the
        first extra Piper voice that does; else eSpeak NG's; else `voice` all the same."""
        code = base(language)
        if not code or code in self.speaks(voice):
            return dataclasses.replace(voice, language=code)
        keep: dict[str, Any] = {"speed": voice.speed, "pitch": voice.pitch, "language": code}
        if code in self.primary.info.languages:
            return Voice(**keep)
        for name, backend in self.extras.items():
            if code in backend.info.languages:
                return Voice(name=name, **keep)
        if self.espeak is not None and code in self.espeak.voices:
            return Voice(name=ESPEAK_VOICE, **keep)
        return dataclasses.replace(voice, language=code)

    def close(self) -> None:
        """Close the extra voices and eSpeak NG (the primary is closed by its engine)."""
        for backend in (*self.extras.values(), *([self.espeak] if self.espeak is not None else [])):
            try:
                backend.close()
            except Exception:  # noqa: BLE001 - one voice failing to close must not keep the others open
                log.exception("closing a voice failed")
