"""Admin plugin: owner-only plugin management, guild settings, user opt-out and nickname."""

from __future__ import annotations

from plugins.admin.plugins_cog import PluginsCog
from plugins.admin.settings_cog import SettingsCog


async def setup(bot) -> None:
    await bot.add_cog(PluginsCog(bot))
    await bot.add_cog(SettingsCog(bot))
