"""Speech plugin: /join, /leave, /say, /tts, /skip, /stop, /queue and the messages' "Speak this" menus."""

from __future__ import annotations

from plugins.speech.cog import SpeechCog
from plugins.speech.menus import MessageMenus


async def setup(bot) -> None:
    await bot.add_cog(SpeechCog(bot))
    await bot.add_cog(MessageMenus(bot))
