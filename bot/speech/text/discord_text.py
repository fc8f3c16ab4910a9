"""Builds speakable text from Discord content: looks up the names of mentioned users, roles and channels."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable

import discord

from bot.speech.text.text import Mentions, TextOptions, speakable

_USER = re.compile(r"<@!?(\d{1,20})>")
_ROLE = re.compile(r"<@&(\d{1,20})>")
_CHANNEL = re.compile(r"<#(\d{1,20})>")
MAX_LOOKUPS = 50  # a mention flood is not looked up beyond this
MAX_FETCHES = 5  # members not in the cache (no members intent) fetched from Discord for one text
FETCH_TIMEOUT_S = 2.0


def _ids(pattern: re.Pattern[str], content: str) -> list[int]:
    out: list[int] = []
    for match in pattern.finditer(content):
        value = int(match.group(1))
        if value not in out:
            out.append(value)
        if len(out) >= MAX_LOOKUPS:
            break
    return out


ChosenNames = Callable[[list[int]], Awaitable[dict[int, str]]]  # user ids -> the names those users chose


async def speakable_content(content: str, guild: discord.Guild | None, options: TextOptions,
                            names: dict[int, str] | None = None, chosen: ChosenNames | None = None) -> str:
    """`content` in words (bot/speech/text/text.py), its mentions named: users from `names` (those Discord sent along;
    without them the guild's cache and a few members fetched), a user's chosen name (`chosen`) over either; roles
    and channels from the guild's cache; any other is read generically."""
    user_ids = _ids(_USER, content)
    users = dict(names) if names is not None else await _fetch_missing(user_ids, guild)
    if chosen is not None:
        users.update(await chosen(user_ids))
    return speakable(content, _mentions(content, guild, user_ids, users), options)


def _mentions(content: str, guild: discord.Guild | None, user_ids: list[int], users: dict[int, str]) -> Mentions:
    """Names for the mentions in `content`: `users`, then the guild's cache (unknown ones read generically)."""
    roles: dict[int, str] = {}
    channels: dict[int, str] = {}
    if guild is not None:
        for uid in user_ids:
            member = guild.get_member(uid)
            if member is not None and uid not in users:
                users[uid] = member.display_name
        for rid in _ids(_ROLE, content):
            role = guild.get_role(rid)
            if role is not None:
                roles[rid] = role.name
        for cid in _ids(_CHANNEL, content):
            channel = guild.get_channel_or_thread(cid)
            if channel is not None:
                channels[cid] = channel.name
    return Mentions(users=users, roles=roles, channels=channels)


async def _fetch_missing(user_ids: list[int], guild: discord.Guild | None) -> dict[int, str]:
    """Display names of mentioned members missing from the cache (the bot runs without the members intent): a few
    are asked of Discord, bounded in count and time; the rest are read generically."""
    if guild is None:
        return {}
    missing = [uid for uid in user_ids if guild.get_member(uid) is None][:MAX_FETCHES]

    async def one(uid: int) -> tuple[int, str] | None:
        try:
            member = await asyncio.wait_for(guild.fetch_member(uid), FETCH_TIMEOUT_S)
        except (discord.HTTPException, asyncio.TimeoutError):
            return None
        return uid, member.display_name

    found = await asyncio.gather(*(one(uid) for uid in missing))
    return dict(pair for pair in found if pair is not None)
