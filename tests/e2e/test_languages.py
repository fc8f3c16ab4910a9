"""Languages through the sandbox: with `auto` a French and a German readout message are spoken by eSpeak NG, or
by a second Piper voice dropped into the voices folder; /voice language, /settings set language, autocomplete."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from demo.sandbox_bot import sandbox_settings, start_bot
from engine.backends.espeak.backend import VOICE_NAME as ESPEAK
from engine.backends.piper.settings import PiperSettings
from engine.base import Voice
from tests.audio_util import assert_same_speech, band_profile, mono
from tests.e2e.conftest import make_settings
from tests.e2e.test_readout import enable_readout, join
from tests.piper_voices import drop_piper_voice

pytestmark = pytest.mark.e2e
FRENCH = "Bonjour tout le monde, je suis ravi de vous retrouver ce soir pour la partie."
GERMAN = "Guten Abend zusammen, ich freue mich sehr, euch heute alle wiederzusehen."
ENGLISH = "Good evening everyone, I am very happy to see all of you again tonight."
GERMAN_VOICE = "de_DE-joe-medium"


class Spoken:
    """Each finished utterance's text, voice and the channel's audio of it."""

    def __init__(self, sb, demo, bot) -> None:
        self.sb, self.demo = sb, demo
        self.capture = sb.capture(demo.guild)
        self.items: list[tuple[str, Voice, str]] = []
        bot.speech.listeners.append(lambda _g, utt, outcome: self.items.append(
            (utt.request.text, utt.request.voice, outcome.value)))

    async def post(self, author, text: str):
        """Post `text` in the read channel; (spoken text, voice, heard audio) once it has played."""
        self.capture.clear()
        n = len(self.items)
        await self.sb.post(author, self.demo.general, text)
        await self.capture.wait_for_audio(0.3, timeout=60)
        await self.capture.wait_until_silent(0.8, timeout=60)
        assert len(self.items) == n + 1 and self.items[-1][2] == "played", self.items
        spoken, voice, _ = self.items[-1]
        return spoken, voice, mono(self.capture.pcm())


async def set_language(sb, demo, value: str) -> str:
    it = await sb.slash(sb.owner, demo.general, "settings set", setting="language", value=value)
    return await it.wait_text(timeout=20)


async def assert_heard_in(bot, heard, text: str, voice: Voice, other: Voice) -> None:
    """The heard audio is the engine's rendering of `text` in `voice`, not in `other`: the same speech, and the
    coarse spectrum tells the voices apart (band-profile distance heard through the sandbox's Opus: to the
    voice's own 1.1-1.4, to the other's 4.3-4.9)."""
    mine = mono(await bot.engine.synthesize_all(text, voice))
    theirs = mono(await bot.engine.synthesize_all(text, other))
    assert_same_speech(heard, mine)
    d_mine = float(np.linalg.norm(band_profile(heard) - band_profile(mine)))
    d_theirs = float(np.linalg.norm(band_profile(heard) - band_profile(theirs)))
    assert d_mine < d_theirs / 2, (voice.name, d_mine, d_theirs)


async def test_auto_speaks_french_and_german_through_espeak_and_english_in_the_bots_voice(sb, demo, bot):
    await enable_readout(sb, demo)
    await join(sb, demo)
    assert await set_language(sb, demo, "auto") == "language is now auto (detected per message)."
    spoken = Spoken(sb, demo, bot)
    text, voice, heard = await spoken.post(demo.alice, FRENCH)
    assert voice.name == ESPEAK and voice.language == "fr" and text.endswith(FRENCH)
    await assert_heard_in(bot, heard, text, voice, Voice())
    text, voice, heard = await spoken.post(demo.alice, GERMAN)
    assert voice == Voice(name=ESPEAK, language="de") and text == GERMAN
    await assert_heard_in(bot, heard, text, voice, Voice())
    _, voice, _ = await spoken.post(demo.alice, ENGLISH)
    assert voice == Voice(language="en")  # the bundled Piper voice
    _, voice, _ = await spoken.post(demo.alice, "ok merci")  # too short to tell: the guild's language, the default
    assert voice == Voice(language="en")


@pytest.fixture
async def german_bot(sb, demo, tmp_path):
    """The bot started with a voices folder holding a second Piper voice: the bundled model under another
    name, its .onnx.json saying de_DE."""
    drop_piper_voice(tmp_path / "voices", GERMAN_VOICE, "de_DE")
    s = make_settings(tmp_path, speech={"idle_leave_s": 0.0})
    piper = dataclasses.replace(PiperSettings.of(s.engine), voices_dir=str(tmp_path / "voices"))
    engine = s.engine.with_tables(piper)
    running = await start_bot(sb, sandbox_settings(dataclasses.replace(s, engine=engine), sb))
    yield running.bot
    await running.stop()


async def test_a_dropped_piper_voice_speaks_german_and_espeak_french(sb, demo, german_bot):
    bot = german_bot
    assert bot.engine.languages()["de"] == "German" and bot.engine.route(Voice(), "de").name == GERMAN_VOICE
    await enable_readout(sb, demo)
    await join(sb, demo)
    await set_language(sb, demo, "auto")
    spoken = Spoken(sb, demo, bot)
    text, voice, heard = await spoken.post(demo.alice, GERMAN)
    assert voice == Voice(name=GERMAN_VOICE, language="de")
    # the same model as the bundled voice: the heard audio is Piper's, not eSpeak NG's
    await assert_heard_in(bot, heard, text, voice, Voice(name=ESPEAK, language="de"))
    text, voice, heard = await spoken.post(demo.alice, FRENCH)
    assert voice == Voice(name=ESPEAK, language="fr")


async def test_a_users_language_and_the_commands(sb, demo, bot):
    await enable_readout(sb, demo)
    await join(sb, demo)
    choices = await sb.autocomplete(demo.alice, demo.general, "voice language", "language", "fre")
    assert {"name": "French (fr)", "value": "fr"} in choices
    choices = await sb.autocomplete(demo.alice, demo.general, "voice language", "language", "")
    assert [c["value"] for c in choices[:2]] == ["auto", "server"] and len(choices) == 25
    choices = await sb.autocomplete(sb.owner, demo.general, "settings set", "value", "ger", setting="language")
    assert {"name": "German (de)", "value": "de"} in choices
    it = await sb.slash(demo.alice, demo.general, "voice language", language="Klingon")
    answer = await it.wait_response(timeout=20)
    assert answer.ephemeral and "I don't speak 'Klingon'" in answer.content
    it = await sb.slash(demo.alice, demo.general, "voice language", language="French")
    assert await it.wait_text(timeout=20) == "Your messages are now spoken in French (fr)."
    spoken = Spoken(sb, demo, bot)
    text, voice, _ = await spoken.post(demo.alice, ENGLISH)  # alice said it is French: eSpeak NG's French
    assert voice == Voice(name=ESPEAK, language="fr")
    assert "Could not" not in await set_language(sb, demo, "de")
    it = await sb.slash(sb.owner, demo.general, "settings show")
    assert "**language**: de" in await it.wait_text(timeout=20)
    it = await sb.slash(demo.alice, demo.general, "voice language", language="server")
    assert "this server's language" in await it.wait_text(timeout=20)
    _, voice, _ = await spoken.post(demo.alice, ENGLISH)  # now the server's: German
    assert voice == Voice(name=ESPEAK, language="de")
    assert "I don't speak" in await set_language(sb, demo, "xx")
    assert (await bot.prefs.guild(demo.guild.id)).language == "de"
