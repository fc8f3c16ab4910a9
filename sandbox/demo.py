"""A ready-made demo guild for `run_bot.py --sandbox` and manual trials."""
from __future__ import annotations

from dataclasses import dataclass

from .core import Sandbox
from .state import Channel, Guild, User


@dataclass
class Demo:
    guild: Guild
    general: Channel
    voice: Channel
    alice: User


async def create_demo(sb: Sandbox, name: str = "Sandbox Guild") -> Demo:
    """A guild with text channel "general", voice channel "Voice" and user "alice" already in it."""
    guild = sb.guild(name)
    general = guild.text_channel("general")
    voice = guild.voice_channel("Voice")
    alice = sb.user("alice")
    guild.add_member(alice)
    await sb.user_joins_voice(alice, voice)
    return Demo(guild, general, voice, alice)
