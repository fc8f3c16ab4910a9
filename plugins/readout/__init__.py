"""Readout plugin: reads readout channels aloud; /readout channel, /readout off."""

from __future__ import annotations

from plugins.readout.cog import ReadoutCog


async def setup(bot) -> None:
    await bot.add_cog(ReadoutCog(bot))
