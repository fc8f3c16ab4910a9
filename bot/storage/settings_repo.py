"""Repository functions for user, member and guild settings; values come back as frozen dataclasses."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, TypeAlias

from bot import guild_options, user_options
from bot.storage.database import Database
from bot.storage.models import GuildSettingsRow, MemberSettingsRow, UserSettingsRow

NICKNAME_MAX_CHARS = 32  # a member's nickname for "NAME said"; the column holds 64


def _prefs_class(name: str, key: str, fields: list[tuple], doc: str) -> type:
    cls = dataclasses.make_dataclass(name, [(key, int), *fields], frozen=True)
    cls.__module__, cls.__doc__ = __name__, doc
    return cls


if TYPE_CHECKING:  # their fields are declared once, in the option tables: a type checker sees them as Any
    UserPrefs: TypeAlias = Any
    GuildPrefs: TypeAlias = Any
else:
    UserPrefs = _prefs_class("UserPrefs", "user_id", [(o.field, o.kind, o.default) for o in user_options.USER_OPTIONS],
                             "A user's settings, in every guild: one field per bot.user_options.USER_OPTIONS entry.")
    GuildPrefs = _prefs_class("GuildPrefs", "guild_id", guild_options.prefs_fields(),
                              "A guild's settings: one field per bot.guild_options.GUILD_OPTIONS entry.")


def _snapshot(cls: type, row: Any) -> Any:
    return cls(**{f.name: getattr(row, f.name) for f in dataclasses.fields(cls)})


async def _upsert(db: Database, model: type, cls: type, key: dict[str, Any], changes: dict[str, Any]) -> Any:
    """Apply `changes` to the row with primary key `key`, creating it with defaults first if missing."""
    unknown = set(changes) - {f.name for f in dataclasses.fields(cls)} | (set(changes) & set(key))
    if unknown:
        raise ValueError(f"unknown setting(s): {', '.join(sorted(unknown))}")
    async with db.sessions() as session, session.begin():
        row: Any = await session.get(model, tuple(key.values()) if len(key) > 1 else next(iter(key.values())))
        if row is None:
            defaults = {f.name: getattr(cls(**key), f.name) for f in dataclasses.fields(cls)}
            row = model(**defaults)
            session.add(row)
        for name, value in changes.items():
            setattr(row, name, list(value) if isinstance(value, (list, tuple)) else value)
        await session.flush()
        return _snapshot(cls, row)


async def _get(db: Database, model: type, cls: type, key: int) -> Any:
    """The stored row as `cls`, or `cls`'s defaults when there is none."""
    async with db.sessions() as session:
        row: Any = await session.get(model, key)
        return _snapshot(cls, row) if row else cls(key)


async def get_user_prefs(db: Database, user_id: int) -> UserPrefs:
    return await _get(db, UserSettingsRow, UserPrefs, user_id)


async def update_user_prefs(db: Database, user_id: int, **changes: Any) -> UserPrefs:
    return await _upsert(db, UserSettingsRow, UserPrefs, {"user_id": user_id}, changes)


async def get_guild_prefs(db: Database, guild_id: int) -> GuildPrefs:
    return await _get(db, GuildSettingsRow, GuildPrefs, guild_id)


async def update_guild_prefs(db: Database, guild_id: int, **changes: Any) -> GuildPrefs:
    return await _upsert(db, GuildSettingsRow, GuildPrefs, {"guild_id": guild_id}, changes)


@dataclasses.dataclass(frozen=True)
class MemberPrefs:
    """A user's settings in one guild: the name read for them, the voice a moderator set them (None: none)."""

    guild_id: int
    user_id: int
    nickname: str | None = None
    voice: str | None = None


async def get_member(db: Database, guild_id: int, user_id: int) -> MemberPrefs:
    async with db.sessions() as session:
        row = await session.get(MemberSettingsRow, (guild_id, user_id))
        return _snapshot(MemberPrefs, row) if row else MemberPrefs(guild_id, user_id)


async def update_member(db: Database, guild_id: int, user_id: int, **changes: str | None) -> MemberPrefs:
    return await _upsert(db, MemberSettingsRow, MemberPrefs, {"guild_id": guild_id, "user_id": user_id}, changes)
