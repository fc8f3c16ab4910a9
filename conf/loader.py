"""Typed, frozen settings from a TOML file plus VOICEBOT__SECTION__KEY environment overrides.

Neutral ground for the bot (bot/config.py) and the engine server (`python -m engine serve --config FILE`):
it knows dataclasses and TOML, nothing of Discord or synthesis. Errors name the file, the key and what
was expected, in one line.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
import types
import typing
from pathlib import Path
from typing import Any, Mapping

ENV_PREFIX = "VOICEBOT__"
DEFAULT_CONFIG = Path(__file__).resolve().parent.parent / "config.toml"


class ConfigError(Exception):
    """One clear line: which file, which key, what was expected."""


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


def build(cls: type, data: Mapping[str, Any], file: str, section: str) -> Any:
    """`cls`, a dataclass, from a table whose keys are its fields (but those with metadata {"config": False}) and,
    when it has a classmethod `config_tables()` (name -> dataclass), those tables too, built and handed to it
    together as its `tables` argument (a tuple)."""
    hints = typing.get_type_hints(cls)
    known = {f.name: f for f in dataclasses.fields(cls) if f.metadata.get("config", True)}
    extra: Mapping[str, type] = cls.config_tables() if hasattr(cls, "config_tables") else {}
    kwargs: dict[str, Any] = {}
    tables: list[Any] = []
    for key, value in data.items():
        dotted = f"{section}.{key}" if section else key
        if key not in known and key not in extra:
            raise ConfigError(f"{file}: unknown key '{_shown(dotted)}' (check the spelling against config.toml)")
        tp = extra[key] if key in extra else hints[key]
        if isinstance(tp, type) and dataclasses.is_dataclass(tp):
            if not isinstance(value, dict):
                raise ConfigError(f"{file}: '{dotted}' must be a table [{dotted}], got {value!r}")
            if key in extra:
                tables.append(build(tp, value, file, dotted))
            else:
                kwargs[key] = build(tp, value, file, dotted)
        else:
            if isinstance(value, dict):
                raise ConfigError(f"{file}: '{dotted}': expected {_describe(tp)}, got a table")
            try:
                kwargs[key] = _convert(value, tp, dotted)
            except ConfigError as exc:
                raise ConfigError(f"{file}: {exc}") from None
    if tables:
        kwargs["tables"] = tuple(tables)
    return cls(**kwargs)


def _parse_env_value(raw: str) -> Any:
    """Read an environment value as a TOML value when it is one, else as a plain string."""
    try:
        return tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        return raw


def merge_env(data: dict[str, Any], environ: Mapping[str, str]) -> None:
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


def read_config(
    path: str | Path | None, environ: Mapping[str, str] | None = None, *, from_environment: bool = True
) -> tuple[Path, dict[str, Any]]:
    """The file's tables, with the environment's overrides merged in unless told not to; (file, data)."""
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
    if from_environment:
        merge_env(data, environ)
    return file, data


T = typing.TypeVar("T")


def load_section(cls: type[T], section: str, path: str | Path | None = None,
                 environ: Mapping[str, str] | None = None) -> T:
    """One table of the file (e.g. `engine` for the engine server), typed as `cls`; other tables are ignored."""
    file, data = read_config(path, environ)
    table = data.get(section, {})
    if not isinstance(table, dict):
        raise ConfigError(f"{file}: '{section}' must be a table [{section}], got {table!r}")
    return build(cls, table, str(file), section)
