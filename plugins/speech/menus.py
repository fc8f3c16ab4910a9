"""Thin handlers for the message context-menu commands "Speak this" and "Speak in their voice"."""

from __future__ import annotations

from typing import TYPE_CHECKING

import discord
from discord import app_commands
from discord.ext import commands

from bot.errors import reply
from bot.speech.text.message_menu import message_order

if TYPE_CHECKING:
    from bot.app import VoiceBot


class MessageMenus(commands.Cog):
    def __init__(self, bot: VoiceBot) -> None:
        self.bot = bot
        self.menus = [
            app_commands.ContextMenu(name="Speak this", callback=self.speak_this),
            app_commands.ContextMenu(name="Speak in their voice", callback=self.speak_in_their_voice),
        ]
        for menu in self.menus:
            app_commands.guild_only()(menu)

    async def cog_load(self) -> None:
        for menu in self.menus:
            self.bot.tree.add_command(menu)

    async def cog_unload(self) -> None:
        for menu in self.menus:
            self.bot.tree.remove_command(menu.name, type=menu.type)

    async def speak_this(self, interaction: discord.Interaction, message: discord.Message) -> None:
        await self._speak(interaction, message, their_voice=False)

    async def speak_in_their_voice(self, interaction: discord.Interaction, message: discord.Message) -> None:
        await self._speak(interaction, message, their_voice=True)

    async def _speak(self, interaction: discord.Interaction, message: discord.Message, *, their_voice: bool) -> None:
        await interaction.response.defer(ephemeral=True, thinking=True)  # joining and lookups may take a while

        async def notify(text: str) -> None:
            await reply(interaction, text)

        order = await message_order(self.bot.prefs, interaction, message, their_voice=their_voice, notify=notify)
        utt = await self.bot.speech.say(order)
        position = self.bot.speech.speaker(interaction.guild_id).position(utt)
        await reply(interaction, "Reading it." if position <= 1 else f"Queued: {position - 1} ahead of it.")
