"""Presence: the guild voice states SpeechService follows: whether listeners expect E2EE (told to the guild's
connection), and leaving a channel the bot is alone in."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

import discord

from bot.speech.connection.voice_connection import VoiceConnection

log = logging.getLogger(__name__)
ALONE_GRACE_S = 2.0


class Presence:
    """Listens to every voice state update of the client; the rest is SpeechService's (the callables)."""

    def __init__(self, client: discord.Client, *, leave_when_alone: bool,
                 connection: Callable[[int], VoiceConnection | None],
                 leave: Callable[[int], Awaitable[bool]]) -> None:
        self.leave_when_alone = leave_when_alone
        self._connection = connection  # the guild's, if it has one
        self._leave = leave
        self._alone_checks: dict[int, asyncio.TimerHandle] = {}
        client.add_listener(self._on_voice_state_update, "on_voice_state_update")

    async def _on_voice_state_update(self, member: discord.Member, before: discord.VoiceState,
                                     after: discord.VoiceState) -> None:
        """Anyone's voice state (the bot's own reaches its VoiceConnection from discord.py): who else is in the call
        decides whether E2EE is expected, and whether the bot is alone."""
        guild_id = member.guild.id
        conn = self._connection(guild_id)
        if conn is None:
            return
        conn.members_changed()
        if self.leave_when_alone:
            self._schedule_alone_check(guild_id)

    def _schedule_alone_check(self, guild_id: int) -> None:
        old = self._alone_checks.pop(guild_id, None)
        if old is not None:
            old.cancel()
        loop = asyncio.get_running_loop()
        self._alone_checks[guild_id] = loop.call_later(
            ALONE_GRACE_S, lambda: loop.create_task(self._leave_if_alone(guild_id))
        )

    async def _leave_if_alone(self, guild_id: int) -> None:
        self._alone_checks.pop(guild_id, None)
        conn = self._connection(guild_id)
        channel = conn.channel if conn is not None else None
        if channel is None:
            return
        if not any(not m.bot for m in channel.members):
            log.info("guild %s: alone in %s, leaving", guild_id, channel.id)
            await self._leave(guild_id)

    def close(self) -> None:
        for handle in self._alone_checks.values():
            handle.cancel()
        self._alone_checks.clear()
