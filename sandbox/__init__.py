"""A local Discord stand-in for tests, benchmarks and the demo. Imports nothing from the project."""
from .capture import Capture, Packet
from .client import env, point_discord_at, point_discord_at_env, restore_discord
from .core import Sandbox
from .interactions import CommandNotSynced, Interaction, Response

__all__ = ["Sandbox", "Capture", "Packet", "Interaction", "Response", "CommandNotSynced", "point_discord_at",
           "point_discord_at_env", "restore_discord", "env"]
