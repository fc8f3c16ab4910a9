"""Builds the configured backend and the Engine (a StreamingEngine) over it."""

from __future__ import annotations

import dataclasses

from engine.backends import BACKENDS
from engine.base import AsyncBackend, Backend, BackendUnavailable, Engine
from engine.catalog import VoiceCatalog
from engine.conversion import with_conversion
from engine.settings import EngineSettings
from engine.streaming import StreamingEngine


def build_backend(settings: EngineSettings) -> Backend | AsyncBackend:
    """The backend named by `settings.backend` (engine.backends.BACKENDS); BackendUnavailable says what is missing."""
    name = settings.backend
    package = BACKENDS.get(name)
    if package is None:
        raise BackendUnavailable(f"Unknown engine backend {name!r}; choose one of: {', '.join(BACKENDS)}.")
    try:
        backend_class = package.backend_class()
    except ImportError as exc:
        raise BackendUnavailable(f"The {name} backend is not available: {exc}") from exc
    return backend_class.from_settings(settings)


def build_engine(settings: EngineSettings | None = None) -> Engine:
    """The configured backend (its registered voices converted when engine.conversion.model is set) with the
    backends it reads voices of and the packages' extra voices (engine/catalog.py) in one engine."""
    settings = settings or EngineSettings()
    backend = with_conversion(build_backend(settings), settings)
    catalog = VoiceCatalog.build(backend, settings,
                                 lambda name: build_backend(dataclasses.replace(settings, backend=name)))
    return StreamingEngine(backend, settings, catalog=catalog)
