"""Pronunciation dictionaries (bot.dictionary): per guild, WORD -> what is said instead, applied to whole words,
case-insensitively, after Discord cleanup and before segmentation; linear in the text, no user regexes."""

from __future__ import annotations

import json
import re

from bot.errors import UserError
from bot.storage import dictionary_repo as repo
from bot.storage.database import Database

MAX_ENTRIES = 500  # per guild
MAX_WORD_CHARS = 40
MAX_SAY_AS_CHARS = 100
MAX_IMPORT_BYTES = 200_000
MAX_NAME_CHARS = 40  # how a user's own name is said (/voice name)
# a word as the dictionary sees it: letters, digits, underscore, and ' or - inside it
WORD = re.compile(r"\w+(?:['\-]\w+)*")


def apply(text: str, entries: dict[str, str]) -> str:
    """`text` with every whole word that has an entry replaced (one left-to-right pass: linear)."""
    if not entries or not text:
        return text
    return WORD.sub(lambda m: entries.get(m.group(0).casefold(), m.group(0)), text)


def check_entry(word: str, say_as: str) -> tuple[str, str]:
    """(key, say_as) cleaned, or a UserError saying what an entry may hold."""
    key = " ".join((word or "").split()).casefold()
    if not key or len(key) > MAX_WORD_CHARS or not WORD.fullmatch(key):
        raise UserError(f"A dictionary word is one word of up to {MAX_WORD_CHARS} letters or digits "
                        "(' and - allowed inside it).")
    spoken = _printable(say_as)
    if not spoken or len(spoken) > MAX_SAY_AS_CHARS:
        raise UserError(f"Say what it should sound like in 1 to {MAX_SAY_AS_CHARS} characters.")
    return key, spoken


def check_spoken_name(say_as: str | None) -> str | None:
    """How a user's name is said, cleaned (None: as written), or a UserError saying the bound."""
    spoken = _printable(say_as)
    if len(spoken) > MAX_NAME_CHARS:
        raise UserError(f"Say how your name sounds in at most {MAX_NAME_CHARS} characters.")
    return spoken or None


def _printable(text: str | None) -> str:
    """One line of printable characters, runs of blanks made one space."""
    return " ".join("".join(c if c.isprintable() else " " for c in (text or "")).split())


def parse_import(data: bytes) -> dict[str, str]:
    """The entries of an exported dictionary (a JSON object WORD -> SAY_AS), all checked, or a UserError."""
    if len(data) > MAX_IMPORT_BYTES:
        raise UserError(f"That file is over {MAX_IMPORT_BYTES // 1000} kB; a dictionary export is much smaller.")
    try:
        raw = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise UserError("That file is not a dictionary export (JSON: {\"word\": \"say as\", ...}).") from None
    if not isinstance(raw, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in raw.items()):
        raise UserError("A dictionary export is a JSON object of words to what is said instead.")
    if len(raw) > MAX_ENTRIES:
        raise UserError(f"That dictionary has {len(raw)} words; a server may have {MAX_ENTRIES}.")
    out: dict[str, str] = {}
    for word, say_as in raw.items():
        try:
            key, spoken = check_entry(word, say_as)
        except UserError as exc:
            raise UserError(f"Nothing was imported: the entry {word[:40]!r} is not valid. {exc}") from None
        out[key] = spoken
    return out


def export(entries: dict[str, str]) -> bytes:
    return json.dumps(dict(sorted(entries.items())), ensure_ascii=False, indent=1).encode("utf-8")


class DictionaryService:
    """Each guild's entries, cached on this shard (the guild lives here)."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._cache: dict[int, dict[str, str]] = {}

    async def entries(self, guild_id: int) -> dict[str, str]:
        cached = self._cache.get(guild_id)
        if cached is None:
            cached = await repo.entries(self.db, guild_id)
            self._cache[guild_id] = cached
        return cached

    async def add(self, guild_id: int, word: str, say_as: str) -> tuple[str, str]:
        key, spoken = check_entry(word, say_as)
        if not await repo.put(self.db, guild_id, key, spoken, max_entries=MAX_ENTRIES):
            raise UserError(f"This server's dictionary has {MAX_ENTRIES} words, the most allowed; remove one first.")
        self._cache.pop(guild_id, None)
        return key, spoken

    async def remove(self, guild_id: int, word: str) -> bool:
        removed = await repo.remove(self.db, guild_id, " ".join((word or "").split()).casefold())
        self._cache.pop(guild_id, None)
        return removed

    async def replace(self, guild_id: int, data: bytes) -> int:
        new = parse_import(data)
        await repo.replace_all(self.db, guild_id, new)
        self._cache.pop(guild_id, None)
        return len(new)
