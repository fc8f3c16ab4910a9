"""Admin plugin: owner-only plugin management, guild settings, user opt-out and nickname."""

from __future__ import annotations

from typing import TYPE_CHECKING

from plugins.admin.plugins_cog import PluginsCog
from plugins.admin.settings_cog import SettingsCog

if TYPE_CHECKING:
    from bot.app import VoiceBot


async def setup(bot: VoiceBot) -> None:
    await bot.add_cog(PluginsCog(bot))
    await bot.add_cog(SettingsCog(bot))
