"""The shipped default voice, Kokoro, through the sandbox with DAVE: English readout understood by a recognizer,
Japanese detected with `auto` and spoken at a person's pace in morae, Mandarin by its own voice; the stock voices
listed, chosen per user (/voice use), per server and language (/settings set voice), and previewed; a voice
registered on it (a style fitted to the clip of a speaker Kokoro did not make: the bundled Piper voice) shows its
progress and is heard closer to the clip's speaker, and understood."""

from __future__ import annotations

import io

import numpy as np
import pytest
import soundfile as sf
import soxr

from bench.listen import Recognizer, hanzi, morae, speech_seconds, to16k, wer
from demo.sandbox_bot import sandbox_settings, start_bot
from engine.backends.piper.backend import PiperBackend
from engine.backends.piper.settings import PiperSettings
from engine.base import DISCORD_RATE, Voice
from engine.voices import embedding
from tests.e2e.conftest import make_settings
from tests.e2e.test_languages import Spoken, set_language
from tests.e2e.test_readout import enable_readout, join
from tests.e2e.test_tts import decoded, fetched_file
from tests.e2e.test_voices import FIT, SPOKEN, embed_pcm48, final_edit, register, speak_and_capture

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]
ENGLISH = "The library opens at nine in the morning and closes at six in the evening."
JAPANESE = "次の会議は午後三時から始まります。資料を忘れずに持ってきてください。"
MANDARIN = "我们明天早上八点在学校门口见面，请不要迟到。"


def piper_clip() -> bytes:
    """The bundled Piper voice (a man; Kokoro's default voice is a woman) reading FIT, as WAV bytes: a human-like
    speaker none of Kokoro's packs is. (eSpeak NG's robot, test_voices' speaker, fits a voice as robotic: PocketSphinx
    missed 20 % of its words before Opus and 20-35 % after, so one sentence's WER said little either way.)"""
    piper = PiperBackend(PiperSettings(noise_scale=0.0, noise_w=0.0), workers=1)  # the same clip every time
    try:
        audio = np.concatenate(list(piper.synthesize(FIT, Voice())))
        out = io.BytesIO()
        sf.write(out, audio, piper.info.sample_rate, format="WAV", subtype="PCM_16")
        return out.getvalue()
    finally:
        piper.close()


@pytest.fixture
async def kokoro_bot(sb, demo, tmp_path):
    """The bot on the shipped engine settings (make_settings pins the steady Piper only for the other tests)."""
    s = make_settings(tmp_path, engine={"backend": "kokoro"}, speech={"idle_leave_s": 0.0})
    running = await start_bot(sb, sandbox_settings(s, sb))
    yield running.bot
    await running.stop()


async def test_kokoro_is_heard_in_english_japanese_and_mandarin(sb, demo, kokoro_bot):
    bot = kokoro_bot
    assert bot.engine.info.name == "kokoro"
    await enable_readout(sb, demo)
    await join(sb, demo)
    assert await set_language(sb, demo, "auto") == "language is now auto (detected per message)."
    spoken = Spoken(sb, demo, bot)

    text, voice, heard = await spoken.post(demo.alice, ENGLISH)
    assert voice == Voice(language="en")
    assert spoken.capture.decrypt_errors == 0
    # "alice said ..." and the sentence, as a recognizer hears them through Opus and DAVE
    assert wer(Recognizer(), [(text, to16k(heard, DISCORD_RATE))]) <= 0.25, text

    text, voice, heard = await spoken.post(demo.alice, JAPANESE)
    assert voice == Voice(language="ja")
    seconds = speech_seconds(heard, DISCORD_RATE)
    # the readout's "NAME said" prefix is in the spoken text: the pace is over what was said
    assert 5.0 <= morae(text) / seconds <= 10.0, (text, morae(text), seconds)

    text, voice, heard = await spoken.post(demo.alice, MANDARIN)
    assert voice == Voice(language="zh")
    assert 3.0 <= hanzi(text) / speech_seconds(heard, DISCORD_RATE) <= 7.5, text


async def test_stock_voices_are_listed_chosen_per_user_and_per_server_and_previewed(sb, demo, kokoro_bot):
    bot = kokoro_bot
    it = await sb.slash(demo.alice, demo.general, "voice preview", name="jf_alpha")  # not in a voice channel: a file
    _, data = await fetched_file(it)
    heard = decoded(data)  # its Japanese preview sentence, at a person's pace
    assert 5.0 <= morae("こんにちは。これが私の声です。今日もよろしくお願いします。") / speech_seconds(heard,
                                                                          DISCORD_RATE) <= 10.0

    listed = await (await sb.slash(demo.alice, demo.general, "voice list")).wait_text(timeout=20)
    assert "**Japanese** — women: Alpha (`jf_alpha`)" in listed and "; men: Adam (`am_adam`)" in listed
    choices = await sb.autocomplete(demo.alice, demo.general, "voice use", "name", "mich")
    assert choices[0] == {"name": "Michael (am_michael) — American English, man", "value": "am_michael"}
    it = await sb.slash(demo.alice, demo.general, "voice use", name="Michael (am_michael) — American English, man")
    expected = "Your messages are now spoken in Michael (am_michael) — American English, man."
    assert await it.wait_text(timeout=20) == expected
    it = await sb.slash(demo.alice, demo.general, "voice use", name="nobody_at_all")
    assert "no voice named" in await it.wait_text(timeout=20)

    choices = await sb.autocomplete(sb.owner, demo.general, "settings set", "value", "nezu", setting="voice")
    assert [c["value"] for c in choices] == ["jf_nezumi"]
    it = await sb.slash(sb.owner, demo.general, "settings set", setting="voice", value="jf_nezumi")
    assert await it.wait_text(timeout=20) == "voice is now Nezumi (jf_nezumi) for Japanese."
    it = await sb.slash(sb.owner, demo.general, "settings set", setting="voice", value="klingon")
    assert "no stock voice 'klingon'" in await it.wait_text(timeout=20)

    bob = sb.user("bob")
    demo.guild.add_member(bob)
    await sb.user_joins_voice(bob, demo.voice)
    await enable_readout(sb, demo)
    await join(sb, demo)
    await set_language(sb, demo, "auto")
    spoken = Spoken(sb, demo, bot)
    _, voice, _ = await spoken.post(demo.alice, ENGLISH)
    assert voice == Voice(name="am_michael", language="en")  # alice's own choice
    _, voice, _ = await spoken.post(bob, JAPANESE)
    assert voice == Voice(name="jf_nezumi", language="ja")  # the server's voice for Japanese
    _, voice, _ = await spoken.post(bob, ENGLISH)
    assert voice == Voice(language="en")  # the server chose none for English: the bot's own
    readers = demo.guild.role("readers")  # a role's stock voice, for members who chose none
    demo.guild.add_member(bob, roles=[readers])
    it = await sb.slash(sb.owner, demo.general, "settings set", setting="role_voice",
                        value=f"<@&{readers.id}> am_michael")
    assert await it.wait_text(timeout=20) == f"role_voice is now Michael for <@&{readers.id}>."
    _, voice, _ = await spoken.post(bob, ENGLISH)
    assert voice == Voice(name="am_michael", language="en")


async def test_a_registered_voice_shows_its_progress_and_sounds_like_its_speaker(sb, demo, kokoro_bot):
    clip = piper_clip()
    it, press = await register(sb, demo.alice, demo.general, "mine", clip)
    result = await final_edit(it, press)
    assert result.startswith("Registered 'mine'"), result
    shown = [r.content for r in it.edits]  # what each edit sent (the message itself shows only the latest)
    assert any(t and t.startswith("Preparing your voice 'mine': ") and t.endswith("%") for t in shown), shown
    default_pcm = await speak_and_capture(sb, demo, SPOKEN)
    it = await sb.slash(demo.alice, demo.general, "voice use", name="mine")
    assert "now spoken in 'mine'" in await it.wait_text(timeout=20)
    fitted_pcm = await speak_and_capture(sb, demo, SPOKEN)
    ref, rate = sf.read(io.BytesIO(clip), dtype="float32")
    speaker = embedding.embed(soxr.resample(ref, rate, 16_000).astype(np.float32))
    near_default = embedding.similarity(embed_pcm48(default_pcm), speaker)
    near_fitted = embedding.similarity(embed_pcm48(fitted_pcm), speaker)
    assert near_fitted > near_default + 0.1, (near_fitted, near_default)  # measured: 0.81 against 0.49
    assert wer(Recognizer(), [(SPOKEN, to16k(np.frombuffer(fitted_pcm, "<i2").reshape(-1, 2).mean(axis=1) / 32768,
                                             DISCORD_RATE))]) <= 0.3
