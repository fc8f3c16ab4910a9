"""Typed, frozen settings from config.toml plus environment overrides; errors name file, key and expectation."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from conf.loader import DEFAULT_CONFIG, ENV_PREFIX, ConfigError, build, merge_env, read_config
from engine.backends import BACKENDS
from engine.settings import EngineSettings

__all__ = ["DEFAULT_CONFIG", "ENV_PREFIX", "ConfigError", "Settings", "load_settings"]
TOKEN_ENV = "DISCORD_TOKEN"
MORE = ", and more"  # spoken after text cut at a length limit: the longest utterance is speech.max_text_chars + MORE


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
    enabled: list[str] = field(default_factory=lambda: ["admin", "speech", "voices", "readout", "dictionary"])


@dataclass(frozen=True)
class SpeechSettings:
    queue_max: int = 20  # utterances waiting per guild
    per_guild: int = 1  # utterances of one guild synthesizing at once
    lookahead: int = 1  # utterances synthesized ahead of the one playing
    buffer_s: float = 60.0  # audio buffered ahead per utterance (bounds memory per guild); holds a whole utterance
    idle_leave_s: float = 300.0  # leave the voice channel after this long with nothing to say; 0: never
    leave_when_alone: bool = True
    max_text_chars: int = 500  # longer text is cut with a spoken "and more"
    emoji: str = "name"  # name | skip: how unicode emoji are read
    links: str = "a link"  # "a link" | domain
    opus_bitrate: int = 64  # kbps; speech needs no more
    opus_fec: bool = False  # in-band forward error correction: ~3.5x the encoder's CPU per stream
    opus_complexity: int = 5  # 0-10: the encoder's effort; 5: ~0.65x the CPU of 10, nearly the same quality for speech
    max_delay_s: int = 300  # the most a guild may set max_delay to (seconds a readout message may wait)
    max_repeated_characters: int = 20  # the most a guild may set repeated_characters to (a character said in a row)
    max_ducking_db: int = 30  # the most a guild may set ducking to (dB the bot's level falls while a member speaks)
    say_notice_s: float = 5.0  # /say tells the expected wait when it is longer than this
    catch_up_speed: float = 1.3  # the most speech is sped up while a guild's channel is behind (1: never)
    e2ee_wait_s: float = 10.0  # longest wait for E2EE voice (DAVE) to be ready before speaking; then the user is told


@dataclass(frozen=True)
class VoiceSettings:
    max_clip_bytes: int = 10_000_000
    max_per_user: int = 10
    cache_size: int = 256  # voices kept in memory (LRU)


@dataclass(frozen=True)
class ReadoutSettings:
    skip_prefixes: list[str] = field(default_factory=lambda: ["("])  # plus the command prefix
    xsaid_window_s: float = 60.0  # "NAME said" is omitted for the same author within this time
    user_cooldown_s: float = 0.5  # minimum time between one user's messages
    user_burst: int = 5  # messages a user may send at once before the cooldown applies


@dataclass(frozen=True)
class DictionarySettings:
    global_file: str = ""  # the operator's pronunciations for every server (JSON or TOML); empty: none


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
    dictionary: DictionarySettings = field(default_factory=DictionarySettings)
    web: WebSettings = field(default_factory=WebSettings)
    base_dir: str = field(default=".", metadata={"config": False})  # the config file's folder: relative paths' base

    def resolve(self, path: str) -> Path:
        p = Path(path).expanduser()
        return p if p.is_absolute() else Path(self.base_dir) / p

    @property
    def global_dictionary(self) -> Path | None:
        """The operator's dictionary file (dictionary.global_file), None when it names none."""
        name = self.dictionary.global_file
        return self.resolve(name) if name else None

    @property
    def database_url(self) -> str:
        if self.database.url:
            return self.database.url
        return f"sqlite+aiosqlite:///{self.resolve(self.database.path)}"


def load_settings(
    path: str | Path | None = None,
    environ: Mapping[str, str] | None = None,
    *,
    require_token: bool = False,
) -> Settings:
    """Read settings from `path` (default: config.toml beside run_bot.py) and the environment."""
    import os

    environ = os.environ if environ is None else environ
    file, data = read_config(path, environ, from_environment=False)
    if isinstance(data.get("discord"), dict) and "token" in data["discord"]:
        raise ConfigError(
            f"{file}: 'discord.token' must not be in a file; set the {TOKEN_ENV} environment variable"
        )
    merge_env(data, environ)
    data.setdefault("discord", {})
    if isinstance(data["discord"], dict):
        data["discord"]["token"] = environ.get(TOKEN_ENV, "").strip()
    settings: Settings = build(Settings, data, str(file), "")
    settings = dataclasses.replace(settings, base_dir=str(file.resolve().parent))
    _validate(settings, str(file))
    if require_token and not settings.discord.token:
        raise ConfigError(f"{file}: no Discord token: set the {TOKEN_ENV} environment variable")
    return settings


_CHOICES = {
    ("logging", "level"): ("DEBUG", "INFO", "WARNING", "ERROR"),
    ("logging", "discord_level"): ("DEBUG", "INFO", "WARNING", "ERROR"),
    ("engine", "backend"): tuple(BACKENDS),
    ("speech", "emoji"): ("name", "skip"),
    ("speech", "links"): ("a link", "domain"),
}
_POSITIVE = {
    ("engine", "workers"), ("engine", "max_concurrency"), ("engine", "per_key_limit"),
    ("engine", "max_segment_chars"), ("engine", "first_segment_chars"), ("engine", "max_text_chars"),
    ("speech", "queue_max"), ("speech", "per_guild"), ("speech", "max_text_chars"),
    ("speech", "max_repeated_characters"), ("speech", "max_ducking_db"), ("voices", "max_clip_bytes"),
    ("voices", "cache_size"),
    ("engine", "segment_timeout_s"),
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
        raise ConfigError(f"{file}: 'speech.opus_bitrate': expected 16 to 512 (kbps), got "
                          f"{settings.speech.opus_bitrate}")
    if not 0 <= settings.speech.opus_complexity <= 10:
        raise ConfigError(f"{file}: 'speech.opus_complexity': expected 0 to 10, got {settings.speech.opus_complexity}")
    if not 1.0 <= settings.speech.catch_up_speed <= 2.0:
        raise ConfigError(f"{file}: 'speech.catch_up_speed': expected 1 to 2, got {settings.speech.catch_up_speed}")
    if settings.speech.lookahead < 0:
        raise ConfigError(f"{file}: 'speech.lookahead': expected 0 or more, got {settings.speech.lookahead}")
    _check_dictionary(settings, file)
    problems = settings.engine.table_problems()  # each backend package checks its own table
    if problems:
        raise ConfigError(f"{file}: {problems[0]}")
    # the bot's longest utterance is speech.max_text_chars plus MORE
    if settings.speech.max_text_chars + len(MORE) > settings.engine.max_text_chars:
        raise ConfigError(
            f"{file}: 'speech.max_text_chars' ({settings.speech.max_text_chars}) plus the {len(MORE)} characters of "
            f"{MORE.strip(', ')!r} must fit 'engine.max_text_chars' ({settings.engine.max_text_chars})"
        )


def _check_dictionary(settings: Settings, file: str) -> None:
    """The operator's global dictionary is read and checked at start: what is wrong with it stops the bot."""
    from bot.dictionary_file import GlobalFileError, global_entries

    try:
        global_entries(settings.global_dictionary)
    except GlobalFileError as exc:
        raise ConfigError(f"{file}: 'dictionary.global_file': {exc}") from None
