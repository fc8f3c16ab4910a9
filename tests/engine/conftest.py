"""Shared fixtures: the real Piper backend (bundled voice), loaded once for the test session."""

from __future__ import annotations

import pytest

from engine.backends.piper.backend import PiperBackend


@pytest.fixture(scope="session")
def piper_backend() -> PiperBackend:
    backend = PiperBackend(workers=1)
    backend.warm_up()
    return backend
