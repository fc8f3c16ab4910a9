"""LanguageService on the real engine and detector: which language a message is in, given the user's and the
guild's settings; what /voice language and /settings set language accept."""

from __future__ import annotations

import asyncio

import pytest

from bot.guild_options import OptionError
from bot.languages import LanguageService
from engine.factory import build_engine
from engine.settings import EngineSettings

FRENCH = "Bonjour tout le monde, je suis ravi de vous retrouver ce soir."


@pytest.fixture(scope="module")
def service():
    engine = build_engine(EngineSettings(workers=1))
    yield LanguageService(engine, prefs=None)
    asyncio.run(engine.close())


@pytest.mark.parametrize("user, guild, text, expected", [
    (None, "", FRENCH, "en"),  # nothing set: the bot's own voice's language, no detection
    (None, "de", FRENCH, "de"),  # the guild's
    ("it", "de", FRENCH, "it"),  # the user's wins
    (None, "auto", FRENCH, "fr"),  # detected
    (None, "auto", "ok merci", "en"),  # too short: the bot's
    ("auto", "de", "ok merci", "de"),  # too short: the guild's
    ("es", "auto", FRENCH, "es"),  # the user's fixed language is not second-guessed
    ("auto", "", "Guten Abend zusammen, ich freue mich sehr.", "de"),
])
def test_the_language_of_a_message(service, user, guild, text, expected):
    assert service.language_of(text, user, guild) == expected


def test_what_the_settings_accept(service):
    assert service.parse("French", user=True) == "fr" and service.parse(" FR ", user=False) == "fr"
    assert service.parse("German (de)", user=True) == "de"
    assert service.parse("auto", user=True) == "auto"
    assert service.parse("server", user=True) is None and service.parse("default", user=False) == ""
    with pytest.raises(OptionError, match="I don't speak 'Klingon'.*or use auto .* or default"):
        service.parse("Klingon", user=False)
    assert service.parse_guild("auto") == ("auto", "auto (detected per message)")
    assert service.parse_guild("default") == ("", "default (English)")


def test_autocomplete_offers_the_special_values_then_matching_languages(service):
    names = [(c.name, c.value) for c in service.autocomplete("ger", user=False)]
    assert names[0] == ("German (de)", "de")
    values = [c.value for c in service.autocomplete("", user=True)]
    assert values[:2] == ["auto", "server"] and len(values) == 25
    assert [c.value for c in service.autocomplete("au", user=False)][0] == "auto"
    assert service.autocomplete("zzzz", user=True) == []
