"""Storage of the pronunciation dictionaries: a guild's words, a user's own words, a guild's patterns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, func, select

from bot.storage.database import Database, rowcount
from bot.storage.models import DictionaryEntryRow, DictionaryPatternRow, UserDictionaryEntryRow


@dataclass(frozen=True)
class Table:
    """One kind of entry: its model, the column of whose it is (a guild, a user), and the column of its key."""

    model: Any
    owner: str
    key: str

    def of(self, owner_id: int) -> Any:
        return getattr(self.model, self.owner) == owner_id

    def row(self, owner_id: int, key: str, say_as: str) -> Any:
        return self.model(**{self.owner: owner_id, self.key: key, "say_as": say_as})


SERVER_WORDS = Table(DictionaryEntryRow, "guild_id", "word")
USER_WORDS = Table(UserDictionaryEntryRow, "user_id", "word")
SERVER_PATTERNS = Table(DictionaryPatternRow, "guild_id", "pattern")


async def entries(db: Database, table: Table, owner_id: int) -> dict[str, str]:
    """The owner's entries, key -> say_as, in key order."""
    async with db.sessions() as session:
        rows = await session.scalars(select(table.model).where(table.of(owner_id))
                                     .order_by(getattr(table.model, table.key)))
        return {getattr(r, table.key): r.say_as for r in rows}


async def put(db: Database, table: Table, owner_id: int, key: str, say_as: str, *, max_entries: int) -> bool:
    """Add or change one entry; False (nothing stored) when the owner is at `max_entries` and `key` is new."""
    async with db.sessions() as session, session.begin():
        row = await session.get(table.model, (owner_id, key))
        if row is not None:
            row.say_as = say_as
            return True
        count = await session.scalar(select(func.count()).select_from(table.model).where(table.of(owner_id)))
        if (count or 0) >= max_entries:
            return False
        session.add(table.row(owner_id, key, say_as))
        return True


async def remove(db: Database, table: Table, owner_id: int, key: str) -> bool:
    async with db.sessions() as session, session.begin():
        result = await session.execute(
            delete(table.model).where(table.of(owner_id), getattr(table.model, table.key) == key))
        return bool(rowcount(result))


async def replace_all(db: Database, table: Table, owner_id: int, new: dict[str, str]) -> None:
    """The owner's entries become `new`, in one transaction (an import is all or nothing)."""
    async with db.sessions() as session, session.begin():
        await session.execute(delete(table.model).where(table.of(owner_id)))
        session.add_all(table.row(owner_id, k, s) for k, s in new.items())
