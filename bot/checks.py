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
