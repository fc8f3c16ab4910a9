"""Thin handlers for /dictionary; the entries and their rules are in bot.dictionary."""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

import discord
from discord import app_commands
from discord.ext import commands

from bot import checks
from bot.dictionary import MAX_IMPORT_BYTES, export
from bot.errors import reply

if TYPE_CHECKING:
    from bot.app import VoiceBot

PAGE = 20


class DictionaryCog(commands.Cog):
    def __init__(self, bot: VoiceBot) -> None:
        self.bot = bot

    @property
    def dictionary(self):
        return self.bot.dictionary

    group = app_commands.Group(name="dictionary", description="How words are pronounced in this server",
                               guild_only=True)

    @group.command(name="add", description="Say a word differently (Manage Server)")
    @app_commands.describe(word="one word, as written", say_as="what to say instead")
    @app_commands.check(checks.manage_guild)
    async def add(self, interaction: discord.Interaction, word: str, say_as: str) -> None:
        key, spoken = await self.dictionary.add(interaction.guild_id, word, say_as)
        await reply(interaction, f"{discord.utils.escape_markdown(key)} is now said as "
                                 f"{discord.utils.escape_markdown(spoken)}.",
                    allowed_mentions=discord.AllowedMentions.none())

    @group.command(name="remove", description="Remove a word from the dictionary (Manage Server)")
    @app_commands.check(checks.manage_guild)
    async def remove(self, interaction: discord.Interaction, word: str) -> None:
        removed = await self.dictionary.remove(interaction.guild_id, word)
        await reply(interaction, "Removed." if removed else "That word is not in the dictionary.")

    @group.command(name="list", description="Show the dictionary, a page at a time")
    async def list_(self, interaction: discord.Interaction, page: app_commands.Range[int, 1, 100] = 1) -> None:
        items = sorted((await self.dictionary.entries(interaction.guild_id)).items())
        if not items:
            await reply(interaction, "The dictionary is empty. Add words with /dictionary add.")
            return
        pages = (len(items) + PAGE - 1) // PAGE
        page = min(page, pages)
        shown = items[(page - 1) * PAGE: page * PAGE]
        lines = [f"{discord.utils.escape_markdown(w)} → {discord.utils.escape_markdown(s)}" for w, s in shown]
        await reply(interaction, "\n".join([*lines, f"Page {page} of {pages} ({len(items)} words)."]),
                    allowed_mentions=discord.AllowedMentions.none())

    @group.command(name="export", description="The dictionary as a JSON file")
    async def export_(self, interaction: discord.Interaction) -> None:
        data = export(await self.dictionary.entries(interaction.guild_id))
        await interaction.response.send_message(
            "This server's dictionary:", file=discord.File(io.BytesIO(data), "dictionary.json"), ephemeral=True)

    @group.command(name="import", description="Replace the dictionary with an export (Manage Server)")
    @app_commands.describe(file="a dictionary.json from /dictionary export")
    @app_commands.check(checks.manage_guild)
    async def import_(self, interaction: discord.Interaction, file: discord.Attachment) -> None:
        await interaction.response.defer(ephemeral=True, thinking=True)
        data = await self.bot.voices.download(file.url, file.size, cap=MAX_IMPORT_BYTES)
        count = await self.dictionary.replace(interaction.guild_id, data)
        await reply(interaction, f"Imported {count} words; the dictionary was replaced.")
