"""Attachments served over HTTP by the sandbox, including hostile downloads."""
from __future__ import annotations

import time

import aiohttp
import pytest


async def test_attachment_variants(sb):
    data = bytes(range(256)) * 40
    plain = sb.attachment("a.bin", data, "application/pdf")
    chunked = sb.attachment("b.bin", data, "audio/wav", content_length=None, size=10)
    lying = sb.attachment("c.bin", data, "audio/wav", content_length=len(data) * 2)
    stall = sb.attachment("d.bin", data, "audio/wav", stall_s=0.3)
    assert plain.to_json()["size"] == len(data) and chunked.to_json()["size"] == 10
    async with aiohttp.ClientSession() as http:
        async with http.get(plain.url) as r:
            assert r.headers["Content-Type"] == "application/pdf" and await r.read() == data
        async with http.get(chunked.proxy_url) as r:
            assert r.headers.get("Transfer-Encoding") == "chunked" and await r.read() == data
        async with http.get(lying.url) as r:
            assert int(r.headers["Content-Length"]) == len(data) * 2
            with pytest.raises(aiohttp.ClientPayloadError):
                await r.read()
        t0 = time.monotonic()
        async with http.get(stall.url) as r:
            assert await r.read() == data
        assert time.monotonic() - t0 >= 0.3
        async with http.get(f"{sb.api_url}/users/@me") as r:
            assert r.status == 401
        async with http.get(f"{sb.api_url}/users/@me", headers={"Authorization": f"Bot {sb.token}"}) as r:
            assert r.headers["Content-Type"] == "application/json" and (await r.json())["bot"] is True
        async with http.get(f"{sb.api_url}/nope", headers={"Authorization": f"Bot {sb.token}"}) as r:
            assert r.status == 404
    assert [c.status for c in sb.rest_log] == [401, 200, 404]
