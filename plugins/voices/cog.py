"""Thin handlers for /voice ...; ownership rules and storage are in bot.voices."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Literal

import discord
from discord import app_commands
from discord.ext import commands

from bot import checks
from bot.dictionary_entries import MAX_NAME_CHARS, check_spoken_name
from bot.errors import UserError, reply
from bot.member_notice import tell_member
from bot.speech.audio_file import attachment
from bot.speech.text.say import Join, SayOrder
from bot.user_options import BY_FIELD as USER_OPTIONS
from bot.voice_recording import MAX_SPEECH_S
from plugins.voices.confirm import StopButton, ask
from plugins.voices.progress import ProgressMessage

if TYPE_CHECKING:
    from bot.app import VoiceBot

CONSENT = (
    "**Register the voice {name!r}?**\n"
    "By confirming you state that this is your own voice, or that you have the right to use it, and that "
    "you allow this bot to keep the clip and speak in this voice for you and for those you share it with. "
    "You can delete it at any time with /voice delete."
)
RECORD_NOTE = (f"\nAfter you confirm I keep only your own audio in my voice channel, for up to {MAX_SPEECH_S:g} s or "
               "until you press Stop; nobody else's is decoded or kept.")
REGISTERING = "Registering {name!r}… this takes up to a minute; your voice stays what it is until then."


class VoicesCog(commands.Cog):
    def __init__(self, bot: VoiceBot) -> None:
        self.bot = bot

    @property
    def voices(self):
        return self.bot.voices

    group = app_commands.Group(name="voice", description="Your registered voices")

    @group.command(name="register", description="Register a voice from a 3-30 s clip of speech")
    @app_commands.describe(name="a name for the voice", clip="WAV, FLAC, Ogg/Opus or MP3, 3-30 s of speech",
                           transcript="what is said in the clip (helps cloning engines)")
    async def register(self, interaction: discord.Interaction, name: str, clip: discord.Attachment,
                       transcript: str = "") -> None:
        from bot.voices import check_name

        name = check_name(name)
        cap = self.bot.config.voices.max_clip_bytes
        if clip.size > cap:
            raise UserError(f"That file is {clip.size / 1e6:.1f} MB; the limit is {cap / 1e6:.0f} MB.")
        if len(transcript) > 1000:
            raise UserError("Keep the transcript under 1000 characters.")
        pressed = await ask(interaction, CONSENT.format(name=name), "I confirm")
        if pressed is None:
            return
        await pressed.response.edit_message(content=REGISTERING.format(name=name), view=None)
        await self._register(interaction, name, lambda: self.voices.download(clip.url, clip.size), transcript)

    @group.command(name="record",
                   description=f"Register a voice by speaking in my voice channel (up to {MAX_SPEECH_S:g} s)")
    @app_commands.describe(name="a name for the voice")
    @app_commands.guild_only()
    async def record(self, interaction: discord.Interaction, name: str = "recorded") -> None:
        name = await self.voices.check_new(interaction.user.id, name)
        recordings = self.bot.recordings
        recordings.check(interaction.user)
        pressed = await ask(interaction, CONSENT.format(name=name) + RECORD_NOTE, "I confirm")
        if pressed is None:
            return
        try:
            recording = recordings.start(interaction.user)  # checked again: they may have left meanwhile
        except UserError as exc:
            await pressed.response.edit_message(content=f"Not recorded: {exc}", view=None)
            return
        shown = pressed.response.edit_message(content=recording.progress(),
                                              view=StopButton(interaction.user.id, recording.finish))
        progress = ProgressMessage(interaction, "")
        end = await recordings.run(recording, shown, progress.show)
        await progress.settle()
        if not end.keep:
            await interaction.edit_original_response(content=f"Not registered: {end.message}", view=None)
            return
        await interaction.edit_original_response(content=REGISTERING.format(name=name), view=None)

        async def clip() -> bytes:
            return recording.take_wav()

        await self._register(interaction, name, clip, "")

    async def _register(self, interaction: discord.Interaction, name: str, clip: Callable[[], Awaitable[bytes]],
                        transcript: str) -> None:
        """The clip (uploaded or recorded) registered as `name`, its progress and result in the message."""
        progress = ProgressMessage(interaction, f"Preparing your voice {name!r}: {{percent}}")
        try:
            info = await self.voices.register(interaction.user.id, name, await clip(), transcript, progress)
        except UserError as exc:
            await progress.settle()
            await interaction.edit_original_response(content=f"Not registered: {exc}")
            return
        await progress.settle()
        await interaction.edit_original_response(
            content=f"Registered {info.name!r} ({info.clip_seconds:.1f} s of speech). "
                    f"Use /voice use {info.name} to speak in it.")

    @group.command(name="list", description="Your voices, those shared with you, and the stock voices")
    async def list_(self, interaction: discord.Interaction) -> None:
        infos = await self.voices.visible(interaction.user.id, interaction.guild_id)
        prefs = await self.bot.prefs.user(interaction.user.id)
        lines = [] if infos else ["You have no voices yet. Register one with /voice register."]
        for i in infos:
            mark = " (active)" if i.id == prefs.active_voice_id else ""
            whose = "" if i.owner_id == interaction.user.id else " — shared with you"
            lines.append(f"• {discord.utils.escape_markdown(i.name)}{mark}{whose}")
        stock = self.bot.stock.lines()
        if stock:
            chosen = self.bot.stock.by_name.get(prefs.stock_voice or "")
            lines += ["", f"**Stock voices** (/voice use NAME; yours: {chosen.label if chosen else 'the default'}):",
                      *stock]
        await reply(interaction, "\n".join(lines)[:2000], allowed_mentions=discord.AllowedMentions.none())

    @group.command(name="use", description="Speak in this voice from now on")
    async def use(self, interaction: discord.Interaction, name: str) -> None:
        said = await self.voices.use(interaction.user.id, interaction.guild_id, name)
        await reply(interaction, f"Your messages are now spoken in {said}.")

    @group.command(name="reset", description="Go back to the default voice, speed and pitch")
    async def reset(self, interaction: discord.Interaction) -> None:
        await self.voices.reset(interaction.user.id)
        await reply(interaction, "Back to the default voice, speed and pitch.")

    @group.command(name="language", description="The language your messages are spoken in (auto: detected)")
    @app_commands.describe(language="auto (detected per message), a language, or server (this server's)")
    async def language(self, interaction: discord.Interaction, language: str) -> None:
        await reply(interaction, await self.bot.languages.set_user(interaction.user.id, language))

    @language.autocomplete("language")
    async def _languages(self, interaction: discord.Interaction, current: str):
        return self.bot.languages.autocomplete(current, user=True)

    @group.command(name="settings", description="Your speaking speed and pitch")
    @app_commands.describe(speed=USER_OPTIONS["speed"].range, pitch=USER_OPTIONS["pitch"].range)
    async def settings(self, interaction: discord.Interaction, speed: float | None = None,
                       pitch: float | None = None) -> None:
        s, p = await self.voices.set_speed_pitch(interaction.user.id, speed, pitch)
        await reply(interaction, f"Speed {s:g}, pitch {p:+g} semitones.")

    @group.command(name="lend", description="Let others have your messages spoken in your voice (\"Speak in their "
                                            "voice\")")
    @app_commands.describe(state=USER_OPTIONS["lend_voice"].help)
    async def lend(self, interaction: discord.Interaction, state: Literal["on", "off"]) -> None:
        await self.bot.prefs.update_user(interaction.user.id, lend_voice=state == "on")
        await reply(interaction, "Others may now have your messages spoken in your voice. /voice lend off undoes it."
                    if state == "on" else "Only you can have your messages spoken in your voice now.")

    @group.command(name="name", description="How your name is said, in every server (empty: as written)")
    @app_commands.describe(say_as=f"what to say for your name, up to {MAX_NAME_CHARS} characters")
    async def name_(self, interaction: discord.Interaction, say_as: str | None = None) -> None:
        spoken = check_spoken_name(say_as)
        await self.bot.prefs.update_user(interaction.user.id, name_say_as=spoken)
        await reply(interaction, f"Your name is now said as {discord.utils.escape_markdown(spoken)}." if spoken
                    else "Your name is said as written again.", allowed_mentions=discord.AllowedMentions.none())

    @group.command(name="set", description="Set a member's voice in this server (Manage Server); default: none")
    @app_commands.describe(member="whose voice", voice="a stock voice or one the member may use; default removes it")
    @app_commands.guild_only()
    @app_commands.check(checks.manage_guild)
    async def set_(self, interaction: discord.Interaction, member: discord.Member, voice: str) -> None:
        said = await self.voices.assign(interaction.guild_id, member.id, voice)
        unless = "" if (await self.bot.prefs.guild(interaction.guild_id)).lock_voice else \
            " (your own /voice use still wins: this server does not lock voices)"
        news = f"set your voice to {said}{unless}" if said else "removed the voice set for you"
        told = await tell_member(member, f"In {interaction.guild.name} a moderator {news}.", interaction.channel)
        now = f"is now {said}{unless.replace('your', 'their')}" if said else "is their own choice again"
        await reply(interaction, f"{member.mention}'s voice here {now}; {told}",
                    allowed_mentions=discord.AllowedMentions.none())

    @group.command(name="preview", description="Hear a voice in the voice channel (or as a file when I'm not in one)")
    @app_commands.guild_only()
    async def preview(self, interaction: discord.Interaction, name: str, text: str | None = None) -> None:
        text = text or self.bot.stock.preview_text(name)
        await interaction.response.defer(ephemeral=True, thinking=True)

        async def notify(message: str) -> None:
            await reply(interaction, message)

        order = SayOrder(
            guild=interaction.guild, author=interaction.user, text=text, kind="preview", voice_name=name,
            channel_id=interaction.channel_id, join=Join.NEVER, notify=notify, label=f"preview of {name}",
        )
        if not self.bot.speech.is_connected(interaction.guild_id):  # no voice channel: an audio file instead
            data = await self.bot.speech.render(order)
            await interaction.followup.send(f"{name!r} sounds like this.", file=attachment(data), ephemeral=True)
            return
        await self.bot.speech.say(order)
        await reply(interaction, f"Previewing {name!r} in the voice channel.")

    @group.command(name="rename", description="Rename one of your voices")
    async def rename(self, interaction: discord.Interaction, name: str, new_name: str) -> None:
        await self.voices.rename(interaction.user.id, name, new_name)
        await reply(interaction, f"Renamed to {new_name!r}.")

    @group.command(name="delete", description="Delete one of your voices, its clip and features")
    async def delete(self, interaction: discord.Interaction, name: str) -> None:
        info = await self.voices.find_owned(interaction.user.id, name)
        pressed = await ask(interaction, f"Delete the voice {info.name!r}, its clip and all its data?", "Delete")
        if pressed is None:
            return
        await self.voices.delete(interaction.user.id, info.name)
        await pressed.response.edit_message(content=f"Deleted {info.name!r}.", view=None)

    @group.command(name="share", description="Let a user, or everyone in this server, use one of your voices")
    @app_commands.describe(user="share with this user", server="share with everyone in this server")
    async def share(self, interaction: discord.Interaction, name: str, user: discord.User | None = None,
                    server: bool = False) -> None:
        await self._share(interaction, name, user, server, undo=False)

    @group.command(name="unshare", description="Stop sharing one of your voices")
    async def unshare(self, interaction: discord.Interaction, name: str, user: discord.User | None = None,
                      server: bool = False) -> None:
        await self._share(interaction, name, user, server, undo=True)

    async def _share(self, interaction, name, user, server, *, undo: bool) -> None:
        if (user is None) == (not server):
            raise UserError("Name either a user or server:true.")
        if server and interaction.guild_id is None:
            raise UserError("Sharing with a server works only inside that server.")
        kind, target = ("guild", interaction.guild_id) if server else ("user", user.id)
        changed = await self.voices.share(interaction.user.id, name, kind, target, undo=undo)
        who = "everyone in this server" if server else user.mention
        if undo:
            text = f"{name!r} is no longer shared with {who}." if changed else f"{name!r} was not shared with {who}."
        else:
            text = f"{name!r} is now shared with {who}." if changed else f"{name!r} was already shared with {who}."
        await reply(interaction, text, allowed_mentions=discord.AllowedMentions.none())

    @set_.autocomplete("voice")
    async def _member_voices(self, interaction: discord.Interaction, current: str):
        member = interaction.namespace.member
        return await self.voices.autocomplete(member.id if member else interaction.user.id, interaction.guild_id,
                                              current)

    @use.autocomplete("name")
    @preview.autocomplete("name")
    async def _visible_names(self, interaction: discord.Interaction, current: str):
        return await self.voices.autocomplete(interaction.user.id, interaction.guild_id, current)

    @rename.autocomplete("name")
    @delete.autocomplete("name")
    @share.autocomplete("name")
    @unshare.autocomplete("name")
    async def _owned_names(self, interaction: discord.Interaction, current: str):
        return await self.voices.autocomplete(interaction.user.id, interaction.guild_id, current, owned_only=True)
