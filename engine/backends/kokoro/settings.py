"""Kokoro's settings: the [engine.kokoro] table."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from engine.settings import BackendTable


@dataclass(frozen=True)
class KokoroSettings(BackendTable):
    TABLE: ClassVar[str] = "kokoro"

    assets_dir: str = ""  # the model and voice packs setup installs; empty: inside the Python environment
    intra_op_threads: int = 0  # onnxruntime threads per inference (sessions shared by the workers); 0: the usable CPUs

    def problems(self) -> list[tuple[str, str]]:
        return self.at_least(0, "intra_op_threads")
