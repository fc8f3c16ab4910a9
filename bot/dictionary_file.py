"""The operator's global pronunciations (dictionary.global_file): a JSON or TOML file of words and patterns, read
and checked once at start; what is wrong with it is said in one line naming the file."""

from __future__ import annotations

import json
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot.dictionary_entries import check_entry, check_say_as, checked_entries, is_text_table
from bot.dictionary_patterns import Pattern, check_pattern, compile_pattern

MAX_FILE_BYTES = 1_000_000
MAX_WORDS = 20_000
MAX_PATTERNS = 200
FORM = 'a table "words" (WORD = "say as") and a table "patterns" (PATTERN = "say as"), both optional'


class GlobalFileError(ValueError):
    """The global file cannot be used; the message names the file and what is wrong, on one line."""


@dataclass(frozen=True)
class GlobalEntries:
    words: dict[str, str] = field(default_factory=dict)
    patterns: tuple[Pattern, ...] = ()


def global_entries(path: Path | None) -> GlobalEntries:
    """The entries of the file the config names (Settings.global_dictionary), none when it names none."""
    return load_global(path) if path is not None else GlobalEntries()


def load_global(path: Path) -> GlobalEntries:
    """The entries of the operator's file at `path` (.json or .toml), every one checked, or GlobalFileError."""
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise GlobalFileError(f"{path}: {size} bytes, over the limit of {MAX_FILE_BYTES}")
        data = path.read_bytes()
    except OSError as exc:
        raise GlobalFileError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    raw = _parse(path, data)
    unknown = set(raw) - {"words", "patterns"}
    if unknown:
        raise GlobalFileError(f"{path}: unknown key {sorted(unknown)[0]!r}; expected {FORM}")
    words = _checked(path, raw, "words", MAX_WORDS, check_entry)
    patterns = _checked(path, raw, "patterns", MAX_PATTERNS, lambda p, s: (check_pattern(p), check_say_as(s)))
    return GlobalEntries(words, tuple(compile_pattern(p, s) for p, s in patterns.items()))


def _parse(path: Path, data: bytes) -> dict[str, Any]:
    try:
        text = data.decode("utf-8")
        if path.suffix.lower() == ".toml":
            raw = tomllib.loads(text)
        elif path.suffix.lower() == ".json":
            raw = json.loads(text)
        else:
            raise GlobalFileError(f"{path}: expected a .json or .toml file")
    except UnicodeDecodeError:
        raise GlobalFileError(f"{path}: not UTF-8 text") from None
    except (ValueError, tomllib.TOMLDecodeError) as exc:
        if isinstance(exc, GlobalFileError):
            raise
        raise GlobalFileError(f"{path}: not valid {path.suffix.lower().lstrip('.').upper()}: "
                              f"{' '.join(str(exc).split())}") from None
    if not isinstance(raw, dict):
        raise GlobalFileError(f"{path}: expected {FORM}")
    return raw


def _checked(path: Path, raw: dict[str, Any], name: str, most: int,
             check: Callable[[str, str], tuple[str, str]]) -> dict[str, str]:
    """The table `name` of the file, each entry checked by `check`, or GlobalFileError naming the first bad one."""
    table = raw.get(name, {})
    if not is_text_table(table):
        raise GlobalFileError(f"{path}: '{name}' must map text to text (\"word\" = \"say as\")")
    if len(table) > most:
        raise GlobalFileError(f"{path}: {len(table)} {name}, over the limit of {most}")
    return checked_entries(table, check, lambda key, exc: GlobalFileError(f"{path}: {name} {key[:40]!r}: {exc}"))
