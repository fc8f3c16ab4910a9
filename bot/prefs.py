"""The preferences service plugins call (bot.prefs): user, member and guild preferences with a small cache."""

from __future__ import annotations

import time
from typing import Any

from bot.storage import settings_repo as repo
from bot.storage.database import Database
from bot.storage.settings_repo import GuildPrefs, MemberPrefs, UserPrefs

USER_TTL_S = 30.0  # user settings may change on another shard's process


class PrefsService:
    def __init__(self, db: Database) -> None:
        self.db = db
        self._guilds: dict[int, GuildPrefs] = {}
        self._users: dict[int, tuple[float, UserPrefs]] = {}
        self._members: dict[tuple[int, int], MemberPrefs] = {}  # guild state: lives on this shard

    async def guild(self, guild_id: int) -> GuildPrefs:
        prefs = self._guilds.get(guild_id)
        if prefs is None:
            prefs = await repo.get_guild_prefs(self.db, guild_id)
            self._guilds[guild_id] = prefs
        return prefs

    async def update_guild(self, guild_id: int, **changes: Any) -> GuildPrefs:
        prefs = await repo.update_guild_prefs(self.db, guild_id, **changes)
        self._guilds[guild_id] = prefs
        return prefs

    async def user(self, user_id: int) -> UserPrefs:
        cached = self._users.get(user_id)
        if cached and time.monotonic() - cached[0] < USER_TTL_S:
            return cached[1]
        prefs = await repo.get_user_prefs(self.db, user_id)
        self._users[user_id] = (time.monotonic(), prefs)
        return prefs

    async def update_user(self, user_id: int, **changes: Any) -> UserPrefs:
        prefs = await repo.update_user_prefs(self.db, user_id, **changes)
        self._users[user_id] = (time.monotonic(), prefs)
        return prefs

    def forget_user(self, user_id: int) -> None:
        self._users.pop(user_id, None)

    async def member(self, guild_id: int, user_id: int) -> MemberPrefs:
        """Read for every readout message, so kept in memory after the first query."""
        key = (guild_id, user_id)
        if key not in self._members:
            if len(self._members) > 50_000:
                self._members.clear()
            self._members[key] = await repo.get_member(self.db, guild_id, user_id)
        return self._members[key]

    async def update_member(self, guild_id: int, user_id: int, **changes: str | None) -> MemberPrefs:
        prefs = self._members[(guild_id, user_id)] = await repo.update_member(self.db, guild_id, user_id, **changes)
        return prefs

    async def nickname(self, guild_id: int, user_id: int) -> str | None:
        return (await self.member(guild_id, user_id)).nickname

    async def set_nickname(self, guild_id: int, user_id: int, nickname: str | None) -> None:
        await self.update_member(guild_id, user_id, nickname=nickname)

    async def spoken_name(self, guild_id: int, user_id: int) -> str | None:
        """How this user's name is said here when they chose: their /nickname in this guild, else how they
        said their name sounds (/voice name); None: their display name, as written."""
        return await self.nickname(guild_id, user_id) or (await self.user(user_id)).name_say_as

    async def spoken_names(self, guild_id: int, user_ids: list[int]) -> dict[int, str]:
        """spoken_name of each user who chose one (the ids are bounded by the caller)."""
        names = {uid: await self.spoken_name(guild_id, uid) for uid in user_ids}
        return {uid: name for uid, name in names.items() if name}
