"""Voice conversion after synthesis: an operator's ONNX converter speaks registered voices (docs/conversion.md)."""

from __future__ import annotations

from engine.base import AsyncBackend, Backend, BackendUnavailable
from engine.settings import EngineSettings
from engine.streaming import _is_async


def with_conversion(backend: Backend | AsyncBackend, settings: EngineSettings) -> Backend | AsyncBackend:
    """The backend itself, or when `engine.conversion.model` is set, wrapped in a ConvertedBackend over it;
    BackendUnavailable says why the converter cannot be used (missing, foreign, not running)."""
    if not settings.conversion.model:
        return backend
    if _is_async(backend):
        raise BackendUnavailable(
            f"engine.conversion.model converts the voice of a local backend; the {backend.info.name} backend's "
            "voices are its server's. Set it on the engine server instead, or leave it empty."
        )
    from engine.backends.cpu import threads_per_worker
    from engine.backends.piper.settings import PiperSettings
    from engine.conversion.backend import ConvertedBackend
    from engine.conversion.model import Converter

    piper = PiperSettings.of(settings)
    threads = threads_per_worker(piper.intra_op_threads, settings.workers, "engine.piper.intra_op_threads")
    return ConvertedBackend(backend, Converter(settings.conversion.model, threads,  # type: ignore[arg-type]
                                               settings.workers))
