"""Piper's settings: the [engine.piper] table."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from engine.settings import BackendTable


@dataclass(frozen=True)
class PiperSettings(BackendTable):
    TABLE: ClassVar[str] = "piper"

    model: str = ""  # path to a Piper .onnx voice; empty = the bundled en_US-joe-medium
    speaker_id: int = 0  # for multi-speaker models
    noise_scale: float = 0.667
    noise_w: float = 0.8
    voices_dir: str = ""  # folder of extra Piper voices (.onnx + .onnx.json), each speaking its .onnx.json's language
    intra_op_threads: int = 0  # onnxruntime threads per worker; 0: the CPUs this process may use // workers
    # how a registered voice is matched (engine.voices.parts.MATCHING_MODES): "clear" (Piper's own audio,
    # words as clear as the bundled voice) or "close" (vocoded, nearer the speaker, about 1.7x the word errors)
    matching: str = "clear"

    def problems(self) -> list[tuple[str, str]]:
        from engine.voices.parts import MATCHING_MODES

        found = self.at_least(0, "speaker_id", "noise_scale", "noise_w", "intra_op_threads")
        if self.matching not in MATCHING_MODES:
            found.append(("matching", f"expected one of {', '.join(sorted(MATCHING_MODES))}, got {self.matching!r}"))
        return found
