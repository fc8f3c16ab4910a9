"""CosyVoice2's settings: the [engine.cosyvoice] table."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from engine.settings import BackendTable


@dataclass(frozen=True)
class CosyVoiceSettings(BackendTable):
    TABLE: ClassVar[str] = "cosyvoice"

    model_dir: str = ""  # folder of the downloaded CosyVoice2-0.5B model
    device: str = "cuda"
    fp16: bool = False
    load_jit: bool = False
    load_trt: bool = False
    load_vllm: bool = False
    streaming: bool = True
    token_hop_len: int = 25  # tokens per streamed chunk after the first
    first_hop_len: int = 15  # a short first hop lowers first-chunk latency
    speed: float = 1.0
    speaker_cache: int = 64  # voices kept in the model's speaker table (LRU)

    def problems(self) -> list[tuple[str, str]]:
        return self.above_0("token_hop_len", "first_hop_len", "speed", "speaker_cache")
