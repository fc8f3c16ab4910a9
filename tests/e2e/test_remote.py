"""The remote path end to end: bot -> remote backend -> engine server (Piper) -> sandbox capture."""

from __future__ import annotations

import dataclasses
import io

import numpy as np
import pytest
import soundfile as sf
import soxr

from demo.sandbox_bot import sandbox_settings, start_bot
from engine.backends.piper.settings import PiperSettings
from engine.backends.remote.settings import RemoteSettings
from engine.base import Voice
from engine.factory import build_engine
from engine.server.app import serve_in_background
from engine.settings import EngineSettings, ServerSettings
from engine.voices import embedding
from tests.audio_util import assert_same_speech, mono, rms
from tests.e2e.conftest import make_settings, steady_engine
from tests.e2e.recorders import heard_say

pytestmark = pytest.mark.e2e
TEXT = "Speech from the engine server, streamed to the bot and on into the voice channel."
OTHER = "Seven silver spoons sat quietly inside a wooden drawer all winter."


def remote_settings(tmp_path, url: str, **remote):
    """The shipped settings with the engine behind the server at `url` (and these other remote settings)."""
    settings = make_settings(tmp_path, speech={"idle_leave_s": 0.0})
    remote_table = dataclasses.replace(RemoteSettings.of(settings.engine), url=url, **remote)
    engine = dataclasses.replace(settings.engine, backend="remote").with_tables(remote_table)
    return dataclasses.replace(settings, engine=engine)


async def test_bot_speaks_through_the_engine_server(sb, demo, tmp_path):
    server_engine = build_engine(steady_engine(EngineSettings()))
    await server_engine.warm_up()
    try:
        async with serve_in_background(server_engine, ServerSettings(port=0)) as url:
            running = await start_bot(sb, sandbox_settings(remote_settings(tmp_path, url), sb))
            try:
                assert running.bot.engine.info.name == "remote"
                heard = await heard_say(sb, demo, TEXT)
                served_segments = server_engine.stats().segments_done
                assert served_segments >= 1  # the speech really came from the server's engine
                # the heard speech is the server engine's rendering (a stutter would break the envelope)
                voice = Voice()
                reference = mono(await server_engine.synthesize_all(TEXT, voice))
                other = mono(await server_engine.synthesize_all(OTHER, voice))
                assert rms(heard) > 0.02
                assert_same_speech(heard, reference, other)
            finally:
                await running.stop()
    finally:
        await server_engine.close()


async def test_the_remote_backend_speaks_the_languages_of_its_servers_voices(sb, demo, tmp_path):
    """A server whose voice speaks German: the bot learns that at warm-up, so a German message (language
    auto) is spoken by the server, and a French one by the bot's own eSpeak NG."""
    from engine.backends.espeak.backend import VOICE_NAME as ESPEAK
    from tests.e2e.test_languages import FRENCH, GERMAN, set_language
    from tests.piper_voices import drop_piper_voice

    model = drop_piper_voice(tmp_path / "server-model", "de_DE-joe-medium", "de_DE")
    server_settings = steady_engine(EngineSettings())
    server_settings = server_settings.with_tables(
        dataclasses.replace(PiperSettings.of(server_settings), model=str(model)))
    server_engine = build_engine(server_settings)
    await server_engine.warm_up()
    try:
        async with serve_in_background(server_engine, ServerSettings(port=0)) as url:
            running = await start_bot(sb, sandbox_settings(remote_settings(tmp_path, url), sb))
            try:
                engine = running.bot.engine
                assert engine.info.languages == ("de",)
                assert engine.route(Voice(), "de").name == Voice().name  # the server's voice
                assert engine.route(Voice(), "fr").name == ESPEAK
                assert await set_language(sb, demo, "auto") == "language is now auto (detected per message)."
                served = server_engine.stats().segments_done
                german = await heard_say(sb, demo, GERMAN)
                assert server_engine.stats().segments_done > served  # spoken by the server
                served = server_engine.stats().segments_done
                french = await heard_say(sb, demo, FRENCH)
                assert server_engine.stats().segments_done == served  # spoken here, by eSpeak NG
                assert rms(german) > 0.02 and rms(french) > 0.02
            finally:
                await running.stop()
    finally:
        await server_engine.close()


async def test_unreachable_engine_server_is_reported_to_the_user(sb, demo, tmp_path):
    settings = remote_settings(tmp_path, "http://127.0.0.1:9", retries=0, connect_timeout_s=1.0)
    running = await start_bot(sb, sandbox_settings(settings, sb))
    try:
        it = await sb.slash(demo.alice, demo.general, "say", text="Nobody will synthesize this.")
        told = await it.wait(lambda i: next((r for r in i.responses if "unreachable" in (r.content or "")), None),
                             timeout=30, what="the failure follow-up")
        assert told.ephemeral and "http://127.0.0.1:9" in told.content
        assert not sb.capture(demo.guild).voiced
        it = await sb.slash(demo.alice, demo.general, "queue")
        assert await it.wait_text() == "Nothing is waiting."  # the bot is still up and answering
    finally:
        await running.stop()


async def test_voice_registered_through_a_remote_backend_reaches_the_server_and_is_heard(sb, demo, tmp_path):
    """/voice register with engine.backend = "remote" uploads the clip to the engine server, and /say in
    that voice is spoken by the server in the matched voice (closer to the reference than the default)."""
    from engine.server.voice_store import VoiceStore
    from tests.e2e.test_voices import SPOKEN, embed_pcm48, espeak_clip, final_edit, register, speak_and_capture

    server_engine = build_engine(steady_engine(EngineSettings()))
    await server_engine.warm_up()
    store = VoiceStore(tmp_path / "server-voices")
    try:
        async with serve_in_background(server_engine, ServerSettings(port=0), voice_store=store) as url:
            running = await start_bot(sb, sandbox_settings(remote_settings(tmp_path, url), sb))
            try:
                clip = espeak_clip()
                it, press = await register(sb, demo.alice, demo.general, "robot", clip)
                result = await final_edit(it, press)
                assert result.startswith("Registered 'robot'"), result
                assert len(store) == 1  # the clip reached the engine server
                default_pcm = await speak_and_capture(sb, demo, SPOKEN)
                it = await sb.slash(demo.alice, demo.general, "voice use", name="robot")
                assert "now spoken in 'robot'" in await it.wait_text()
                matched_pcm = await speak_and_capture(sb, demo, SPOKEN)
            finally:
                await running.stop()
    finally:
        await server_engine.close()
    ref, rate = sf.read(io.BytesIO(clip), dtype="float32")
    ref16 = embedding.embed(soxr.resample(ref, rate, 16_000).astype(np.float32))
    sim_default = embedding.similarity(embed_pcm48(default_pcm), ref16)
    sim_matched = embedding.similarity(embed_pcm48(matched_pcm), ref16)
    assert sim_matched > sim_default + 0.02, (sim_matched, sim_default)
