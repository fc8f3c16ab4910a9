"""Synthesis backends (Kokoro, the default; Piper; CosyVoice2 on a GPU; a remote engine server), eSpeak NG, pools."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from engine.base import Backend
    from engine.settings import EngineSettings


class Package(NamedTuple):
    """A backend package: `<package>.settings` defines its settings class (its [engine.<TABLE>] table, an
    engine.settings.BackendTable) and `<package>.backend` its backend class, whose `from_settings(EngineSettings)`
    builds it. No backend class: not an engine.backend of its own (eSpeak NG speaks beside the configured one).
    `voices` names a function of `<package>.backend`, `(EngineSettings, taken: set[str]) -> dict[str, Backend]`: the
    voices the engine holds beside the configured backend (engine/catalog.py), by names not in `taken`."""

    package: str
    settings: str
    backend: str = ""
    voices: str = ""

    def settings_class(self) -> Any:
        return getattr(importlib.import_module(f"{self.package}.settings"), self.settings)

    def backend_class(self) -> Any:
        """The backend class; ImportError when its package or a library it needs is not installed."""
        return getattr(importlib.import_module(f"{self.package}.backend"), self.backend)

    def extra_voices(self, settings: EngineSettings, taken: set[str]) -> dict[str, Backend]:
        """Its voices beside the configured backend, by name ({} without `voices`); ImportError as backend_class."""
        if not self.voices:
            return {}
        found: dict[str, Backend] = getattr(importlib.import_module(f"{self.package}.backend"), self.voices)(
            settings, taken)
        return found


# The one registration of a backend: a line here. The factory, the settings (each package's table, its defaults and
# checks), the settings' check of engine.backend, the catalog (the voices beside the configured backend, in this order)
# and the CLI's help all read this.
PACKAGES = {
    "kokoro": Package("engine.backends.kokoro", "KokoroSettings", "KokoroBackend"),
    "piper": Package("engine.backends.piper", "PiperSettings", "PiperBackend", voices="folder_voices"),
    "cosyvoice2": Package("engine.backends.cosyvoice", "CosyVoiceSettings", "CosyVoiceBackend"),
    "remote": Package("engine.backends.remote", "RemoteSettings", "RemoteBackend"),
    "espeak": Package("engine.backends.espeak", "EspeakSettings", voices="espeak_voice"),
}
BACKENDS = {name: package for name, package in PACKAGES.items() if package.backend}  # engine.backend's choices
DEFAULT_BACKEND = "kokoro"


def backend_names() -> str:
    """"kokoro (default), piper, ...": for help texts."""
    return ", ".join(f"{n} (default)" if n == DEFAULT_BACKEND else n for n in BACKENDS)
