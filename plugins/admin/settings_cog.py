"""/settings (Manage Server) for the guild; /optout, /optin and /nickname for each user."""

from __future__ import annotations

from typing import TYPE_CHECKING

import discord
from discord import app_commands
from discord.ext import commands

from bot import checks, guild_options, readout
from bot.errors import UserError, reply, reply_lines
from bot.member_notice import tell_member
from bot.storage.settings_repo import NICKNAME_MAX_CHARS

if TYPE_CHECKING:
    from bot.app import VoiceBot


class SettingsCog(commands.Cog):
    def __init__(self, bot: VoiceBot) -> None:
        self.bot = bot

    group = app_commands.Group(name="settings", description="This server's speech settings", guild_only=True)

    @group.command(name="show", description="Show this server's settings")
    async def show(self, interaction: discord.Interaction) -> None:
        prefs = await self.bot.prefs.guild(interaction.guild_id)
        await reply_lines(interaction, guild_options.describe(prefs, self.bot.config),
                          allowed_mentions=discord.AllowedMentions.none())

    @group.command(name="set", description="Change a setting (Manage Server)")
    @app_commands.describe(setting="which setting", value="on/off, a number, a language, a voice, or a prefix")
    @app_commands.choices(setting=[
        app_commands.Choice(name=f"{n}: {o.help}"[:100], value=n) for n, o in guild_options.OPTIONS.items()
    ])
    @app_commands.check(checks.manage_guild)
    async def set_(self, interaction: discord.Interaction, setting: str, value: str) -> None:
        current = await self.bot.prefs.guild(interaction.guild_id)
        readers = {"language": self.bot.languages.parse_guild, "voice": self.bot.stock.reader(current.voices),
                   "role_voice": await self.bot.voices.role_reader(interaction.guild, current.role_voices),
                   **readout.prefix_readers(self.bot.config, current)}
        try:
            field, parsed, answer = guild_options.parse(setting, value, self.bot.config, readers)
        except guild_options.OptionError as exc:
            raise UserError(str(exc)) from None
        await self.bot.prefs.update_guild(interaction.guild_id, **{field: parsed})
        await reply(interaction, answer)

    @set_.autocomplete("value")
    async def _value(self, interaction: discord.Interaction, current: str):
        if interaction.namespace.setting == "voice":
            return self.bot.stock.choices(current)
        if interaction.namespace.setting != "language":
            return []
        return self.bot.languages.autocomplete(current, user=False)

    @group.command(name="role", description="Only read members with this role; leave empty for everyone")
    @app_commands.check(checks.manage_guild)
    async def role(self, interaction: discord.Interaction, role: discord.Role | None = None) -> None:
        await self.bot.prefs.update_guild(interaction.guild_id, required_role_id=role.id if role else None)
        await reply(interaction, f"Only members with {role.mention} are read." if role else "Everyone is read.",
                    allowed_mentions=discord.AllowedMentions.none())

    @app_commands.command(name="optout", description="Never read my messages aloud, in any server")
    async def optout(self, interaction: discord.Interaction) -> None:
        await self.bot.prefs.update_user(interaction.user.id, opted_out=True)
        await reply(interaction, "Your messages will not be read aloud anywhere. Use /optin to undo.")

    @app_commands.command(name="optin", description="Read my messages aloud again")
    async def optin(self, interaction: discord.Interaction) -> None:
        await self.bot.prefs.update_user(interaction.user.id, opted_out=False)
        await reply(interaction, "Your messages will be read aloud again.")

    @app_commands.command(name="nickname", description='Set the name read in "NAME said" (empty: the display name)')
    @app_commands.describe(member="a member to name (Manage Server); empty: yourself",
                           name=f"up to {NICKNAME_MAX_CHARS} characters")
    @app_commands.guild_only()
    async def nickname(self, interaction: discord.Interaction, member: discord.Member | None = None,
                       name: str | None = None) -> None:
        target = member or interaction.user
        if target.id != interaction.user.id:
            checks.manage_guild(interaction)
        clean = " ".join((name or "").split())
        if len(clean) > NICKNAME_MAX_CHARS:
            raise UserError(f"A nickname can have at most {NICKNAME_MAX_CHARS} characters.")
        await self.bot.prefs.set_nickname(interaction.guild_id, target.id, clean or None)
        said = discord.utils.escape_markdown(clean)
        if member is None or target.id == interaction.user.id:
            await reply(interaction, f"I'll call you {said}." if clean else "I'll use your display name.",
                        allowed_mentions=discord.AllowedMentions.none())
            return
        news = f"to {said}" if clean else "back to the display name"
        told = await tell_member(member, f"In {interaction.guild.name} a moderator set the name read for you {news}.",
                                 interaction.channel)
        await reply(interaction, f"The name read for {member.mention} is now {said or 'their display name'}; {told}",
                    allowed_mentions=discord.AllowedMentions.none())
