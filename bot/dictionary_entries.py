"""What a pronunciation entry may hold (a word, what is said instead, how a name is said), checked: below both the
dictionaries (bot/dictionary.py) and the operator's file (bot/dictionary_file.py)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from bot.errors import UserError

MAX_WORD_CHARS = 40
MAX_SAY_AS_CHARS = 100
MAX_NAME_CHARS = 40  # how a user's own name is said (/voice name)
# a word as the dictionary sees it: letters, digits, underscore, and ' or - inside it
WORD = re.compile(r"\w+(?:['\-]\w+)*")


def check_entry(word: str, say_as: str) -> tuple[str, str]:
    """(key, say_as) cleaned, or a UserError saying what an entry may hold."""
    key = word_key(word)
    if not key or len(key) > MAX_WORD_CHARS or not WORD.fullmatch(key):
        raise UserError(f"A dictionary word is one word of up to {MAX_WORD_CHARS} letters or digits "
                        "(' and - allowed inside it; for more, a pattern).")
    return key, check_say_as(say_as)


def check_say_as(say_as: str) -> str:
    """What an entry says instead, cleaned, or a UserError saying the bound."""
    spoken = _printable(say_as)
    if not spoken or len(spoken) > MAX_SAY_AS_CHARS:
        raise UserError(f"Say what it should sound like in 1 to {MAX_SAY_AS_CHARS} characters.")
    return spoken


def word_key(word: str) -> str:
    """A word as entries are keyed: blanks folded, case folded."""
    return " ".join((word or "").split()).casefold()


def check_spoken_name(say_as: str | None) -> str | None:
    """How a user's name is said, cleaned (None: as written), or a UserError saying the bound."""
    spoken = _printable(say_as)
    if len(spoken) > MAX_NAME_CHARS:
        raise UserError(f"Say how your name sounds in at most {MAX_NAME_CHARS} characters.")
    return spoken or None


def _printable(text: str | None) -> str:
    """One line of printable characters, runs of blanks made one space."""
    return " ".join("".join(c if c.isprintable() else " " for c in (text or "")).split())


def is_text_table(raw: object) -> bool:
    """Whether `raw` (as read from JSON or TOML) maps text to text."""
    return isinstance(raw, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in raw.items())


def checked_entries(table: Mapping[str, str], check: Callable[[str, str], tuple[str, str]],
                    bad: Callable[[str, UserError], Exception]) -> dict[str, str]:
    """Every entry of `table` as `check` cleans it; the first it refuses raises `bad(key, its UserError)`."""
    out: dict[str, str] = {}
    for key, say_as in table.items():
        try:
            clean, spoken = check(key, say_as)
        except UserError as exc:
            raise bad(key, exc) from None
        out[clean] = spoken
    return out
