"""Thin handlers: /readout commands, the message and voice state listeners; decisions are in bot.readout and
bot.announcements."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import discord
from discord import app_commands
from discord.ext import commands

from bot import checks
from bot.announcements import Announcer
from bot.errors import UserError, reply
from bot.readout import ReadoutService

if TYPE_CHECKING:
    from bot.app import VoiceBot

log = logging.getLogger(__name__)
ReadoutChannel = discord.TextChannel | discord.VoiceChannel | discord.StageChannel | discord.Thread


class ReadoutCog(commands.Cog):
    def __init__(self, bot: VoiceBot) -> None:
        self.bot = bot
        self.service = ReadoutService(bot, bot.speech, bot.prefs, bot.config)
        bot.readout = self.service
        self.announcer = Announcer(bot, bot.speech, bot.prefs, bot.config, bot.languages)
        bot.speech.listeners.extend([self.service.on_utterance, self.announcer.on_utterance])

    async def cog_unload(self) -> None:
        for listener in (self.service.on_utterance, self.announcer.on_utterance):
            if listener in self.bot.speech.listeners:
                self.bot.speech.listeners.remove(listener)
        self.announcer.close()
        await self.service.catch_up.close()
        if getattr(self.bot, "readout", None) is self.service:
            self.bot.readout = None

    group = app_commands.Group(name="readout", description="Read a channel aloud", guild_only=True)

    @group.command(name="channel", description="Add, remove or set a channel that is read aloud")
    @app_commands.describe(channel="a text channel, or a voice channel's chat", action="add (default), remove or set")
    @app_commands.choices(action=[app_commands.Choice(name=n, value=n) for n in ("add", "remove", "set")])
    @app_commands.check(checks.manage_guild)
    async def channel(self, interaction: discord.Interaction, channel: ReadoutChannel, action: str = "add") -> None:
        gp = await self.bot.prefs.guild(interaction.guild_id)
        ids = list(gp.readout_channel_ids)
        if action == "set":
            ids = [channel.id]
        elif action == "remove":
            if channel.id not in ids:
                raise UserError(f"{channel.mention} is not read aloud.")
            ids.remove(channel.id)
        elif channel.id not in ids:
            if len(ids) >= 20:
                raise UserError("At most 20 channels can be read aloud; remove one first.")
            ids.append(channel.id)
        await self.bot.prefs.update_guild(interaction.guild_id, readout_channel_ids=ids)
        listing = ", ".join(f"<#{i}>" for i in ids) or "none"
        await reply(interaction, f"Channels read aloud: {listing}")

    @group.command(name="off", description="Stop reading any channel aloud")
    @app_commands.check(checks.manage_guild)
    async def off(self, interaction: discord.Interaction) -> None:
        await self.bot.prefs.update_guild(interaction.guild_id, readout_channel_ids=[])
        await reply(interaction, "Readout is off: no channel is read aloud.")

    @commands.Cog.listener()
    async def on_message(self, message: discord.Message) -> None:
        try:
            await self.service.handle(message)
        except Exception:
            log.exception("readout of message %s in guild %s failed", message.id,
                          message.guild.id if message.guild else None)

    @commands.Cog.listener()
    async def on_voice_state_update(self, member: discord.Member, before: discord.VoiceState,
                                    after: discord.VoiceState) -> None:
        try:
            await self.announcer.voice_state(member, before, after)
        except Exception:
            log.exception("announcing a voice state in guild %s failed", member.guild.id)

    @commands.Cog.listener()
    async def on_raw_message_delete(self, payload: discord.RawMessageDeleteEvent) -> None:
        self.service.message_deleted(payload.guild_id, payload.message_id)
