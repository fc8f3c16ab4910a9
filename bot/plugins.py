"""Finds, loads, unloads and reloads plugins (discord.py extensions); one broken plugin never stops the bot."""

from __future__ import annotations

import importlib
import logging
import traceback
from dataclasses import dataclass
from pathlib import Path

from discord.ext import commands

log = logging.getLogger(__name__)
PLUGINS_DIR = Path(__file__).resolve().parent.parent / "plugins"


@dataclass(frozen=True)
class PluginStatus:
    name: str
    loaded: bool
    error: str = ""  # the last failure's one-line reason


class PluginManager:
    """Keeps which plugins are loaded and why the others are not."""

    def __init__(self, bot: commands.Bot, package: str = "plugins", directory: Path = PLUGINS_DIR) -> None:
        self.bot = bot
        self.package = package
        self.directory = directory
        self.errors: dict[str, str] = {}

    def available(self) -> list[str]:
        """Plugin folders (packages with an __init__.py) in the plugins directory."""
        if not self.directory.is_dir():
            return []
        return sorted(
            p.name for p in self.directory.iterdir()
            if p.is_dir() and (p / "__init__.py").is_file() and not p.name.startswith("_")
        )

    def _module(self, name: str) -> str:
        return f"{self.package}.{name}"

    def is_loaded(self, name: str) -> bool:
        return self._module(name) in self.bot.extensions

    def status(self) -> list[PluginStatus]:
        names = sorted(set(self.available()) | set(self.errors))
        return [PluginStatus(n, self.is_loaded(n), self.errors.get(n, "")) for n in names]

    def _record_failure(self, name: str, action: str, exc: BaseException) -> str:
        cause = exc.__cause__ or exc.original if isinstance(exc, commands.ExtensionFailed) else exc
        cause = cause or exc
        reason = f"{type(cause).__name__}: {cause}"
        self.errors[name] = reason
        log.error(
            "plugin %s failed to %s; skipped:\n%s",
            name, action, "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)),
        )
        return reason

    def _check_name(self, name: str) -> None:
        if name not in self.available():
            raise LookupError(f"there is no plugin named {name!r}; known: {', '.join(self.available()) or 'none'}")

    async def load(self, name: str) -> bool:
        """Load one plugin; False (logged with its traceback) when it fails to import or set up."""
        try:
            self._check_name(name)
            await self.bot.load_extension(self._module(name))
        except commands.ExtensionAlreadyLoaded:
            return True
        except LookupError as exc:
            self.errors[name] = str(exc)
            log.error("plugin %s: %s", name, exc)
            return False
        except Exception as exc:  # noqa: BLE001 - a broken plugin is skipped, never fatal
            self._record_failure(name, "load", exc)
            return False
        self.errors.pop(name, None)
        log.info("plugin %s loaded", name)
        return True

    async def load_all(self, names: list[str]) -> dict[str, bool]:
        return {name: await self.load(name) for name in names}

    async def unload(self, name: str) -> bool:
        try:
            await self.bot.unload_extension(self._module(name))
        except commands.ExtensionNotLoaded:
            return False
        except Exception as exc:  # noqa: BLE001 - a broken plugin is recorded, never fatal
            self._record_failure(name, "unload", exc)
            return False
        log.info("plugin %s unloaded", name)
        return True

    async def reload(self, name: str) -> bool:
        """Reload a loaded plugin (or load it); on failure discord.py keeps the old version running."""
        if not self.is_loaded(name):
            return await self.load(name)
        try:
            importlib.invalidate_caches()
            await self.bot.reload_extension(self._module(name))
        except Exception as exc:  # noqa: BLE001 - a broken plugin is recorded, never fatal
            self._record_failure(name, "reload", exc)
            return False
        self.errors.pop(name, None)
        log.info("plugin %s reloaded", name)
        return True
