"""Builds and stops the services plugins call: bot.speech, bot.voices, bot.dictionary, bot.languages (bot.prefs is
built with the bot)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from bot.dictionary import DictionaryService
from bot.languages import LanguageService
from bot.metrics import BotMetrics
from bot.speech.service import SpeechService
from bot.voices import VoiceService

if TYPE_CHECKING:
    from bot.app import VoiceBot

log = logging.getLogger(__name__)


async def build_services(bot: VoiceBot) -> None:
    """Create the speech and voices services once the engine and database are ready."""
    bot.voices = VoiceService(bot.db, bot.engine, bot.config.voices, bot.prefs)
    bot.dictionary = DictionaryService(bot.db)
    bot.languages = LanguageService(bot.engine, bot.prefs)
    bot.speech = SpeechService(bot, bot.engine, bot.config, prefs=bot.prefs, voices=bot.voices,
                               dictionary=bot.dictionary, languages=bot.languages)
    bot.metrics = BotMetrics(bot)
    bot.speech.listeners.append(bot.metrics.observe)
    if bot.config.web.enabled:
        from bot.web import WebServer

        bot.web = WebServer(bot, bot.config.web.host, bot.config.web.port)
        await bot.web.start()


async def stop_services(bot: VoiceBot) -> None:
    """Stop speakers and close the engine and database; each step runs even if another fails."""
    for name, step in (("web", getattr(getattr(bot, "web", None), "close", None)),
                       ("speech", getattr(bot.speech, "close", None)),
                       ("voices", getattr(bot.voices, "close", None)),
                       ("engine", getattr(bot.engine, "close", None)),
                       ("database", getattr(bot.db, "close", None))):
        if step is None:
            continue
        try:
            await step()
        except Exception:
            log.exception("closing %s failed", name)
