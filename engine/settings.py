"""Typed, frozen engine settings; bot/config.py fills them from the [engine] tables of config.toml. The generic
parts are here; each backend package's own table (engine/backends/<name>/settings.py, a BackendTable) is held in
EngineSettings.tables."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar, Self

from engine.backends import DEFAULT_BACKEND, PACKAGES


class BackendTable:
    """Base of a backend package's settings, a frozen dataclass in its settings.py: its [engine.<TABLE>] table."""

    TABLE: ClassVar[str]  # the table's name in config.toml: [engine.<TABLE>]

    @classmethod
    def of(cls, settings: EngineSettings) -> Self:
        """This package's table in `settings`."""
        for table in settings.tables:
            if isinstance(table, cls):
                return table
        raise LookupError(f"{cls.__name__} is not the settings of a package in engine.backends.PACKAGES")

    def problems(self) -> list[tuple[str, str]]:
        """(key, what was expected) for each value out of its range; the settings' checks report the first."""
        return []

    def at_least(self, low: float, *keys: str) -> list[tuple[str, str]]:
        return [(k, f"expected {low:g} or more, got {getattr(self, k)!r}") for k in keys if getattr(self, k) < low]

    def above_0(self, *keys: str) -> list[tuple[str, str]]:
        return [(k, f"expected a number above 0, got {getattr(self, k)!r}") for k in keys if getattr(self, k) <= 0]


@functools.cache
def table_classes() -> Mapping[str, type[BackendTable]]:
    """Every registered package's settings class by its TABLE, in engine.backends.PACKAGES' order."""
    classes = (package.settings_class() for package in PACKAGES.values())
    return {cls.TABLE: cls for cls in classes}


@dataclass(frozen=True)
class ConversionSettings:
    model: str = ""  # an operator's voice-conversion .onnx (docs/conversion.md); empty: off


@dataclass(frozen=True)
class ServerSettings:
    host: str = "127.0.0.1"
    port: int = 8600
    api_key_env: str = "VOICEBOT_ENGINE_API_KEY"
    max_input_chars: int = 4096
    max_upload_bytes: int = 10_000_000
    max_upload_parts: int = 8  # multipart parts in one upload (file, name, transcript and a few unknown)
    header_timeout_s: float = 10.0  # a connection must send a whole request head within this (also idle keep-alive)
    body_timeout_s: float = 30.0  # a request body must arrive within this
    write_timeout_s: float = 15.0  # a client that reads nothing for this long is dropped and frees its slot
    tls_cert: str = ""  # PEM certificate chain: serve HTTPS
    tls_key: str = ""  # PEM private key of tls_cert
    trusted_proxy_tls: bool = False  # a trusted reverse proxy terminates TLS: allow plain HTTP beyond loopback
    max_streams: int = 64  # speech responses at once; past it: 429
    voices_dir: str = ""  # folder of registered voices; empty: $XDG_DATA_HOME/voicebot/engine-voices


@dataclass(frozen=True)
class EngineSettings:
    backend: str = DEFAULT_BACKEND  # a name of engine.backends.BACKENDS
    workers: int = 2  # inference threads
    max_concurrency: int = 2  # segments synthesizing at once, across all keys
    per_key_limit: int = 1  # segments of one key (guild, client) synthesizing at once
    segment_timeout_s: float = 30.0
    max_abandoned: int = 2  # timed-out/skipped inference threads that may still be finishing (see streaming.py)
    first_segment_chars: int = 60  # the first segment is cut at a clause near this length
    max_segment_chars: int = 150  # also bounds one inference's memory: a session's arena grows with it
    max_text_chars: int = 2000  # longer text is refused; the bot checks its speech.max_text_chars fits (bot/config.py)
    loudness_target_dbfs: float = -20.0  # RMS target for normalization
    fade_ms: float = 5.0  # fade at utterance edges only
    conversion: ConversionSettings = field(default_factory=ConversionSettings)
    server: ServerSettings = field(default_factory=ServerSettings)
    # every backend package's table (its [engine.<TABLE>]; one not given: its defaults), read with its class
    # (`<Name>Settings.of(settings)`); conf.loader builds the file's into it (config_tables)
    tables: tuple[BackendTable, ...] = field(default=(), metadata={"config": False})

    def __post_init__(self) -> None:
        given = {table.TABLE: table for table in self.tables}  # a later one of a kind wins (with_tables)
        tables = tuple(given.pop(name) if name in given else cls() for name, cls in table_classes().items())
        if given:
            raise ValueError(f"not the settings of a registered package: {', '.join(given)}")
        object.__setattr__(self, "tables", tables)

    @classmethod
    def config_tables(cls) -> Mapping[str, type[BackendTable]]:
        """The [engine.<TABLE>] tables conf.loader builds into `tables`, by name."""
        return table_classes()

    def with_tables(self, *tables: BackendTable) -> EngineSettings:
        """A copy with these tables in place of their packages' ones."""
        return dataclasses.replace(self, tables=(*self.tables, *tables))

    def table_problems(self) -> list[str]:
        """"'engine.TABLE.KEY': what was expected, got ..." for each backend setting out of its range."""
        return [f"'engine.{table.TABLE}.{key}': {what}" for table in self.tables for key, what in table.problems()]
