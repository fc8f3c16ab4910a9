"""Thin handlers for /dictionary; the entries and their rules are in bot.dictionary."""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

import discord
from discord import app_commands
from discord.ext import commands

from bot import checks
from bot.dictionary import MAX_IMPORT_BYTES, export
from bot.errors import reply, reply_lines
from bot.speech.text.say import SayOrder

if TYPE_CHECKING:
    from bot.app import VoiceBot

PAGE = 20
NONE = discord.AllowedMentions.none()


def _said(key: str, spoken: str) -> str:
    return f"{discord.utils.escape_markdown(key)} → {discord.utils.escape_markdown(spoken)}"


class DictionaryCog(commands.Cog):
    def __init__(self, bot: VoiceBot) -> None:
        self.bot = bot

    @property
    def dictionary(self):
        return self.bot.dictionary

    group = app_commands.Group(name="dictionary", description="How words are pronounced in this server",
                               guild_only=True)
    mine = app_commands.Group(name="mine", description="How words are pronounced in your messages, in every server",
                              parent=group)
    pattern = app_commands.Group(name="pattern", description="Patterns (regular expressions) said differently",
                                 parent=group)

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
        lines = [_said(w, s) for w, s in shown]
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

    @group.command(name="test", description="What would be said for this text (yours, the server's and the bot's "
                                            "pronunciations)")
    async def test(self, interaction: discord.Interaction, text: str) -> None:
        order = SayOrder(guild=interaction.guild, author=interaction.user, text=text,
                         channel_id=interaction.channel_id)
        said = await self.bot.speech.text_of(order)
        await reply(interaction, f"Would be said: {discord.utils.escape_markdown(said)}", allowed_mentions=NONE)

    @mine.command(name="add", description="Say a word differently in your messages, in every server")
    @app_commands.describe(word="one word, as written", say_as="what to say instead")
    async def mine_add(self, interaction: discord.Interaction, word: str, say_as: str) -> None:
        key, spoken = await self.dictionary.add_mine(interaction.user.id, word, say_as)
        await reply(interaction, f"In your messages {_said(key, spoken)}; it wins over the server's entries.",
                    allowed_mentions=NONE)

    @mine.command(name="remove", description="Remove one of your words")
    async def mine_remove(self, interaction: discord.Interaction, word: str) -> None:
        removed = await self.dictionary.remove_mine(interaction.user.id, word)
        await reply(interaction, "Removed." if removed else "That word is not among yours.")

    @mine.command(name="list", description="Your words")
    async def mine_list(self, interaction: discord.Interaction) -> None:
        items = (await self.dictionary.user_entries(interaction.user.id)).items()
        await reply_lines(interaction, [_said(w, s) for w, s in items] or
                          ["You have no words of your own. Add one with /dictionary mine add."], allowed_mentions=NONE)

    @pattern.command(name="add", description="Say what a pattern matches differently (Manage Server)")
    @app_commands.describe(pattern="a regular expression, e.g. \\d+ ?kg (no nested repeats, backreferences or "
                                   "lookarounds)", say_as="what to say instead")
    @app_commands.check(checks.manage_guild)
    async def pattern_add(self, interaction: discord.Interaction, pattern: str, say_as: str) -> None:
        added = await self.dictionary.add_pattern(interaction.guild_id, pattern, say_as)
        await reply(interaction, f"Text matching `{added.source}` is now said as "
                                 f"{discord.utils.escape_markdown(added.say_as)}.", allowed_mentions=NONE)

    @pattern.command(name="remove", description="Remove a pattern (Manage Server)")
    @app_commands.check(checks.manage_guild)
    async def pattern_remove(self, interaction: discord.Interaction, pattern: str) -> None:
        removed = await self.dictionary.remove_pattern(interaction.guild_id, pattern)
        await reply(interaction, "Removed." if removed else "That pattern is not in the dictionary.")

    @pattern.command(name="list", description="This server's patterns, in the order they apply")
    async def pattern_list(self, interaction: discord.Interaction) -> None:
        patterns = await self.dictionary.patterns(interaction.guild_id)
        await reply_lines(interaction, [f"`{p.source}` → {discord.utils.escape_markdown(p.say_as)}" for p in patterns]
                          or ["This server has no patterns. Add one with /dictionary pattern add."],
                          allowed_mentions=NONE)
