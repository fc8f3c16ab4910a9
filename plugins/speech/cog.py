"""Thin slash-command handlers for speaking in voice channels; the work is in bot.speech."""

from __future__ import annotations

from typing import TYPE_CHECKING

import discord
from discord import app_commands
from discord.ext import commands

from bot import checks
from bot.errors import UserError, reply
from bot.speech.audio_file import attachment
from bot.speech.text.say import SayOrder

if TYPE_CHECKING:
    from bot.app import VoiceBot

Channel = discord.VoiceChannel | discord.StageChannel


class SpeechCog(commands.Cog):
    def __init__(self, bot: VoiceBot) -> None:
        self.bot = bot

    @property
    def speech(self):
        return self.bot.speech

    @app_commands.command(name="join", description="Join your voice channel (or the one you name)")
    @app_commands.describe(channel="a voice channel; default: the one you are in")
    @app_commands.guild_only()
    async def join(self, interaction: discord.Interaction, channel: Channel | None = None) -> None:
        target = channel or checks.author_channel(interaction)
        if target is None:
            raise UserError("Join a voice channel first, or name one: /join channel:#voice")
        if channel is not None and not channel.permissions_for(interaction.user).connect:
            raise UserError(f"You don't have permission to connect to {channel.mention}.")
        current = self.speech.voice_channel(interaction.guild_id)
        if (current is not None and current.id != target.id and checks.has_listeners(current)
                and not checks.may_control(interaction, current)):
            raise UserError(f"I'm in use in {current.mention}; join it, or ask someone with Move Members.")
        await interaction.response.defer(ephemeral=True, thinking=True)
        connection = await self.speech.join(target)
        code = await connection.wait_privacy_code(5.0)  # E2EE: an admin can compare it with their Discord client's
        note = f" Voice privacy code: {code}" if code else ""
        await interaction.followup.send(f"Joined {target.mention}.{note}", ephemeral=True)

    @app_commands.command(name="leave", description="Leave the voice channel")
    @app_commands.guild_only()
    async def leave(self, interaction: discord.Interaction) -> None:
        channel = self.speech.voice_channel(interaction.guild_id)
        if channel is None:
            raise UserError("I'm not in a voice channel here.")
        if not checks.may_control(interaction, channel):
            raise UserError(f"Join {channel.mention} to make me leave it.")
        await interaction.response.defer(ephemeral=True)
        await self.speech.leave(interaction.guild_id)
        await interaction.followup.send("Left the voice channel.", ephemeral=True)

    @app_commands.command(name="say", description="Say something in the voice channel")
    @app_commands.describe(text="what to say", voice="one of your voices, or one shared with you")
    @app_commands.guild_only()
    async def say(self, interaction: discord.Interaction, text: str, voice: str | None = None) -> None:
        await interaction.response.defer(ephemeral=True, thinking=True)  # joining and lookups may take a while

        async def notify(message: str) -> None:
            await reply(interaction, message)

        order = SayOrder(guild=interaction.guild, author=interaction.user, text=text, kind="say", voice_name=voice,
                         channel_id=interaction.channel_id, notify=notify)
        utt = await self.speech.say(order)
        await reply(interaction, self.speech.queued_text(interaction.guild_id, utt))

    @app_commands.command(name="tts", description="Get text spoken as an audio file (no voice channel needed)")
    @app_commands.describe(text="what to say", voice="one of your voices, or one shared with you")
    @app_commands.guild_only()
    async def tts(self, interaction: discord.Interaction, text: str, voice: str | None = None) -> None:
        await interaction.response.defer(ephemeral=True, thinking=True)  # synthesis takes longer than 3 s
        data = await self.speech.render(SayOrder(
            guild=interaction.guild, author=interaction.user, text=text, kind="tts", voice_name=voice,
            channel_id=interaction.channel_id,
        ))
        await interaction.followup.send("Here it is.", file=attachment(data), ephemeral=True)

    @app_commands.command(name="skip", description="Skip what is being said now")
    @app_commands.guild_only()
    async def skip(self, interaction: discord.Interaction) -> None:
        if not checks.may_control(interaction, self.speech.voice_channel(interaction.guild_id)):
            raise UserError("Join my voice channel to skip.")
        skipped = self.speech.skip(interaction.guild_id)
        await reply(interaction, "Skipped." if skipped else "Nothing is being said right now.")

    @app_commands.command(name="stop", description="Stop speaking and clear the queue")
    @app_commands.guild_only()
    async def stop(self, interaction: discord.Interaction) -> None:
        if not checks.may_control(interaction, self.speech.voice_channel(interaction.guild_id)):
            raise UserError("Join my voice channel to stop me.")
        playing = self.speech.queue(interaction.guild_id)[0] is not None
        removed = self.speech.stop(interaction.guild_id)
        said = "Stopped what was being said" if playing else "Stopped"
        await reply(interaction, f"{said}; {removed} waiting message(s) cleared.")

    @app_commands.command(name="queue", description="Show what is waiting to be said")
    @app_commands.guild_only()
    async def queue(self, interaction: discord.Interaction) -> None:
        current, pending = self.speech.queue(interaction.guild_id)
        if current is None and not pending:
            await reply(interaction, "Nothing is waiting.")
            return
        lines = []
        if current is not None:
            lines.append(f"Now: {discord.utils.escape_markdown(current.request.label or current.request.text[:80])}")
        for i, utt in enumerate(pending[:10], 1):
            lines.append(f"{i}. {discord.utils.escape_markdown(utt.request.label or utt.request.text[:80])}")
        if len(pending) > 10:
            lines.append(f"... and {len(pending) - 10} more")
        await reply(interaction, "\n".join(lines), allowed_mentions=discord.AllowedMentions.none())

    @say.autocomplete("voice")
    @tts.autocomplete("voice")
    async def _voice_names(self, interaction: discord.Interaction, current: str) -> list[app_commands.Choice[str]]:
        voices = getattr(self.bot, "voices", None)
        if voices is None:
            return []
        return await voices.autocomplete(interaction.user.id, interaction.guild_id, current)
