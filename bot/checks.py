"""Permission checks shared by plugins' slash commands."""

from __future__ import annotations

import discord
from discord import app_commands

from bot.errors import UserError
from bot.speech.text.say import VocalChannel
from bot.speech.text.say import author_channel as speaker_channel


def manage_guild(interaction: discord.Interaction) -> bool:
    """Guild-only, and the member needs Manage Server."""
    if interaction.guild is None:
        raise app_commands.NoPrivateMessage()
    if not interaction.permissions.manage_guild:
        raise UserError("You need the Manage Server permission to change this server's settings.")
    return True


def author_channel(interaction: discord.Interaction) -> VocalChannel | None:
    """The voice channel the invoking member is in, or None."""
    return speaker_channel(interaction.user)


def _in(interaction: discord.Interaction, bot_channel: VocalChannel | None) -> bool:
    mine = author_channel(interaction)
    return bot_channel is not None and mine is not None and mine.id == bot_channel.id


def may_control(interaction: discord.Interaction, bot_channel: VocalChannel | None) -> bool:
    """Who may skip, stop, or move the bot: members in its channel, or with Manage Server / Move Members."""
    perms = interaction.permissions
    return perms.manage_guild or perms.move_members or _in(interaction, bot_channel)


def has_listeners(channel: VocalChannel | None) -> bool:
    """Whether people (not bots) are in the bot's voice channel: moving the bot away would cut them off."""
    return any(not m.bot for m in getattr(channel, "members", []))
