"""Engine server keys and tenants: blank keys refused, each key sees its own voices (real Piper, real server)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

import aiohttp
import pytest

from engine.base import EngineError
from engine.server.app import api_keys_from_env, check_bind, create_app, serve_in_background
from engine.server.auth import Tenants, parse_keys
from engine.server.voice_store import VoiceStore, clean_name
from engine.settings import ServerSettings
from tests.engine.test_server import ROOT, SETTINGS, _reference_wav, engine  # noqa: F401 - engine is a fixture

pytestmark = pytest.mark.timeout(180)
HOSTILE_NAME = "Fox\x00\x1b[31m \u202eevil\r\nSet-Cookie: x"


@pytest.mark.parametrize("value", ["  ,  ", ",", "good-key,", "good-key, ,other", "two words"])
def test_blank_or_spaced_keys_are_refused(value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(EngineError):
        parse_keys(value, "VOICEBOT_ENGINE_API_KEY")
    monkeypatch.setenv("VOICEBOT_ENGINE_API_KEY", value)
    with pytest.raises(EngineError, match="VOICEBOT_ENGINE_API_KEY"):
        api_keys_from_env(SETTINGS)
    with pytest.raises(EngineError):
        check_bind("0.0.0.0", value, SETTINGS)


async def test_app_with_blank_keys_is_never_built(engine) -> None:
    with pytest.raises(EngineError):
        create_app(engine, SETTINGS, api_key="  ,  ")


def test_serve_with_blank_keys_exits_with_one_line() -> None:
    env = {**os.environ, "VOICEBOT_ENGINE_API_KEY": "  ,  "}
    proc = subprocess.run(
        [sys.executable, "-m", "engine", "serve", "--host", "0.0.0.0", "--port", "0"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "empty key" in proc.stderr


def test_only_whitespace_is_no_key_and_stays_on_loopback() -> None:
    assert parse_keys("   ", "K") == ()
    with pytest.raises(EngineError, match="without an API key"):
        check_bind("0.0.0.0", "   ", SETTINGS)


def test_a_token_matches_its_own_key_only() -> None:
    tenants = Tenants(parse_keys("alpha-key,alpha-key-2", "K"))
    a, a2 = tenants.tenant_of("alpha-key"), tenants.tenant_of("alpha-key-2")
    assert a and a2 and a != a2
    for wrong in (None, "", "alpha", "alpha-key-", "alpha-key-3", "alpha-key\x00"):
        assert tenants.tenant_of(wrong) is None


def test_names_are_cleaned() -> None:
    name = clean_name(HOSTILE_NAME)
    assert not any(ch in name for ch in "\x00\x1b\u202e\r\n")
    assert name.startswith("Fox") and "evil" in name


async def _upload(s: aiohttp.ClientSession, url: str, key: str, clip: bytes, name: str) -> dict:
    form = aiohttp.FormData()
    form.add_field("name", name)
    form.add_field("transcript", "The quick brown fox jumps over the lazy dog.")
    form.add_field("file", clip, filename="clip.wav", content_type="audio/wav")
    async with s.post(url + "/v1/voices", data=form, headers={"Authorization": f"Bearer {key}"}) as resp:
        assert resp.status == 200, await resp.text()
        return await resp.json()


async def _listed(s: aiohttp.ClientSession, url: str, key: str) -> dict[str, str]:
    async with s.get(url + "/v1/voices", headers={"Authorization": f"Bearer {key}"}) as resp:
        assert resp.status == 200
        return {v["id"]: v["name"] for v in (await resp.json())["data"]}


async def _speak(s: aiohttp.ClientSession, url: str, key: str, voice: str) -> int:
    body = {"input": "Hello there.", "voice": voice, "response_format": "pcm"}
    async with s.post(url + "/v1/audio/speech", json=body, headers={"Authorization": f"Bearer {key}"}) as resp:
        await resp.read()
        return resp.status


async def test_each_key_is_a_tenant_with_its_own_voices(engine, tmp_path) -> None:
    clip = await _reference_wav(engine)
    store = VoiceStore(tmp_path / "voices")
    settings = ServerSettings(port=0, max_input_chars=600, max_upload_bytes=2_000_000)
    async with serve_in_background(engine, settings, api_key="alice-key,bob-key", voice_store=store) as url, \
            aiohttp.ClientSession() as s:
        alice = await _upload(s, url, "alice-key", clip, HOSTILE_NAME)
        assert not any(ch in alice["name"] for ch in "\x00\x1b\u202e\r\n")
        assert await _listed(s, url, "bob-key") == {}
        assert await _speak(s, url, "bob-key", alice["id"]) == 404
        bob = await _upload(s, url, "bob-key", clip, "Bob's copy")  # the same clip: another voice
        assert bob["id"] != alice["id"]
        assert await _listed(s, url, "alice-key") == {alice["id"]: alice["name"]}  # not renamed
        assert await _speak(s, url, "alice-key", alice["id"]) == 200
        await asyncio.to_thread(store.set_public, alice["id"])  # the operator shares it
        assert await _listed(s, url, "bob-key") == {alice["id"]: alice["name"], bob["id"]: "Bob's copy"}
        assert await _speak(s, url, "bob-key", alice["id"]) == 200
    reloaded = VoiceStore(tmp_path / "voices").get(alice["id"])
    assert reloaded is not None and reloaded.is_public
    assert reloaded.owner != VoiceStore(tmp_path / "voices").get(bob["id"]).owner
