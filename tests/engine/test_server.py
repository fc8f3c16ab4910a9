"""Engine server: the real Piper engine behind the real aiohttp server on 127.0.0.1, driven by the
official `openai` client and by plain HTTP. What is checked is what a client would see."""

from __future__ import annotations

import asyncio
import io
import os
import struct
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import numpy as np
import openai
import pytest
import soundfile as sf

from engine.base import Engine, EngineError, Voice
from engine.server.app import check_bind, serve_in_background
from engine.server.voice_store import VoiceStore
from engine.settings import EngineSettings, ServerSettings
from engine.streaming import StreamingEngine

pytestmark = pytest.mark.timeout(180)
ROOT = Path(__file__).resolve().parents[2]
SENTENCE = "The weather this morning was bright and clear, with a gentle breeze from the west."
LONG = (
    "Good evening everyone. Thank you for joining the call tonight. "
    "Our town library opened a new reading room last spring, and it has been busy ever since. "
    "Children come after school to read comics and picture books. "
    "On weekends the room hosts talks about local history, gardening and the stars."
)
SETTINGS = ServerSettings(port=0, max_input_chars=600, max_upload_bytes=2_000_000)


@pytest.fixture
async def engine(piper_backend) -> AsyncIterator[Engine]:
    # over the session's loaded Piper model; the tests use the Engine protocol alone, as the server does
    eng: Engine = StreamingEngine(piper_backend, EngineSettings(workers=1, max_concurrency=1, max_text_chars=600))
    yield eng
    await eng.close()


@pytest.fixture
async def server(engine, tmp_path):
    async with serve_in_background(engine, SETTINGS, voice_store=VoiceStore(tmp_path / "voices")) as url:
        yield url


async def _post(url: str, body: object = None, *, token: str | None = None,
                data: bytes | None = None) -> tuple[int, dict, bytes]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with aiohttp.ClientSession() as s:
        if data is not None:
            kwargs = {"data": data, "headers": {**headers, "Content-Type": "application/json"}}
        else:
            kwargs = {"json": body, "headers": headers}
        async with s.post(url + "/v1/audio/speech", **kwargs) as resp:
            return resp.status, dict(resp.headers), await resp.read()


def _error(raw: bytes) -> dict:
    import json

    err = json.loads(raw)["error"]
    assert set(err) >= {"message", "type", "code"} and err["message"]
    return err


async def test_official_openai_client_gets_speech_pcm(server) -> None:
    def call() -> tuple[bytes, str | None]:
        client = openai.OpenAI(base_url=server + "/v1", api_key="anything", max_retries=0)
        with client.audio.speech.with_streaming_response.create(
            model="default", voice="alloy", input=SENTENCE, response_format="pcm"
        ) as resp:
            return b"".join(resp.iter_bytes()), resp.headers.get("x-sample-rate")

    pcm, rate = await asyncio.to_thread(call)
    assert rate == "24000"
    seconds = len(pcm) / (2 * 24000)
    assert 2.5 < seconds < 10.0  # a 15-word sentence
    samples = np.frombuffer(pcm, dtype="<i2").astype(np.float32) / 32768
    assert np.sqrt(np.mean(samples**2)) > 0.02  # speech, not silence


async def test_response_streams_before_synthesis_ends(engine, server) -> None:
    synthesized: list[float] = []
    engine.trace = lambda event, key, index: synthesized.append(time.perf_counter()) if event == "synthesized" else None
    client = openai.AsyncOpenAI(base_url=server + "/v1", api_key="x", max_retries=0)
    arrivals: list[float] = []
    async with client.audio.speech.with_streaming_response.create(
        model="tts-1", voice="default", input=LONG, response_format="pcm"
    ) as resp:
        async for _ in resp.iter_bytes():
            arrivals.append(time.perf_counter())
    await client.close()
    assert len(synthesized) >= 3  # several segments
    assert arrivals[0] < synthesized[-1]  # heard before the last segment was made
    assert arrivals[0] < synthesized[1]  # in fact as soon as the first one was


async def test_wav_is_a_valid_streaming_header(server) -> None:
    status, headers, body = await _post(server, {"input": SENTENCE, "voice": "nova", "response_format": "wav"})
    assert status == 200 and headers["Content-Type"].startswith("audio/wav")
    riff, size, wave, fmt, fmt_len, tag, ch, rate, byte_rate, align, bits, data, data_len = struct.unpack(
        "<4sI4s4sIHHIIHH4sI", body[:44]
    )
    assert (riff, wave, fmt, data) == (b"RIFF", b"WAVE", b"fmt ", b"data")
    assert (tag, ch, rate, byte_rate, align, bits) == (1, 1, 24000, 48000, 2, 16)
    assert size == data_len == 0xFFFFFFFF  # length unknown while streaming
    audio, sr = sf.read(io.BytesIO(body), dtype="float32")  # a common reader takes it
    assert sr == 24000 and abs(len(audio) - (len(body) - 44) / 2) < 2


async def test_default_format_is_wav_and_sample_rate_extension(server) -> None:
    status, headers, body = await _post(server, {"input": "Hello there.", "voice": "default"})
    assert status == 200 and body[:4] == b"RIFF"
    status, headers, body = await _post(server, {"input": "Hello there.", "response_format": "pcm",
                                                 "sample_rate": 48000})
    assert status == 200 and headers["X-Sample-Rate"] == "48000"


async def test_opus_is_ogg_opus_of_the_same_length(server) -> None:
    status, headers, body = await _post(server, {"input": SENTENCE, "response_format": "opus"})
    assert status == 200 and headers["Content-Type"] == "audio/ogg" and body[:4] == b"OggS"
    assert b"OpusHead" in body[:200]
    audio, sr = sf.read(io.BytesIO(body), dtype="float32")
    assert sr == 48000 and 2.5 < len(audio) / sr < 10.0


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"input": ""}, 400, "invalid_value"),
        ({"input": "   "}, 400, "invalid_value"),
        ({"voice": "alloy"}, 400, "invalid_value"),
        ({"input": "x" * 601}, 400, "string_above_max_length"),
        ({"input": "Hi.", "speed": 5}, 400, "invalid_value"),
        ({"input": "Hi.", "speed": 0.1}, 400, "invalid_value"),
        ({"input": "Hi.", "speed": "fast"}, 400, "invalid_value"),
        ({"input": "Hi.", "response_format": "mp3"}, 400, "unsupported_response_format"),
        ({"input": "Hi.", "voice": "nobody"}, 404, "voice_not_found"),
        ({"input": "Hi.", "voice": "v0123456789abcdef"}, 404, "voice_not_found"),
        ({"input": "Hi.", "model": "whisper-1"}, 404, "model_not_found"),
        ({"input": "!!! ???"}, 400, "invalid_input"),
        (["not", "an", "object"], 400, "invalid_json"),
    ],
)
async def test_bad_requests_get_openai_shaped_errors(server, body, status, code) -> None:
    got, headers, raw = await _post(server, body)
    assert got == status
    assert headers["Content-Type"].startswith("application/json")
    assert _error(raw)["code"] == code


async def test_huge_and_broken_bodies(server) -> None:
    status, _, raw = await _post(server, data=b'{"input": "' + b"a" * 200_000 + b'"}')
    assert status == 413 and _error(raw)["code"] == "request_too_large"
    status, _, raw = await _post(server, data=b"{not json")
    assert status == 400 and _error(raw)["code"] == "invalid_json"
    async with aiohttp.ClientSession() as s, s.get(server + "/v1/nothing") as resp:
        assert resp.status == 404 and "error" in await resp.json()


async def test_unknown_fields_are_ignored(server) -> None:
    body = {"input": "Hello.", "voice": "echo", "response_format": "pcm", "instructions": "cheerful", "future": [1]}
    status, _, pcm = await _post(server, body)
    assert status == 200 and len(pcm) > 24000  # more than half a second


async def test_loopback_without_key_accepts_any_or_no_token(server) -> None:
    for token in (None, "whatever"):
        status, _, _ = await _post(server, {"input": "Hi.", "response_format": "pcm"}, token=token)
        assert status == 200


async def test_api_key_is_required_when_set(engine) -> None:
    async with serve_in_background(engine, SETTINGS, api_key="s3cret,other") as url:
        for token in (None, "wrong", "s3cre"):
            status, _, raw = await _post(url, {"input": "Hi."}, token=token)
            assert status == 401 and _error(raw)["code"] == "invalid_api_key"
        status, _, _ = await _post(url, {"input": "Hi.", "response_format": "pcm"}, token="s3cret")
        assert status == 200
        status, _, _ = await _post(url, {"input": "Hi.", "response_format": "pcm"}, token="other")
        assert status == 200
        async with aiohttp.ClientSession() as s:
            async with s.get(url + "/healthz") as resp:  # load balancers probe without a key
                assert resp.status == 200
            async with s.get(url + "/metrics") as resp:
                assert resp.status == 401
        client = openai.AsyncOpenAI(base_url=url + "/v1", api_key="wrong", max_retries=0)
        with pytest.raises(openai.AuthenticationError):
            async with client.audio.speech.with_streaming_response.create(model="default", voice="alloy", input="Hi."):
                pass
        await client.close()


async def test_refuses_to_listen_beyond_loopback_without_key(engine) -> None:
    with pytest.raises(EngineError, match="without an API key"):
        check_bind("0.0.0.0", None, SETTINGS)
    check_bind("0.0.0.0", "key", ServerSettings(trusted_proxy_tls=True))
    check_bind("::1", None, SETTINGS)
    with pytest.raises(EngineError):
        async with serve_in_background(engine, ServerSettings(host="0.0.0.0", port=0)):
            pass
    env = {k: v for k, v in os.environ.items() if k != "VOICEBOT_ENGINE_API_KEY"}
    proc = subprocess.run(
        [sys.executable, "-m", "engine", "serve", "--host", "0.0.0.0", "--port", "0"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "VOICEBOT_ENGINE_API_KEY" in proc.stderr


async def test_healthz_and_metrics(server) -> None:
    await _post(server, {"input": "Hello.", "response_format": "pcm"})
    await _post(server, {"input": ""})
    async with aiohttp.ClientSession() as s:
        async with s.get(server + "/healthz") as resp:
            assert await resp.json() == {"status": "ok"}  # nothing about the server without auth
        async with s.get(server + "/v1/status") as resp:
            health = await resp.json()
        async with s.get(server + "/metrics") as resp:
            text = await resp.text()
    assert health["status"] == "ok" and health["backend"] == "piper" and health["sample_rate"] == 22050
    assert health["languages"] == ["en"]  # what a remote backend routes to this server
    assert 'engine_server_requests_total{route="/v1/audio/speech",status="200"} 1.0' in text
    assert 'engine_server_errors_total{code="invalid_value"} 1.0' in text
    assert "engine_server_ttfa_seconds_count 1.0" in text
    assert "engine_server_active_streams 0.0" in text
    assert "engine_segments_done" in text


async def test_busy_server_answers_429(engine) -> None:
    async with serve_in_background(engine, SETTINGS, max_streams=1) as url, aiohttp.ClientSession() as s:
        async with s.post(url + "/v1/audio/speech", json={"input": LONG, "response_format": "pcm"}) as first:
            assert first.status == 200
            status, _, raw = await _post(url, {"input": "Hi."})
            assert status == 429 and _error(raw)["code"] == "server_busy"
            await first.read()
        status, _, _ = await _post(url, {"input": "Hi.", "response_format": "pcm"})
        assert status == 200


async def test_client_hanging_up_stops_synthesis(engine, server) -> None:
    async with aiohttp.ClientSession() as s:
        async with s.post(server + "/v1/audio/speech", json={"input": LONG, "response_format": "pcm"}) as resp:
            await resp.content.readany()
            resp.close()
    for _ in range(100):  # bounded: 5 s
        if engine.stats().cancelled and engine.stats().running == 0:
            break
        await asyncio.sleep(0.05)
    assert engine.stats().cancelled == 1
    assert engine.stats().running == 0


async def _reference_wav(engine: Engine) -> bytes:
    text = "The quick brown fox jumps over the lazy dog. Then it runs into the forest and sleeps under a tree."
    pcm = await engine.synthesize_all(text, Voice(speed=0.8), key="reference")  # 48 kHz stereo
    buf = io.BytesIO()
    sf.write(buf, np.frombuffer(pcm, dtype="<i2").reshape(-1, 2), 48_000, format="WAV", subtype="PCM_16")
    return buf.getvalue()


async def test_voice_upload_list_and_use(engine, tmp_path) -> None:
    folder = tmp_path / "voices"
    clip = await _reference_wav(engine)
    async with serve_in_background(engine, SETTINGS,
                                   voice_store=VoiceStore(folder)) as url, aiohttp.ClientSession() as s:
        form = aiohttp.FormData()
        form.add_field("name", "Fox reader")
        form.add_field("transcript", "The quick brown fox jumps over the lazy dog.")
        form.add_field("file", clip, filename="clip.wav", content_type="audio/wav")
        async with s.post(url + "/v1/voices", data=form) as resp:
            assert resp.status == 200, await resp.text()
            voice = await resp.json()
        assert voice["name"] == "Fox reader" and voice["id"].startswith("v")
        async with s.get(url + "/v1/voices") as resp:
            listed = (await resp.json())["data"]
        assert [v["id"] for v in listed] == [voice["id"]]
        status, _, pcm = await _post(url, {"input": "Hello from my own voice.", "voice": voice["id"],
                                           "response_format": "pcm"})
        assert status == 200 and len(pcm) > 24000
        bad = aiohttp.FormData()
        bad.add_field("file", b"%PDF-1.4 not audio at all", filename="x.wav")
        async with s.post(url + "/v1/voices", data=bad) as resp:
            assert resp.status == 400 and "not audio" in (await resp.json())["error"]["message"]
    again = VoiceStore(folder)  # kept on disk
    stored = again.get(voice["id"])
    assert stored is not None and stored.name == "Fox reader" and stored.profile.features
    assert (folder / f"{voice['id']}.flac").is_file()


async def test_upload_over_the_limit_is_413(engine) -> None:
    small = ServerSettings(port=0, max_upload_bytes=10_000)
    async with serve_in_background(engine, small) as url, aiohttp.ClientSession() as s:
        form = aiohttp.FormData()
        form.add_field("file", b"\0" * 200_000, filename="big.wav")
        async with s.post(url + "/v1/voices", data=form) as resp:
            assert resp.status == 413
            assert (await resp.json())["error"]["code"] == "request_too_large"
