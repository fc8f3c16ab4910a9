"""Voices plugin: /voice register, list, use, preview, rename, delete, share, unshare, reset, settings."""

from __future__ import annotations

from typing import TYPE_CHECKING

from plugins.voices.cog import VoicesCog

if TYPE_CHECKING:
    from bot.app import VoiceBot


async def setup(bot: VoiceBot) -> None:
    await bot.add_cog(VoicesCog(bot))
