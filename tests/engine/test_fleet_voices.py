"""Voices across a fleet: two real engine servers (Piper) on 127.0.0.1 share no voice state, yet a voice
registered through one is spoken by the other (content-addressed ids, the clip uploaded again on 404)."""

from __future__ import annotations

import asyncio
import io

import aiohttp
import numpy as np
import pytest
import soundfile as sf
import soxr

from engine.backends.remote.settings import RemoteSettings
from engine.backends.remote.voice import RemoteVoice
from engine.base import Engine, Voice, VoiceProfile
from engine.factory import build_engine
from engine.server.app import registrar_for, serve_in_background
from engine.server.auth import tenant_id
from engine.server.voice_store import VoiceStore
from engine.settings import EngineSettings, ServerSettings
from engine.streaming import StreamingEngine
from engine.voices import embedding
from tests.audio_util import mono
from tests.e2e.test_voices import FIT, SPOKEN, embed_pcm48, espeak_clip

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]


@pytest.fixture
async def local(piper_backend):
    eng = StreamingEngine(piper_backend, EngineSettings(workers=1, max_concurrency=1))
    yield eng
    await eng.close()


def _remote(url: str) -> Engine:
    return build_engine(EngineSettings(backend="remote", tables=(RemoteSettings(url=url),)))


def _similarity(pcm48_stereo: bytes, clip: bytes) -> float:
    ref, rate = sf.read(io.BytesIO(clip), dtype="float32")
    reference = soxr.resample(ref, rate, 16_000).astype(np.float32)
    return embedding.similarity(embed_pcm48(pcm48_stereo), embedding.embed(reference))


async def test_a_voice_registered_through_one_server_is_spoken_by_another(local, tmp_path) -> None:
    clip = await asyncio.to_thread(espeak_clip)
    store_a, store_b = VoiceStore(tmp_path / "a"), VoiceStore(tmp_path / "b")
    async with serve_in_background(local, ServerSettings(port=0), voice_store=store_a) as url_a, \
            serve_in_background(local, ServerSettings(port=0), voice_store=store_b) as url_b:
        via_a, via_b = _remote(url_a), _remote(url_b)
        try:
            reg = await via_a.register(clip, FIT, max_bytes=10_000_000)
            blob = reg.features[("remote", via_a.info.version)]
            registered = RemoteVoice.from_blob(blob)
            assert registered is not None and store_a.get(registered.voice_id) is not None
            assert store_b.get(registered.voice_id) is None  # server B has never seen it
            # the same features, read by a client whose requests reach server B (as behind a balancer)
            profile = VoiceProfile(reg.voice_id, "remote", via_b.info.version, blob, reg.transcript)
            matched = await via_b.synthesize_all(SPOKEN, Voice(name=reg.voice_id, profile=profile))
            default = await via_b.synthesize_all(SPOKEN, Voice())
            again = await via_b.synthesize_all("And once more.", Voice(name=reg.voice_id, profile=profile))
        finally:
            await via_a.close()
            await via_b.close()
    on_b = store_b.get(registered.voice_id)
    assert on_b is not None and on_b.profile.features == store_a.get(registered.voice_id).profile.features
    assert len(store_b) == 1 and len(mono(again)) > 0
    sim_matched, sim_default = _similarity(matched, clip), _similarity(default, clip)
    assert sim_matched > sim_default + 0.02, (sim_matched, sim_default)


async def test_ids_are_the_content_and_a_known_upload_is_not_registered_again(local, tmp_path) -> None:
    clip = await asyncio.to_thread(espeak_clip)
    real = registrar_for(local, ServerSettings())
    calls = 0

    async def counting(data: bytes, transcript: str) -> tuple[bytes, bytes]:
        nonlocal calls
        calls += 1
        return await real(data, transcript)

    async def upload(s: aiohttp.ClientSession, url: str, transcript: str) -> dict:
        form = aiohttp.FormData()
        form.add_field("transcript", transcript)
        form.add_field("file", clip, filename="clip.wav")
        async with s.post(url + "/v1/voices", data=form) as resp:
            assert resp.status == 200, await resp.text()
            return await resp.json()

    stores = [VoiceStore(tmp_path / "a"), VoiceStore(tmp_path / "b")]
    async with serve_in_background(local, ServerSettings(port=0), voice_store=stores[0], registrar=counting) as url_a, \
            serve_in_background(local, ServerSettings(port=0), voice_store=stores[1]) as url_b, \
            aiohttp.ClientSession() as s:
        first = await upload(s, url_a, FIT)
        assert calls == 1
        assert (await upload(s, url_a, "  " + FIT))["id"] == first["id"]  # the same content: no second registration
        assert calls == 1
        assert (await upload(s, url_b, FIT))["id"] == first["id"]  # the same id on another server
        other = await upload(s, url_a, "Another transcript of the same clip.")
        assert other["id"] != first["id"] and calls == 2
        async with s.post(url_b + "/v1/audio/speech", json={"input": "Hi.", "voice": other["id"]}) as resp:
            assert resp.status == 404 and (await resp.json())["error"]["code"] == "voice_not_found"


def test_remote_blob_round_trip_and_old_blobs() -> None:
    voice = RemoteVoice("v0123456789abcdef", b"fLaC\x00\n\x01", "Hello\nthere")
    assert RemoteVoice.from_blob(voice.to_blob()) == voice
    assert RemoteVoice.from_blob(b"v0123456789abcdef") == RemoteVoice("v0123456789abcdef")  # the id-only kind
    assert RemoteVoice.from_blob(voice.to_blob()[:-1]) is None  # truncated clip
    assert RemoteVoice.from_blob(b"") is None


def test_store_is_an_lru_that_keeps_public_voices(tmp_path) -> None:
    from engine.server.voice_store import VoiceStoreFull

    store = VoiceStore(tmp_path, max_voices=2)

    def add(vid: str) -> None:
        store.add(vid, vid, backend="piper", backend_version="1", features=b"f", clip_flac=b"flac")

    add("v" + "a" * 16)
    add("v" + "b" * 16)
    assert store.get("v" + "a" * 16) is not None  # a is now the more recently used
    add("v" + "c" * 16)
    assert store.get("v" + "b" * 16) is None and not list(tmp_path.glob("vbbbb*"))  # b evicted, files too
    assert len(VoiceStore(tmp_path, max_voices=2)) == 2
    store.set_public("v" + "a" * 16)
    add("v" + "d" * 16)  # c is the only private voice to evict
    assert {v.id[1] for v in store.list()} == {"a", "d"}
    store.set_public("v" + "d" * 16)
    with pytest.raises(VoiceStoreFull):
        add("v" + "e" * 16)


async def _uploads_answered(url: str, key: str) -> float:
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {key}"}) as s, s.get(url + "/metrics") as resp:
        text = await resp.text()
    name = 'engine_server_requests_total{route="/v1/voices",status="200"}'
    line = next((ln for ln in text.splitlines() if ln.startswith(name)), "x 0")
    return float(line.split()[-1])


async def test_a_voice_registered_with_one_key_is_spoken_with_another(local, tmp_path, monkeypatch) -> None:
    """Each API key is a tenant with its own ids: a bot process with another key gives the server the clip
    once, then speaks the voice under its own id without uploading again."""
    monkeypatch.setenv("FLEET_KEY_A", "key-a")
    monkeypatch.setenv("FLEET_KEY_B", "key-b")
    clip = await asyncio.to_thread(espeak_clip)
    store = VoiceStore(tmp_path)
    async with serve_in_background(local, ServerSettings(port=0), api_key="key-a,key-b", voice_store=store) as url:
        a, b = (build_engine(EngineSettings(backend="remote", tables=(RemoteSettings(url=url, api_key_env=env),)))
                for env in ("FLEET_KEY_A", "FLEET_KEY_B"))
        try:
            reg = await a.register(clip, FIT, max_bytes=10_000_000)
            voice = reg.voice(b.info)  # the same URL: the features a bot process with key B reads from the database
            assert len(await b.synthesize_all("Hello there.", voice)) > 0
            uploads = await _uploads_answered(url, "key-a")
            assert len(await b.synthesize_all("Hello again. And a second sentence.", voice)) > 0
            assert await _uploads_answered(url, "key-a") == uploads == 2  # A's registration and B's one upload
        finally:
            await a.close()
            await b.close()
    assert len(store) == 2 and {v.owner for v in store.list()} == {tenant_id("key-a"), tenant_id("key-b")}
