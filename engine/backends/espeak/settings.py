"""eSpeak NG's settings: the [engine.espeak] table."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from engine.settings import BackendTable


@dataclass(frozen=True)
class EspeakSettings(BackendTable):
    TABLE: ClassVar[str] = "espeak"

    enabled: bool = True  # speak languages no other voice speaks with eSpeak NG (when installed)
    command: str = "espeak-ng"
