"""Admin plugin: owner-only plugin management (and, with the readout issue, guild settings)."""

from __future__ import annotations

from plugins.admin.plugins_cog import PluginsCog


async def setup(bot) -> None:
    await bot.add_cog(PluginsCog(bot))
