"""Voices plugin: /voice register, list, use, preview, rename, delete, share, unshare, reset, settings."""

from __future__ import annotations

from plugins.voices.cog import VoicesCog


async def setup(bot) -> None:
    await bot.add_cog(VoicesCog(bot))
