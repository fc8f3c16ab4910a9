"""Permission checks shared by plugins' slash commands."""

from __future__ import annotations

import discord
from discord import app_commands

from bot.errors import UserError


def manage_guild(interaction: discord.Interaction) -> bool:
    """Guild-only, and the member needs Manage Server."""
    if interaction.guild is None:
        raise app_commands.NoPrivateMessage()
    if not interaction.permissions.manage_guild:
        raise UserError("You need the Manage Server permission to change this server's settings.")
    return True


def in_bot_channel(interaction: discord.Interaction, bot_channel, required: bool) -> None:
    """With the guild's require_voice on, only members in the bot's voice channel make it speak there."""
    if not required or bot_channel is None:
        return
    voice = getattr(interaction.user, "voice", None)
    if voice is None or voice.channel is None or voice.channel.id != bot_channel.id:
        raise UserError(f"Join {bot_channel.mention} to speak there.")
