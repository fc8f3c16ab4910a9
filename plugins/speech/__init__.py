"""Speech plugin: /join, /leave, /say, /tts, /skip, /stop, /queue and the messages' "Speak this" menus."""

from __future__ import annotations

from typing import TYPE_CHECKING

from plugins.speech.cog import SpeechCog
from plugins.speech.menus import MessageMenus

if TYPE_CHECKING:
    from bot.app import VoiceBot


async def setup(bot: VoiceBot) -> None:
    await bot.add_cog(SpeechCog(bot))
    await bot.add_cog(MessageMenus(bot))
