"""Storage of the guilds' pronunciation dictionaries."""

from __future__ import annotations

from sqlalchemy import delete, func, select

from bot.storage.database import Database, rowcount
from bot.storage.models import DictionaryEntryRow


async def entries(db: Database, guild_id: int) -> dict[str, str]:
    async with db.sessions() as session:
        rows = await session.scalars(select(DictionaryEntryRow).where(DictionaryEntryRow.guild_id == guild_id))
        return {r.word: r.say_as for r in rows}


async def put(db: Database, guild_id: int, word: str, say_as: str, *, max_entries: int) -> bool:
    """Add or change one entry; False (nothing stored) when the guild is at `max_entries` and `word` is new."""
    async with db.sessions() as session, session.begin():
        row = await session.get(DictionaryEntryRow, (guild_id, word))
        if row is not None:
            row.say_as = say_as
            return True
        count = await session.scalar(
            select(func.count()).select_from(DictionaryEntryRow).where(DictionaryEntryRow.guild_id == guild_id))
        if (count or 0) >= max_entries:
            return False
        session.add(DictionaryEntryRow(guild_id=guild_id, word=word, say_as=say_as))
        return True


async def remove(db: Database, guild_id: int, word: str) -> bool:
    async with db.sessions() as session, session.begin():
        result = await session.execute(
            delete(DictionaryEntryRow).where(DictionaryEntryRow.guild_id == guild_id, DictionaryEntryRow.word == word))
        return bool(rowcount(result))


async def replace_all(db: Database, guild_id: int, new: dict[str, str]) -> None:
    """The guild's dictionary becomes `new`, in one transaction (an import is all or nothing)."""
    async with db.sessions() as session, session.begin():
        await session.execute(delete(DictionaryEntryRow).where(DictionaryEntryRow.guild_id == guild_id))
        session.add_all(DictionaryEntryRow(guild_id=guild_id, word=w, say_as=s) for w, s in new.items())
