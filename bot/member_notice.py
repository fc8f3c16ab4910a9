"""Telling a member what a moderator changed for them: by DM, else by a mention in the channel it was done in."""

from __future__ import annotations

import logging

import discord

log = logging.getLogger(__name__)


async def tell_member(member: discord.Member, text: str, channel: object) -> str:
    """Tell `member` `text`; for the moderator, how they were told ("they were told by DM.")."""
    how = await _tell(member, text, channel)
    return f"they were told {how}." if how else "I could not tell them (their DMs are closed and I cannot write here)."


async def _tell(member: discord.Member, text: str, channel: object) -> str:
    try:
        await member.send(text, allowed_mentions=discord.AllowedMentions.none())
        return "by DM"
    except discord.HTTPException as exc:
        log.info("guild %s: no DM to %s: %s", member.guild.id, member.id, exc)
    if isinstance(channel, discord.abc.Messageable):
        try:
            await channel.send(f"{member.mention}: {text}", allowed_mentions=discord.AllowedMentions(users=[member]))
            return "with a mention here"
        except discord.HTTPException as exc:
            log.info("guild %s: could not mention %s: %s", member.guild.id, member.id, exc)
    return ""
