"""The remote backend's settings: the [engine.remote] table."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from engine.settings import BackendTable


@dataclass(frozen=True)
class RemoteSettings(BackendTable):
    TABLE: ClassVar[str] = "remote"

    url: str = "http://127.0.0.1:8600"  # base URL of an OpenAI-compatible speech server
    model: str = "default"
    api_key_env: str = "VOICEBOT_ENGINE_API_KEY"  # name of the environment variable holding the key
    connect_timeout_s: float = 5.0
    read_timeout_s: float = 30.0
    retries: int = 2  # on connect errors only

    def problems(self) -> list[tuple[str, str]]:
        return self.above_0("connect_timeout_s", "read_timeout_s") + self.at_least(0, "retries")
