"""Pronunciation dictionaries (bot.dictionary): whole words (a user's own, the server's, the operator's) and
patterns (the server's, the operator's), applied after Discord cleanup and before segmentation, each stretch of
text replaced at most once, in that order of precedence."""

from __future__ import annotations

import functools
import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bot.dictionary_entries import WORD, check_entry, check_say_as, checked_entries, is_text_table, word_key
from bot.dictionary_patterns import BUDGET_S, Pattern, compile_pattern, spans
from bot.errors import UserError
from bot.storage import dictionary_repo as repo
from bot.storage.database import Database

if TYPE_CHECKING:
    from bot.dictionary_file import GlobalEntries

log = logging.getLogger(__name__)

MAX_ENTRIES = 500  # per guild
MAX_USER_ENTRIES = 100  # a user's own words
MAX_PATTERNS = 50  # per guild
USER_TTL_S = 30.0  # a user's words may change on another shard's process
MAX_IMPORT_BYTES = 200_000


Piece = tuple[str, bool]  # a stretch of text, and whether it is an entry's replacement (not replaced again)


@dataclass(frozen=True)
class Layer:
    """One owner's entries (a user's, a server's, the operator's): whole words, then patterns."""

    words: Mapping[str, str] = field(default_factory=dict)
    patterns: tuple[Pattern, ...] = ()


@dataclass(frozen=True)
class Rules:
    """What applies to one author's message, the first layer first: theirs, the server's, the operator's."""

    layers: tuple[Layer, ...] = ()


def apply(text: str, entries: Mapping[str, str]) -> str:
    """`text` with every whole word that has an entry replaced (one left-to-right pass: linear)."""
    return pronounce(text, Rules((Layer(entries),)))


def pronounce(text: str, rules: Rules, budget_s: float = BUDGET_S) -> str:
    """`text` as `rules` say it: layer by layer, its whole words then its patterns, each on the text no entry
    replaced yet. The patterns stop at `budget_s` seconds in all (those left are not applied, and it is logged);
    words, linear, always apply."""
    pieces: list[Piece] = [(text, False)]
    deadline = time.monotonic() + budget_s
    total = sum(len(layer.patterns) for layer in rules.layers)
    done, spent = 0, False
    for layer in rules.layers:
        if layer.words:
            pieces = _splice(pieces, functools.partial(_found_words, entries=layer.words))
        for pattern in () if spent else layer.patterns:
            try:
                pieces = _splice(pieces, functools.partial(_found_pattern, pattern=pattern, deadline=deadline))
            except TimeoutError:
                log.warning("dictionary patterns over their %.0f ms budget: %d of %d not applied",
                            budget_s * 1000, total - done, total)
                spent = True
                break
            done += 1
    return "".join(p for p, _ in pieces)


def _found_words(text: str, entries: Mapping[str, str]) -> Iterable[tuple[int, int, str]]:
    for m in WORD.finditer(text):
        said = entries.get(m.group(0).casefold())
        if said is not None:
            yield m.start(), m.end(), said


def _found_pattern(text: str, pattern: Pattern, deadline: float) -> list[tuple[int, int, str]]:
    """Every match of `pattern` in `text`, or TimeoutError past `deadline` (time.monotonic)."""
    return [(start, end, pattern.say_as) for start, end in spans(pattern, text, deadline - time.monotonic())]


def _splice(pieces: list[Piece], find: Callable[[str], Iterable[tuple[int, int, str]]]) -> list[Piece]:
    """`pieces` with what `find` finds in each free one, (start, end, said), replaced by what is said."""
    out: list[Piece] = []
    for text, fixed in pieces:
        if fixed or not text:
            out.append((text, fixed))
            continue
        at = 0
        for start, end, said in find(text):
            out += [(text[at:start], False), (said, True)]
            at = end
        out.append((text[at:], False))
    return out












def parse_import(data: bytes) -> dict[str, str]:
    """The entries of an exported dictionary (a JSON object WORD -> SAY_AS), all checked, or a UserError."""
    if len(data) > MAX_IMPORT_BYTES:
        raise UserError(f"That file is over {MAX_IMPORT_BYTES // 1000} kB; a dictionary export is much smaller.")
    try:
        raw = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise UserError("That file is not a dictionary export (JSON: {\"word\": \"say as\", ...}).") from None
    if not is_text_table(raw):
        raise UserError("A dictionary export is a JSON object of words to what is said instead.")
    if len(raw) > MAX_ENTRIES:
        raise UserError(f"That dictionary has {len(raw)} words; a server may have {MAX_ENTRIES}.")
    return checked_entries(raw, check_entry, lambda word, exc: UserError(
        f"Nothing was imported: the entry {word[:40]!r} is not valid. {exc}"))






def export(entries: dict[str, str]) -> bytes:
    return json.dumps(dict(sorted(entries.items())), ensure_ascii=False, indent=1).encode("utf-8")


class DictionaryService:
    """The entries: each guild's words and patterns (cached on this shard: the guild lives here), each user's words
    (cached briefly), and the operator's global ones (read at start)."""

    def __init__(self, db: Database, global_entries: GlobalEntries | None = None) -> None:
        self.db = db
        self.global_words: dict[str, str] = dict(global_entries.words) if global_entries else {}
        self.global_patterns: tuple[Pattern, ...] = global_entries.patterns if global_entries else ()
        self._cache: dict[int, dict[str, str]] = {}
        self._patterns: dict[int, tuple[Pattern, ...]] = {}
        self._users: dict[int, tuple[float, dict[str, str]]] = {}

    async def rules(self, guild_id: int, user_id: int | None) -> Rules:
        """What applies to `user_id`'s message in `guild_id`, in order of precedence."""
        mine = await self.user_entries(user_id) if user_id is not None else {}
        return Rules((Layer(mine), Layer(await self.entries(guild_id), await self.patterns(guild_id)),
                      Layer(self.global_words, self.global_patterns)))

    # -- the server's words -------------------------------------------------------------------------
    async def entries(self, guild_id: int) -> dict[str, str]:
        cached = self._cache.get(guild_id)
        if cached is None:
            cached = await repo.entries(self.db, repo.SERVER_WORDS, guild_id)
            self._cache[guild_id] = cached
        return cached

    async def add(self, guild_id: int, word: str, say_as: str) -> tuple[str, str]:
        key, spoken = check_entry(word, say_as)
        await self._put(repo.SERVER_WORDS, self._cache, guild_id, key, spoken, MAX_ENTRIES,
                        f"This server's dictionary has {MAX_ENTRIES} words, the most allowed; remove one first.")
        return key, spoken

    async def remove(self, guild_id: int, word: str) -> bool:
        return await self._remove(repo.SERVER_WORDS, self._cache, guild_id, word_key(word))

    async def replace(self, guild_id: int, data: bytes) -> int:
        new = parse_import(data)
        await repo.replace_all(self.db, repo.SERVER_WORDS, guild_id, new)
        self._cache.pop(guild_id, None)
        return len(new)

    # -- a user's own words ---------------------------------------------------------------------------
    async def user_entries(self, user_id: int) -> dict[str, str]:
        cached = self._users.get(user_id)
        if cached is None or time.monotonic() - cached[0] >= USER_TTL_S:
            if len(self._users) > 50_000:
                self._users.clear()
            cached = (time.monotonic(), await repo.entries(self.db, repo.USER_WORDS, user_id))
            self._users[user_id] = cached
        return cached[1]

    async def add_mine(self, user_id: int, word: str, say_as: str) -> tuple[str, str]:
        key, spoken = check_entry(word, say_as)
        await self._put(repo.USER_WORDS, self._users, user_id, key, spoken, MAX_USER_ENTRIES,
                        f"You have {MAX_USER_ENTRIES} words, the most allowed; remove one first.")
        return key, spoken

    async def remove_mine(self, user_id: int, word: str) -> bool:
        return await self._remove(repo.USER_WORDS, self._users, user_id, word_key(word))

    # -- the server's patterns ------------------------------------------------------------------------
    async def patterns(self, guild_id: int) -> tuple[Pattern, ...]:
        cached = self._patterns.get(guild_id)
        if cached is None:
            stored = await repo.entries(self.db, repo.SERVER_PATTERNS, guild_id)
            cached = self._patterns[guild_id] = tuple(_stored(stored))
        return cached

    async def add_pattern(self, guild_id: int, source: str, say_as: str) -> Pattern:
        pattern = compile_pattern(source, check_say_as(say_as))
        await self._put(repo.SERVER_PATTERNS, self._patterns, guild_id, pattern.source, pattern.say_as, MAX_PATTERNS,
                        f"This server has {MAX_PATTERNS} patterns, the most allowed; remove one first.")
        return pattern

    async def remove_pattern(self, guild_id: int, source: str) -> bool:
        return await self._remove(repo.SERVER_PATTERNS, self._patterns, guild_id, source)

    # -- storing ----------------------------------------------------------------------------------------
    async def _put(self, table: repo.Table, cache: dict[int, Any], owner_id: int, key: str, say_as: str,
                   most: int, full: str) -> None:
        """Store one checked entry and forget the owner's cached ones; UserError `full` at `most` entries."""
        if not await repo.put(self.db, table, owner_id, key, say_as, max_entries=most):
            raise UserError(full)
        cache.pop(owner_id, None)

    async def _remove(self, table: repo.Table, cache: dict[int, Any], owner_id: int, key: str) -> bool:
        removed = await repo.remove(self.db, table, owner_id, key)
        cache.pop(owner_id, None)
        return removed


def _stored(stored: dict[str, str]):
    """The stored patterns compiled; one a newer check refuses is left out (and logged), not a failure."""
    for source, say_as in stored.items():
        try:
            yield compile_pattern(source, say_as)
        except UserError as exc:
            log.warning("stored dictionary pattern %r left out: %s", source, exc)
