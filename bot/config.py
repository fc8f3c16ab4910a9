"""Typed, frozen settings from config.toml plus environment overrides; errors name file, key and expectation."""

from __future__ import annotations

import dataclasses
import os
import tomllib
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from engine.settings import EngineSettings

ENV_PREFIX = "VOICEBOT__"
TOKEN_ENV = "DISCORD_TOKEN"
DEFAULT_CONFIG = Path(__file__).resolve().parent.parent / "config.toml"


class ConfigError(Exception):
    """One clear line: which file, which key, what was expected."""


@dataclass(frozen=True)
class DiscordSettings:
    sync_guild: int = 0  # 0: sync slash commands globally; a guild id: sync there only (development)
    shard_count: int = 0  # 0: let Discord decide (AutoShardedBot)
    shard_ids: list[int] = field(default_factory=list)  # shards this process runs; empty: all
    owner_ids: list[int] = field(default_factory=list)  # bot owners; empty: the application's owner
    command_prefix: str = "!"  # prefix commands are not used, but readout skips messages with it
    guild_ready_timeout: float = 2.0
    token: str = field(default="", repr=False)  # only from the DISCORD_TOKEN environment variable


@dataclass(frozen=True)
class DatabaseSettings:
    url: str = ""  # any SQLAlchemy async URL, e.g. postgresql+asyncpg://user@host/db; empty: SQLite at path
    path: str = "data/voicebot.db"  # SQLite file, relative to the config file's folder
    echo: bool = False


@dataclass(frozen=True)
class LoggingSettings:
    level: str = "INFO"  # DEBUG, INFO, WARNING, ERROR
    discord_level: str = "WARNING"  # level of discord.py's own loggers


@dataclass(frozen=True)
class PluginSettings:
    enabled: list[str] = field(default_factory=lambda: ["admin", "speech", "voices", "readout"])


@dataclass(frozen=True)
class SpeechSettings:
    queue_max: int = 20  # utterances waiting per guild
    per_guild: int = 1  # utterances of one guild synthesizing at once
    lookahead: int = 1  # utterances synthesized ahead of the one playing
    buffer_s: float = 10.0  # audio buffered ahead per utterance (bounds memory per guild)
    idle_leave_s: float = 300.0  # leave the voice channel after this long with nothing to say; 0: never
    leave_when_alone: bool = True
    max_text_chars: int = 500  # longer text is cut with a spoken "and more"
    emoji: str = "name"  # name | skip: how unicode emoji are read
    links: str = "a link"  # "a link" | domain
    opus_bitrate: int = 64  # kbps; speech needs no more
    opus_fec: bool = False  # in-band forward error correction: ~4x the encoder's CPU per stream
    busy_preroll_s: float = 5.0  # engine busy with other guilds: buffer this much audio before playing; 0: never
    busy_preroll_wait_s: float = 4.0  # the longest that buffering may delay the first word


@dataclass(frozen=True)
class VoiceSettings:
    max_clip_bytes: int = 10_000_000
    min_speech_s: float = 3.0
    max_speech_s: float = 30.0
    max_per_user: int = 10
    cache_size: int = 256  # voices kept in memory (LRU)


@dataclass(frozen=True)
class ReadoutSettings:
    skip_prefixes: list[str] = field(default_factory=lambda: ["("])  # plus the command prefix
    xsaid_window_s: float = 60.0  # "NAME said" is omitted for the same author within this time
    user_cooldown_s: float = 0.5  # minimum time between one user's messages
    user_burst: int = 5  # messages a user may send at once before the cooldown applies


@dataclass(frozen=True)
class WebSettings:
    enabled: bool = False
    host: str = "127.0.0.1"
    port: int = 8700


@dataclass(frozen=True)
class Settings:
    discord: DiscordSettings = field(default_factory=DiscordSettings)
    database: DatabaseSettings = field(default_factory=DatabaseSettings)
    logging: LoggingSettings = field(default_factory=LoggingSettings)
    plugins: PluginSettings = field(default_factory=PluginSettings)
    engine: EngineSettings = field(default_factory=EngineSettings)
    speech: SpeechSettings = field(default_factory=SpeechSettings)
    voices: VoiceSettings = field(default_factory=VoiceSettings)
    readout: ReadoutSettings = field(default_factory=ReadoutSettings)
    web: WebSettings = field(default_factory=WebSettings)
    base_dir: str = "."  # folder of the config file; relative paths are resolved against it

    def resolve(self, path: str) -> Path:
        p = Path(path).expanduser()
        return p if p.is_absolute() else Path(self.base_dir) / p

    @property
    def database_url(self) -> str:
        if self.database.url:
            return self.database.url
        return f"sqlite+aiosqlite:///{self.resolve(self.database.path)}"


_TYPE_WORDS = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}


def _describe(tp: Any) -> str:
    if typing.get_origin(tp) is list:
        (inner,) = typing.get_args(tp)
        return f"a list of {_describe(inner).removeprefix('an ').removeprefix('a ')}s"
    return _TYPE_WORDS.get(tp, getattr(tp, "__name__", str(tp)))


def _convert(value: Any, tp: Any, where: str) -> Any:
    """Check `value` against the annotation `tp`; ints are accepted where floats are expected."""
    origin = typing.get_origin(tp)
    if origin is list:
        (inner,) = typing.get_args(tp)
        if not isinstance(value, list):
            raise ConfigError(f"'{where}': expected {_describe(tp)}, got {value!r}")
        return [_convert(v, inner, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin in (typing.Union, types.UnionType):
        for option in typing.get_args(tp):
            if option is type(None) and value is None:
                return None
            try:
                return _convert(value, option, where)
            except ConfigError:
                continue
        raise ConfigError(f"'{where}': expected {_describe(tp)}, got {value!r}")
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if tp in _TYPE_WORDS:
        if type(value) is not tp:
            raise ConfigError(f"'{where}': expected {_describe(tp)}, got {value!r}")
        return value
    raise ConfigError(f"'{where}': unsupported setting type {tp}")


def _shown(key: str) -> str:
    """A key as it may appear in a one-line message: unprintable characters escaped."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in key)


def _build(cls: type, data: Mapping[str, Any], file: str, section: str) -> Any:
    hints = typing.get_type_hints(cls)
    known = {f.name: f for f in dataclasses.fields(cls)}
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        dotted = f"{section}.{key}" if section else key
        if key not in known or key == "base_dir":
            raise ConfigError(f"{file}: unknown key '{_shown(dotted)}' (check the spelling against config.toml)")
        tp = hints[key]
        if dataclasses.is_dataclass(tp):
            if not isinstance(value, dict):
                raise ConfigError(f"{file}: '{dotted}' must be a table [{dotted}], got {value!r}")
            kwargs[key] = _build(tp, value, file, dotted)
        else:
            if isinstance(value, dict):
                raise ConfigError(f"{file}: '{dotted}': expected {_describe(tp)}, got a table")
            try:
                kwargs[key] = _convert(value, tp, dotted)
            except ConfigError as exc:
                raise ConfigError(f"{file}: {exc}") from None
    return cls(**kwargs)


def _parse_env_value(raw: str) -> Any:
    """Read an environment value as a TOML value when it is one, else as a plain string."""
    try:
        return tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        return raw


def _merge_env(data: dict[str, Any], environ: Mapping[str, str]) -> None:
    for name, raw in environ.items():
        if not name.startswith(ENV_PREFIX):
            continue
        parts = [p.lower() for p in name[len(ENV_PREFIX):].split("__") if p]
        if not parts:
            continue
        node = data
        for part in parts[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigError(f"environment: {name} names a key inside '{part}', which is not a table")
            node = child
        node[parts[-1]] = _parse_env_value(raw)


def load_settings(
    path: str | Path | None = None,
    environ: Mapping[str, str] | None = None,
    *,
    require_token: bool = False,
) -> Settings:
    """Read settings from `path` (default: config.toml beside run_bot.py) and the environment."""
    environ = os.environ if environ is None else environ
    file = Path(path) if path is not None else DEFAULT_CONFIG
    if not file.is_file():
        raise ConfigError(f"{file}: config file not found (pass --config FILE or create config.toml)")
    try:
        data = tomllib.loads(file.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{file}: not valid TOML: {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{file}: cannot be read: {exc}") from None
    if "token" in data.get("discord", {}):
        raise ConfigError(
            f"{file}: 'discord.token' must not be in a file; set the {TOKEN_ENV} environment variable"
        )
    _merge_env(data, environ)
    data.setdefault("discord", {})
    if isinstance(data["discord"], dict):
        data["discord"]["token"] = environ.get(TOKEN_ENV, "").strip()
    settings: Settings = _build(Settings, data, str(file), "")
    settings = dataclasses.replace(settings, base_dir=str(file.resolve().parent))
    _validate(settings, str(file))
    if require_token and not settings.discord.token:
        raise ConfigError(f"{file}: no Discord token: set the {TOKEN_ENV} environment variable")
    return settings


_CHOICES = {
    ("logging", "level"): ("DEBUG", "INFO", "WARNING", "ERROR"),
    ("logging", "discord_level"): ("DEBUG", "INFO", "WARNING", "ERROR"),
    ("engine", "backend"): ("piper", "cosyvoice2", "remote"),
    ("speech", "emoji"): ("name", "skip"),
    ("speech", "links"): ("a link", "domain"),
}
_POSITIVE = {
    ("engine", "workers"), ("engine", "max_concurrency"), ("engine", "per_key_limit"),
    ("engine", "max_segment_chars"), ("engine", "first_segment_chars"), ("engine", "max_text_chars"),
    ("speech", "queue_max"), ("speech", "per_guild"), ("speech", "max_text_chars"),
    ("voices", "max_clip_bytes"), ("voices", "cache_size"), ("engine", "segment_timeout_s"),
}


def _validate(settings: Settings, file: str) -> None:
    for (section, key), allowed in _CHOICES.items():
        value = getattr(getattr(settings, section), key)
        check = value.upper() if section == "logging" else value
        if check not in allowed:
            raise ConfigError(f"{file}: '{section}.{key}': expected one of {', '.join(allowed)}, got {value!r}")
    for section, key in _POSITIVE:
        value = getattr(getattr(settings, section), key)
        if value <= 0:
            raise ConfigError(f"{file}: '{section}.{key}': expected a number above 0, got {value!r}")
    if not 16 <= settings.speech.opus_bitrate <= 512:
        raise ConfigError(f"{file}: 'speech.opus_bitrate': expected 16 to 512 (kbps), got {settings.speech.opus_bitrate}")
    if settings.speech.lookahead < 0:
        raise ConfigError(f"{file}: 'speech.lookahead': expected 0 or more, got {settings.speech.lookahead}")
