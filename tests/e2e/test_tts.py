"""/tts and /voice preview without a voice channel, through the sandbox: an Ogg/Opus attachment of the speech."""

from __future__ import annotations

import io

import aiohttp
import numpy as np
import pytest
import soundfile as sf
import soxr

from engine.base import Voice
from engine.voices import embedding
from tests.audio_util import assert_same_speech, mono
from tests.e2e.test_voices import FIT, embed_pcm48, espeak_clip, final_edit, register

pytestmark = pytest.mark.e2e
TEXT = "The library opens at nine and closes at five on weekdays."
OTHER = "Bring an umbrella, since it will rain all afternoon."


async def fetched_file(it, timeout: float = 120) -> tuple[object, bytes]:
    """The attachment the bot answered with, fetched from its URL as a Discord client would."""
    answer = await it.wait(lambda i: next((r for r in i.responses if r.message and r.message.attachments), None),
                           timeout=timeout, what="an answer with a file")
    att = answer.message.attachments[0]
    async with aiohttp.ClientSession() as http, http.get(att.url) as resp:
        assert resp.status == 200 and resp.headers["Content-Type"] == "audio/ogg"
        return answer, await resp.read()


def decoded(data: bytes) -> np.ndarray:
    """Ogg/Opus decoded by libsndfile's libopus, as 48 kHz mono float."""
    assert data[:4] == b"OggS" and b"OpusHead" in data[:200]
    audio, rate = sf.read(io.BytesIO(data), dtype="float32")
    assert rate == 48_000 and audio.ndim == 1
    return audio


async def test_tts_answers_with_an_ogg_opus_file_of_the_speech(sb, demo, bot):
    assert not bot.speech.is_connected(demo.guild.id)
    it = await sb.slash(demo.alice, demo.general, "tts", text=TEXT)
    assert (await it.wait_response(timeout=10)).type == 5  # deferred: synthesis takes longer than 3 s
    answer, data = await fetched_file(it)
    assert answer.ephemeral and answer.message.attachments[0].filename == "speech.ogg"
    heard = decoded(data)
    reference = mono(await bot.engine.synthesize_all(TEXT, Voice()))
    assert_same_speech(heard, reference, mono(await bot.engine.synthesize_all(OTHER, Voice())))
    assert not bot.speech.is_connected(demo.guild.id)  # no voice channel was joined


async def test_tts_bad_input_is_told_and_sends_no_file(sb, demo, bot):
    for options, told in (({"text": "x" * 501}, "too long"), ({"text": "hello", "voice": "nosuch"}, "no voice named"),
                          ({"text": "!!! ???"}, "nothing to say")):
        it = await sb.slash(demo.alice, demo.general, "tts", **options)
        text = await it.wait_text(timeout=30)
        assert told in text, text
        assert it.ephemeral and not any(r.message and r.message.attachments for r in it.responses)


async def test_tts_in_a_registered_voice_and_preview_as_a_file_when_not_connected(sb, demo, bot):
    clip = espeak_clip()
    it, press = await register(sb, demo.alice, demo.general, "robot", clip)
    assert (await final_edit(it, press)).startswith("Registered 'robot'")
    ref, rate = sf.read(io.BytesIO(clip), dtype="float32")

    ref16 = embedding.embed(soxr.resample(ref, rate, 16_000).astype(np.float32))
    it = await sb.slash(demo.alice, demo.general, "tts", text=FIT, voice="robot")
    _, matched = await fetched_file(it)
    it = await sb.slash(demo.alice, demo.general, "tts", text=FIT)
    _, default = await fetched_file(it)

    def similarity(data: bytes) -> float:
        audio = decoded(data)
        pcm = (np.repeat(audio[:, None], 2, axis=1) * 32767).astype("<i2").tobytes()
        return embedding.similarity(embed_pcm48(pcm), ref16)

    assert similarity(matched) > similarity(default)
    it = await sb.slash(demo.alice, demo.general, "voice preview", name="robot", text="Testing one two three.")
    answer, data = await fetched_file(it)
    assert "'robot' sounds like this" in answer.message.content and len(decoded(data)) > 0.5 * 48_000
    assert not bot.speech.is_connected(demo.guild.id)
