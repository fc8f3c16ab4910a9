"""`/plugins list` and `/plugins reload NAME [sync]`: owner-only management of loaded plugins."""

from __future__ import annotations

from typing import TYPE_CHECKING

import discord
from discord import app_commands
from discord.ext import commands

from bot.errors import UserError

if TYPE_CHECKING:
    from bot.app import VoiceBot


async def _owner_only(interaction: discord.Interaction) -> bool:
    if not await interaction.client.is_owner(interaction.user):
        raise UserError("Only the bot's owner can manage plugins.")
    return True


class PluginsCog(commands.Cog):
    def __init__(self, bot: VoiceBot) -> None:
        self.bot = bot

    group = app_commands.Group(name="plugins", description="Manage the bot's plugins (owner only)")

    @group.command(name="list", description="Show which plugins are loaded")
    @app_commands.check(_owner_only)
    async def list_(self, interaction: discord.Interaction) -> None:
        lines = []
        for st in self.bot.plugins.status():
            mark = "loaded" if st.loaded else "not loaded"
            lines.append(f"`{st.name}`: {mark}" + (f" ({st.error})" if st.error else ""))
        await interaction.response.send_message("\n".join(lines) or "No plugins found.", ephemeral=True)

    @group.command(name="reload", description="Reload (or load) a plugin")
    @app_commands.describe(name="plugin folder name", sync="also sync slash commands afterwards")
    @app_commands.check(_owner_only)
    async def reload(self, interaction: discord.Interaction, name: str, sync: bool = False) -> None:
        await interaction.response.defer(ephemeral=True, thinking=True)
        try:
            ok = await self.bot.plugins.reload(name)
        except LookupError as exc:
            raise UserError(str(exc)) from None
        if not ok:
            reason = self.bot.plugins.errors.get(name, "see the log")
            await interaction.followup.send(f"`{name}` failed to reload: {reason}", ephemeral=True)
            return
        if sync:
            await self.bot.sync_commands()
        await interaction.followup.send(f"`{name}` reloaded" + (" and commands synced." if sync else "."),
                                        ephemeral=True)

    @group.command(name="unload", description="Unload a plugin")
    @app_commands.check(_owner_only)
    async def unload(self, interaction: discord.Interaction, name: str) -> None:
        if name == "admin":
            raise UserError("The admin plugin cannot be unloaded (it holds this command); reload it instead.")
        ok = await self.bot.plugins.unload(name)
        await interaction.response.send_message(
            f"`{name}` unloaded." if ok else f"`{name}` was not loaded.", ephemeral=True
        )

    @reload.autocomplete("name")
    @unload.autocomplete("name")
    async def _names(self, interaction: discord.Interaction, current: str) -> list[app_commands.Choice[str]]:
        return [app_commands.Choice(name=n,
                                    value=n) for n in self.bot.plugins.available() if n.startswith(current)][:25]
