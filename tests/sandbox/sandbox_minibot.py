"""A minimal discord.py bot (not the project's) used to test the sandbox itself."""
from __future__ import annotations

import asyncio
import io
import math
import struct
from typing import Optional

import discord
from discord import app_commands
from discord.ext import commands

from bot.speech.connection.discord_internals import connection_state

FRAME = 3840


class ToneSource(discord.AudioSource):
    """A plain PCM sine tone, 48 kHz stereo s16le, in 20 ms frames (no ffmpeg)."""

    def __init__(self, freq: float, seconds: float, amplitude: float = 0.4) -> None:
        self.freq = freq
        self.frames = int(round(seconds / 0.02))
        self.n = 0

    def read(self) -> bytes:
        if self.n >= self.frames:
            return b""
        start = self.n * 960
        self.n += 1
        samples = []
        for i in range(960):
            v = int(0.4 * 32767 * math.sin(2 * math.pi * self.freq * (start + i) / 48000))
            samples += (v, v)
        return struct.pack("<1920h", *samples)

    def is_opus(self) -> bool:
        return False


async def wait_e2ee(vc: discord.VoiceClient, timeout: float = 10.0) -> None:
    """discord.py sends plain Opus until its DAVE session is ready; listeners drop it. Wait (bounded) when
    someone else is in the channel to hear it."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    state = connection_state(vc)
    while (state.dave_protocol_version and not state.can_encrypt
           and any(m.id != vc.user.id for m in vc.channel.members) and loop.time() < deadline):
        await asyncio.sleep(0.01)


class ButtonView(discord.ui.View):
    def __init__(self) -> None:
        super().__init__(timeout=30)

    @discord.ui.button(label="OK", custom_id="ok")
    async def ok(self, interaction: discord.Interaction, button: discord.ui.Button) -> None:
        await interaction.response.edit_message(content=f"clicked by {interaction.user.name}", view=None)


class MiniBot(commands.AutoShardedBot):
    def __init__(self, connector=None, shard_count: Optional[int] = None, shard_ids=None, sharded: bool = False):
        intents = discord.Intents.default()
        intents.message_content = True
        kwargs = dict(command_prefix="!", intents=intents, connector=connector, guild_ready_timeout=0.2)
        if sharded:
            kwargs.update(shard_count=shard_count, shard_ids=shard_ids)
        super().__init__(**kwargs)
        self.seen_messages: list[discord.Message] = []
        self.resumed = asyncio.Event()
        self.message_event = asyncio.Event()
        self.played: list[float] = []
        self._install()

    async def before_identify_hook(self, shard_id, *, initial: bool = False) -> None:
        return None     # skip discord.py's 5 s wait between IDENTIFYs in tests

    async def setup_hook(self) -> None:
        await self.tree.sync()

    async def on_resumed(self) -> None:
        self.resumed.set()

    async def on_shard_resumed(self, shard_id: int) -> None:
        self.resumed.set()

    async def on_message(self, message: discord.Message) -> None:
        if message.author.id != self.user.id:
            self.seen_messages.append(message)
            self.message_event.set()

    def _install(self) -> None:
        tree = self.tree

        @tree.command(description="pong")
        async def ping(interaction: discord.Interaction) -> None:
            await interaction.response.send_message("pong", ephemeral=True)

        @tree.command(description="speak text")
        @app_commands.describe(text="what to say")
        async def say(interaction: discord.Interaction, text: str, times: int = 1) -> None:
            await interaction.response.defer(thinking=True)
            msg = await interaction.followup.send(f"saying: {text}", wait=True)
            await interaction.edit_original_response(content=f"said: {text} x{times}")
            assert msg.id

        async def pick_auto(interaction: discord.Interaction, current: str):
            names = ["abba", "abc", "bravo", "charlie"]
            return [app_commands.Choice(name=n, value=n) for n in names if n.startswith(current)]

        @tree.command(description="pick a name")
        @app_commands.autocomplete(name=pick_auto)
        async def pick(interaction: discord.Interaction, name: str) -> None:
            await interaction.response.send_message(f"picked {name}")

        @tree.command(description="buttons")
        async def buttons(interaction: discord.Interaction) -> None:
            await interaction.response.send_message("press", view=ButtonView())

        @tree.command(description="play a tone in your voice channel")
        async def tone(interaction: discord.Interaction, freq: float = 440.0, seconds: float = 1.0,
                       stay: bool = False, wait: bool = True) -> None:
            if interaction.guild is None:
                await interaction.response.send_message("guild only", ephemeral=True)
                return
            voice = interaction.user.voice
            if voice is None or voice.channel is None:
                await interaction.response.send_message("join a voice channel first", ephemeral=True)
                return
            await interaction.response.defer()
            vc = interaction.guild.voice_client or await voice.channel.connect(timeout=10)
            if wait:
                await wait_e2ee(vc)
            done = asyncio.Event()
            loop = asyncio.get_running_loop()
            vc.play(ToneSource(freq, seconds), after=lambda e: loop.call_soon_threadsafe(done.set))
            await asyncio.wait_for(done.wait(), seconds + 20)
            self.played.append(seconds)
            if not stay:
                await vc.disconnect()
            await interaction.followup.send(f"played {seconds}s")

        @tree.context_menu(name="Quote this")
        async def quote(interaction: discord.Interaction, message: discord.Message) -> None:
            await interaction.response.send_message(f"{message.author.name} wrote: {message.content}",
                                                    file=discord.File(io.BytesIO(message.content.encode()), "q.txt"))

        voice = app_commands.Group(name="voice", description="voices")

        @voice.command(name="register", description="register a voice")
        async def register(interaction: discord.Interaction, name: str, clip: discord.Attachment) -> None:
            data = await clip.read()
            await interaction.response.send_message(f"registered {name}: {len(data)} bytes {clip.content_type}",
                                                    ephemeral=True)

        tree.add_command(voice)
