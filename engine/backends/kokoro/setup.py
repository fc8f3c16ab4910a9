"""Kokoro's setup, `python -m engine.backends.kokoro.setup` (scripts/setup.sh): the model joined and checked, its
graph cut, its voice packs, the vocoder this CPU runs fastest, and the packs' voiceprints, into one folder."""

from __future__ import annotations

import sys
from pathlib import Path

from engine.backends.kokoro import assets, tuning
from engine.backends.kokoro.backend import KokoroBackend
from engine.backends.kokoro.settings import KokoroSettings
from engine.settings import EngineSettings


def install(where: Path | None = None) -> Path:
    """Model and voice packs in `where` (default_dir()); idempotent and quick when already installed."""
    where = where or assets.default_dir()
    where.mkdir(parents=True, exist_ok=True)
    assets.install_model(where)
    assets.install_graph(where)
    names = assets.install_voices(where)
    install_tuning(where)
    install_voiceprints(where)
    print(f"kokoro: model, {len(names)} voice packs and their voiceprints in {where}")
    return where


def install_tuning(where: Path) -> None:
    """Measure which vocoder and thread count run fastest on this CPU (tuning.py) for the default engine's
    inferences at once, unless measured already; before the voiceprints, which are rendered by that vocoder."""
    print(tuning.tuning(str(where), tuning.concurrency(EngineSettings())).why)


def install_voiceprints(where: Path) -> None:
    """Each English pack's voiceprint (voice.py), which registering a voice compares the
    clip with: rendered once here (about a minute) rather than on the first registration."""
    backend = KokoroBackend(KokoroSettings(assets_dir=str(where)))
    try:
        backend.voiceprints()
    finally:
        backend.close()


if __name__ == "__main__":  # pragma: no cover - scripts/setup.sh
    install(Path(sys.argv[1]) if len(sys.argv) > 1 else None)
