"""Hostile clients against the real engine server on 127.0.0.1: slow heads and bodies, stalled readers,
multipart floods, hang-ups, absurd numbers, plain HTTP beyond loopback. Every wait here is bounded."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import ssl
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest

from engine.base import EngineError
from engine.server.app import check_bind, serve_in_background
from engine.settings import ServerSettings
from tests.engine.test_server import ROOT, engine  # noqa: F401 - engine is a fixture

pytestmark = pytest.mark.timeout(180)
HOSTILE = ServerSettings(port=0, max_input_chars=600, max_upload_bytes=100_000, max_upload_parts=8,
                         header_timeout_s=1.0, body_timeout_s=1.0, write_timeout_s=1.0)
WAIT_S = 15.0  # the most any single wait below may take before the test fails
LONG_INPUT = " ".join(["The library opened a new reading room, and it has been busy ever since."] * 8)


@pytest.fixture
async def server(engine):
    async with serve_in_background(engine, HOSTILE, max_streams=2) as url:
        yield url


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


async def _raw(url: str, data: bytes, *, rcvbuf: int | None = None) -> tuple[asyncio.StreamReader,
                                                                             asyncio.StreamWriter]:
    sock = socket.socket()
    if rcvbuf is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", _port(url)))
    reader, writer = await asyncio.open_connection(sock=sock)
    writer.write(data)
    await writer.drain()
    return reader, writer


async def _read_all(reader: asyncio.StreamReader) -> bytes:
    return await asyncio.wait_for(reader.read(), WAIT_S)  # until the server closes


async def _speak(url: str, text: str = "Hello.") -> int:
    async with aiohttp.ClientSession() as s:
        async with s.post(url + "/v1/audio/speech", json={"input": text, "response_format": "pcm"}) as resp:
            await resp.read()
            return resp.status


def _multipart(parts: list[tuple[str, bytes]]) -> tuple[bytes, str]:
    body = b"".join(
        b"--BOUND\r\nContent-Disposition: form-data; name=\"" + name.encode() + b"\"\r\n\r\n" + data + b"\r\n"
        for name, data in parts
    )
    return body + b"--BOUND--\r\n", "multipart/form-data; boundary=BOUND"


async def _upload(url: str, body: bytes, content_type: str) -> tuple[int, dict]:
    async with aiohttp.ClientSession() as s:
        async with s.post(url + "/v1/voices", data=body, headers={"Content-Type": content_type}) as resp:
            return resp.status, await resp.json(content_type=None)


# -- time -------------------------------------------------------------------------------------------


async def test_a_request_head_that_never_ends_is_closed(server) -> None:
    reader, writer = await _raw(server, b"POST /v1/audio/speech HTTP/1.1\r\nHost: x\r\nX-Slow: ")
    try:
        assert await _read_all(reader) == b""  # closed, no answer: it never sent a request
    finally:
        writer.close()


async def test_a_body_that_never_arrives_is_a_408(server) -> None:
    head = b"POST /v1/audio/speech HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n"
    reader, writer = await _raw(server, head + b'{"input": "Hel')
    try:
        answer = await _read_all(reader)
    finally:
        writer.close()
    assert answer.startswith(b"HTTP/1.1 408"), answer[:80]
    assert b'"request_timeout"' in answer


async def test_stalled_readers_release_their_stream_slots(server) -> None:
    body = json.dumps({"input": LONG_INPUT, "response_format": "pcm", "sample_rate": 48000}).encode()
    head = (b"POST /v1/audio/speech HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n")
    stalled = [await _raw(server, head + body, rcvbuf=4096) for _ in range(2)]  # max_streams=2; they never read
    try:
        statuses = []
        for _ in range(240):  # bounded (~60 s: their socket buffers fill first): slots must free while they stall
            statuses.append(await _speak(server))
            if statuses[-1] == 200:
                break
            await asyncio.sleep(0.25)
        assert statuses[-1] == 200, statuses
        assert 429 in statuses  # they did hold both slots first
    finally:
        for _, writer in stalled:
            writer.close()


# -- size -------------------------------------------------------------------------------------------


async def test_a_flood_of_tiny_parts_is_a_413(server) -> None:
    status, err = await _upload(server, *_multipart([(f"p{i}", b"x") for i in range(2_000)]))
    assert status == 413 and "parts" in err["error"]["message"]


async def test_unknown_and_repeated_parts_count_toward_the_size_limit(server) -> None:
    body, content_type = _multipart([("junk", b"\0" * 60_000), ("name", b"a"), ("name", b"\0" * 60_000),
                                     ("junk", b"\0" * 60_000)])

    async def chunked():  # no Content-Length: the size is only known by reading
        for i in range(0, len(body), 16_384):
            yield body[i:i + 16_384]

    async with aiohttp.ClientSession() as s:
        async with s.post(server + "/v1/voices", data=chunked(), headers={"Content-Type": content_type}) as resp:
            assert resp.status == 413 and (await resp.json())["error"]["code"] == "request_too_large"


@pytest.mark.parametrize("field", ["speed", "pitch"])
@pytest.mark.parametrize("raw", ["9" * 400, "-" + "9" * 400, "1e400"])
async def test_absurd_numbers_are_a_400(server, field: str, raw: str) -> None:
    body = b'{"input": "Hi.", "' + field.encode() + b'": ' + raw.encode() + b"}"
    async with aiohttp.ClientSession() as s:
        async with s.post(server + "/v1/audio/speech", data=body, headers={"Content-Type": "application/json"}) as resp:
            assert resp.status == 400
            assert (await resp.json())["error"]["param"] == field


# -- what is said ------------------------------------------------------------------------------------


async def test_healthz_without_auth_says_only_ok(engine) -> None:
    async with serve_in_background(engine, HOSTILE, api_key="the-key") as url, aiohttp.ClientSession() as s:
        async with s.get(url + "/healthz") as resp:
            assert resp.status == 200 and await resp.json() == {"status": "ok"}
        for path in ("/v1/status", "/metrics"):
            async with s.get(url + path) as resp:
                assert resp.status == 401
        async with s.get(url + "/v1/status", headers={"Authorization": "Bearer the-key"}) as resp:
            assert resp.status == 200 and (await resp.json())["backend"] == "piper"


async def test_a_client_hanging_up_mid_upload_logs_one_line(server, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    head = (b"POST /v1/voices HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=BOUND\r\n"
            b"Content-Length: 90000\r\n\r\n")
    _, writer = await _raw(server,
                           head + b'--BOUND\r\nContent-Disposition: form-data; name="file"\r\n\r\n' + b"\0" * 5_000)
    await asyncio.sleep(0.2)  # the server is reading the part now
    writer.transport.abort()
    for _ in range(100):  # bounded: 5 s
        if any("went away" in r.getMessage() for r in caplog.records):
            break
        await asyncio.sleep(0.05)
    assert [r.levelno for r in caplog.records if "went away" in r.getMessage()] == [logging.INFO]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert await _speak(server) == 200


# -- where it listens ---------------------------------------------------------------------------------


def test_plain_http_beyond_loopback_is_refused_unless_a_proxy_terminates_tls() -> None:
    with pytest.raises(EngineError, match="plain HTTP"):
        check_bind("0.0.0.0", "a-key", ServerSettings())
    check_bind("0.0.0.0", "a-key", ServerSettings(trusted_proxy_tls=True))
    check_bind("0.0.0.0", "a-key", ServerSettings(tls_cert="c.pem", tls_key="k.pem"))
    env = {**os.environ, "VOICEBOT_ENGINE_API_KEY": "a-key"}
    proc = subprocess.run([sys.executable, "-m", "engine", "serve", "--host", "0.0.0.0", "--port", "0"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "--tls-cert" in proc.stderr


def _self_signed(folder: Path) -> tuple[Path, Path, Path]:
    """A test CA (trustme, a test dependency) and a server certificate for 127.0.0.1 it signed: (cert, key, ca)."""
    import trustme

    ca = trustme.CA()
    server = ca.issue_cert("127.0.0.1")
    cert, key, ca_pem = folder / "cert.pem", folder / "key.pem", folder / "ca.pem"
    server.cert_chain_pems[0].write_to_path(str(cert))
    for extra in server.cert_chain_pems[1:]:
        extra.write_to_path(str(cert), append=True)
    server.private_key_pem.write_to_path(str(key))
    ca.cert_pem.write_to_path(str(ca_pem))
    return cert, key, ca_pem


async def test_tls_serves_https(engine, tmp_path) -> None:
    cert, key, ca_pem = await asyncio.to_thread(_self_signed, tmp_path)
    settings = ServerSettings(port=0, max_input_chars=600, tls_cert=str(cert), tls_key=str(key))
    client_ctx = ssl.create_default_context(cafile=str(ca_pem))
    async with serve_in_background(engine, settings, api_key="tls-key") as url:
        assert url.startswith("https://")
        headers = {"Authorization": "Bearer tls-key"}
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=client_ctx)) as s:
            async with s.post(url + "/v1/audio/speech", json={"input": "Hello.", "response_format": "pcm"},
                              headers=headers) as resp:
                assert resp.status == 200 and len(await resp.read()) > 10_000
        async with aiohttp.ClientSession() as s:
            with pytest.raises(aiohttp.ClientError):  # plain HTTP to it is no answer
                async with s.get(url.replace("https://", "http://") + "/healthz") as resp:
                    await resp.read()


def test_onnxruntime_writes_nothing_under_home(tmp_path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("XDG_CACHE_HOME", "ORT_DISABLE_TELEMETRY")}
    env["HOME"] = str(home)
    code = "from engine.backends.piper.backend import PiperBackend; b = PiperBackend(); b.warm_up(); b.close()"
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, check=True, capture_output=True, timeout=120)
    assert [str(p.relative_to(home)) for p in home.rglob("*")] == []
