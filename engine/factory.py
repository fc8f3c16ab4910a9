"""Builds the configured backend and the Engine (a StreamingEngine) over it."""

from __future__ import annotations

import importlib

from engine.base import AsyncBackend, Backend, BackendUnavailable, Engine
from engine.catalog import VoiceCatalog
from engine.conversion import with_conversion
from engine.settings import EngineSettings
from engine.streaming import StreamingEngine

BACKENDS = ("piper", "cosyvoice2", "remote")


def _lazy(module: str, cls: str, what: str) -> type:
    try:
        mod = importlib.import_module(module)
    except ImportError as exc:
        raise BackendUnavailable(f"The {what} backend is not available: {exc}") from exc
    try:
        return getattr(mod, cls)
    except AttributeError as exc:
        raise BackendUnavailable(f"The {what} backend is not available: {module} has no {cls}") from exc


def build_backend(settings: EngineSettings) -> Backend | AsyncBackend:
    """The backend named by `settings.backend`; BackendUnavailable says what is missing."""
    name = settings.backend
    if name == "piper":
        from engine.backends.piper import PiperBackend

        return PiperBackend(settings.piper, workers=settings.workers)
    if name == "cosyvoice2":
        return _lazy("engine.backends.cosyvoice", "CosyVoiceBackend", "cosyvoice2")(settings.cosyvoice, workers=settings.workers)
    if name == "remote":
        return _lazy("engine.backends.remote", "RemoteBackend", "remote")(settings.remote)
    raise BackendUnavailable(f"Unknown engine backend {name!r}; choose one of: {', '.join(BACKENDS)}.")


def build_engine(settings: EngineSettings | None = None) -> Engine:
    """The configured backend (its registered voices converted when engine.conversion.model is set) with the
    extra Piper voices and eSpeak NG (engine/catalog.py) in one engine."""
    settings = settings or EngineSettings()
    backend = with_conversion(build_backend(settings), settings)
    return StreamingEngine(backend, settings, catalog=VoiceCatalog.build(backend, settings))
