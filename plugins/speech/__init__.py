"""Speech plugin: /join, /leave, /say, /skip, /stop, /queue."""

from __future__ import annotations

from plugins.speech.cog import SpeechCog


async def setup(bot) -> None:
    await bot.add_cog(SpeechCog(bot))
