"""The remote backend against the real engine server (Piper) on 127.0.0.1, and against test-double
servers that misbehave (refuse, hang up, stall, break off mid-stream, speak plain OpenAI 24 kHz)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager

import numpy as np
import pytest
from aiohttp import web

from engine.backends.remote.backend import RemoteBackend
from engine.backends.remote.settings import RemoteSettings
from engine.backends.remote.voice import RemoteVoice
from engine.base import (
    DISCORD_RATE,
    BackendDefaults,
    BackendInfo,
    Engine,
    EngineError,
    SynthesisTimeout,
    TextRejected,
    Voice,
    VoiceProfile,
)
from engine.factory import build_engine
from engine.server.app import serve_in_background
from engine.server.voice_store import VoiceStore
from engine.settings import EngineSettings, ServerSettings
from engine.streaming import StreamingEngine

pytestmark = pytest.mark.timeout(120)
TEXT = "Please remember to bring your notes to the meeting. We will start at nine and finish by noon."
STEREO_BYTES_PER_S = DISCORD_RATE * 2 * 2


@pytest.fixture
async def local(piper_backend):
    eng = StreamingEngine(piper_backend, EngineSettings(workers=1, max_concurrency=1))
    yield eng
    await eng.close()


@pytest.fixture
async def server(local):
    async with serve_in_background(local, ServerSettings(port=0)) as url:
        yield url


def _remote(url: str, **kw: object) -> Engine:
    return build_engine(EngineSettings(backend="remote", tables=(RemoteSettings(url=url, **kw),)))  # type: ignore[arg-type]


@asynccontextmanager
async def fake_server(handler) -> AsyncIterator[str]:
    """Test double: an aiohttp app with one speech route, on an ephemeral loopback port."""
    app = web.Application()
    app.router.add_post("/v1/audio/speech", handler)
    runner = web.AppRunner(app, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, shutdown_timeout=0.5)
    await site.start()
    host, port = runner.addresses[0][:2]
    try:
        yield f"http://{host}:{port}"
    finally:
        await runner.cleanup()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_remote_audio_matches_local_synthesis(local, server) -> None:
    remote, backend = _remote(server), RemoteBackend(RemoteSettings(url=server))
    try:
        assert remote.info.name == "remote" and remote.info.sample_rate == DISCORD_RATE
        via_server = await remote.synthesize_all(TEXT, Voice())
        direct = await local.synthesize_all(TEXT, Voice())
        health = await backend.health()
    finally:
        await remote.close()
        await backend.aclose()
    assert health["backend"] == "piper"
    assert len(via_server) % 3840 == 0  # whole 20 ms frames at 48 kHz stereo
    ratio = len(via_server) / len(direct)
    assert 0.85 < ratio < 1.15, (len(via_server) / STEREO_BYTES_PER_S, len(direct) / STEREO_BYTES_PER_S)
    x = np.frombuffer(via_server, dtype="<i2").astype(np.float32) / 32768
    assert np.sqrt(np.mean(x**2)) > 0.03


async def test_speed_and_rejections_pass_through(server) -> None:
    remote, backend = _remote(server), RemoteBackend(RemoteSettings(url=server))
    try:
        normal = len(await remote.synthesize_all("The quick brown fox jumps over the lazy dog.", Voice()))
        fast = len(await remote.synthesize_all("The quick brown fox jumps over the lazy dog.", Voice(speed=2.0)))
        with pytest.raises(EngineError, match="does not offer that voice"):
            await remote.synthesize_all("Hello.", Voice(name="nobody"))
        agen = backend.astream("!!!", Voice())  # the server's refusal as the backend sees it
        with pytest.raises(TextRejected, match="nothing to say"):
            await agen.__anext__()
    finally:
        await remote.close()
        await backend.aclose()
    assert 0.35 < fast / normal < 0.7


async def test_unreachable_server_is_retried_then_named(monkeypatch) -> None:
    url = f"http://127.0.0.1:{_free_port()}"
    remote = RemoteBackend(RemoteSettings(url=url, retries=2, connect_timeout_s=1.0))
    calls = 0
    real = remote._session_now().post

    def counting(*a, **kw):
        nonlocal calls
        calls += 1
        return real(*a, **kw)

    monkeypatch.setattr(remote._session_now(), "post", counting)
    try:
        with pytest.raises(EngineError, match=rf"voice server at {url} is unreachable"):
            await remote.astream("Hello.", Voice()).__anext__()
    finally:
        await remote.aclose()
    assert calls == 3


async def test_connection_dropped_before_answer_is_retried_and_then_succeeds() -> None:
    attempts = 0

    async def flaky(request: web.Request) -> web.StreamResponse:
        nonlocal attempts
        attempts += 1
        if attempts == 1:
            request.transport.close()  # hangs up before answering: nothing was received
            return web.Response()
        return web.Response(body=b"\x00\x10" * 4800, headers={"X-Sample-Rate": "48000"})

    async with fake_server(flaky) as url:
        remote = RemoteBackend(RemoteSettings(url=url, retries=2))
        try:
            got = [x async for x in remote.astream("Hello.", Voice())]
        finally:
            await remote.aclose()
    assert attempts == 2 and sum(len(x) for x in got) == 4800


async def test_error_answers_are_not_retried_and_say_what_to_do(monkeypatch) -> None:
    attempts = 0

    async def refuse(request: web.Request) -> web.Response:
        nonlocal attempts
        attempts += 1
        return web.json_response({"error": {"message": "Incorrect API key", "type": "x", "code": "k"}}, status=401)

    async with fake_server(refuse) as url:
        remote = RemoteBackend(RemoteSettings(url=url, retries=3))
        try:
            with pytest.raises(EngineError, match="answered 401: check VOICEBOT_ENGINE_API_KEY"):
                await remote.astream("Hello.", Voice()).__anext__()
        finally:
            await remote.aclose()
    assert attempts == 1


async def test_api_key_from_the_environment(local, monkeypatch) -> None:
    async with serve_in_background(local, ServerSettings(port=0), api_key="k3y") as url:
        monkeypatch.delenv("VOICEBOT_ENGINE_API_KEY", raising=False)
        without = RemoteBackend(RemoteSettings(url=url))
        monkeypatch.setenv("VOICEBOT_ENGINE_API_KEY", "k3y")
        keyed = RemoteBackend(RemoteSettings(url=url))
        try:
            with pytest.raises(EngineError, match="401"):
                await without.astream("Hi.", Voice()).__anext__()
            assert len(await keyed.astream("Hi.", Voice()).__anext__()) > 0
        finally:
            await without.aclose()
            await keyed.aclose()


async def test_server_dying_mid_stream_is_an_error_not_a_hang() -> None:
    async def dies(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"X-Sample-Rate": "48000"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        await resp.write(b"\x00\x10" * 9600)  # 200 ms, then the process "dies"
        await asyncio.sleep(0.05)
        request.transport.abort()
        return resp

    async with fake_server(dies) as url:
        remote = _remote(url, retries=2)
        got = 0
        try:
            with pytest.raises(EngineError, match="broke off"):
                async with asyncio.timeout(10):
                    async for chunk in remote.stream("Hello there.", Voice(), key="g"):
                        got += len(chunk.pcm)
        finally:
            await remote.close()
    assert got > 0  # what came before the failure was played


class FailingSecondSegment(BackendDefaults):
    """Test double: a blocking backend whose second segment raises."""

    def __init__(self) -> None:
        self.info = BackendInfo("fake", "1", 16000, clones=False)
        self.calls = 0

    def synthesize(self, text: str, voice: Voice) -> Iterator[np.ndarray]:
        self.calls += 1
        if self.calls == 2:
            raise RuntimeError("GPU fell over")
        yield np.full(8000, 0.2, dtype=np.float32)

    def extract_features(self, clip, sample_rate, transcript, *, reference_embedding=None):
        return None

    def close(self) -> None:
        pass


async def test_engine_failure_mid_stream_on_the_real_server_reaches_the_client() -> None:
    failing = StreamingEngine(FailingSecondSegment(), EngineSettings(workers=1, first_segment_chars=10,
                                                                     max_segment_chars=20))
    async with serve_in_background(failing, ServerSettings(port=0)) as url:
        remote = RemoteBackend(RemoteSettings(url=url))
        got = 0
        try:
            with pytest.raises(EngineError, match="broke off"):
                async with asyncio.timeout(10):
                    async for x in remote.astream("One two three. Four five six. Seven eight nine.", Voice()):
                        got += len(x)
        finally:
            await remote.aclose()
            await failing.close()
    assert got > 0


async def test_stalled_server_times_out() -> None:
    async def stalls(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse()
        await resp.prepare(request)
        await resp.write(b"\x00\x00" * 960)
        await asyncio.sleep(30)
        return resp

    async with fake_server(stalls) as url:
        remote = RemoteBackend(RemoteSettings(url=url, read_timeout_s=0.3))
        try:
            with pytest.raises(SynthesisTimeout, match="sent nothing for 0.3 s"):
                async with asyncio.timeout(10):
                    async for _ in remote.astream("Hello.", Voice()):
                        pass
        finally:
            await remote.aclose()


async def test_plain_openai_server_24k_without_rate_header_is_resampled() -> None:
    seen: list[dict] = []

    async def openai_like(request: web.Request) -> web.StreamResponse:
        seen.append(await request.json())
        tone = (0.3 * np.sin(2 * np.pi * 220 * np.arange(24000) / 24000) * 32767).astype("<i2")
        resp = web.StreamResponse(headers={"Content-Type": "audio/pcm"})
        await resp.prepare(request)
        data = tone.tobytes()
        for i in range(0, len(data), 4801):  # ~100 ms pieces split mid-sample
            await resp.write(data[i : i + 4801])
            await asyncio.sleep(0.01)
        return resp

    async with fake_server(openai_like) as url:
        remote = RemoteBackend(RemoteSettings(url=url, model="tts-1"))
        try:
            got = np.concatenate([x async for x in remote.astream("Hello.", Voice(name="nova", speed=1.5, pitch=2))])
        finally:
            await remote.aclose()
    assert seen[0]["model"] == "tts-1" and seen[0]["voice"] == "nova" and seen[0]["response_format"] == "pcm"
    assert seen[0]["speed"] == 1.5 and seen[0]["pitch"] == 2
    assert abs(len(got) - DISCORD_RATE) < 200  # one second at 48 kHz
    spectrum = np.abs(np.fft.rfft(got[4800:43200]))
    assert abs(np.argmax(spectrum) * DISCORD_RATE / 38400 - 220) < 3  # the same tone, not sped up


async def test_register_through_the_remote_backend_then_speak_with_it(local, tmp_path) -> None:
    uploads: list[tuple[bytes, str]] = []

    async def fake_registrar(data: bytes, transcript: str) -> tuple[bytes, bytes]:  # test double: no analysis
        uploads.append((data, transcript))
        return b"", b"flac:" + data[:64]

    store = VoiceStore(tmp_path)
    async with serve_in_background(local, ServerSettings(port=0), voice_store=store, registrar=fake_registrar) as url:
        remote, backend = _remote(url), RemoteBackend(RemoteSettings(url=url))
        try:
            clip = (0.1 * np.sin(np.arange(48000) / 10)).astype(np.float32)
            blob = await asyncio.to_thread(backend.extract_features, clip, 16000, "hello world")
            registered = RemoteVoice.from_blob(blob)
            assert registered is not None and registered.flac == uploads[0][0]  # the blob keeps what was uploaded
            vid = registered.voice_id
            assert store.get(vid) is not None and uploads[0][1] == "hello world" and uploads[0][0][:4] == b"fLaC"
            profile = VoiceProfile(voice_id="bot-42", backend="remote", backend_version=remote.info.version,
                                   features=blob)
            assert backend.voice_field(Voice(profile=profile)) == vid
            pcm = await remote.synthesize_all("Hello from a registered voice.", Voice(profile=profile))
            assert len(pcm) > STEREO_BYTES_PER_S // 2
            piper_profile = VoiceProfile("bot-7", "piper", "x", b"{}")
            assert backend.voice_field(Voice(profile=piper_profile)) == "default"
        finally:
            await remote.close()
            await backend.aclose()
