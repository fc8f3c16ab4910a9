"""Readout plugin: reads readout channels aloud; /readout channel, /readout off."""

from __future__ import annotations

from typing import TYPE_CHECKING

from plugins.readout.cog import ReadoutCog

if TYPE_CHECKING:
    from bot.app import VoiceBot


async def setup(bot: VoiceBot) -> None:
    await bot.add_cog(ReadoutCog(bot))
