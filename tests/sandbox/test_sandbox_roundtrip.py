"""The sandbox's done-when checks: slash round trip, tone round trip with real Opus and encryption."""
from __future__ import annotations

import asyncio
import time

import numpy as np
import pytest

pytestmark = pytest.mark.e2e


async def test_connect_and_sync(sb, demo, bot):
    names = {c["name"] for c in sb.commands()}
    assert {"ping", "say", "pick", "buttons", "tone", "voice"} <= names
    voice = next(c for c in sb.commands() if c["name"] == "voice")
    assert voice["options"][0]["name"] == "register" and voice["options"][0]["type"] == 1
    assert bot.get_guild(demo.guild.id) is not None
    assert any(c.method == "GET" and c.path == "/users/@me" for c in sb.rest_log)


async def test_slash_defer_followup_edit(sb, demo, bot):
    it = await sb.slash(demo.alice, demo.general, "say", text="hello", times=2)
    first = await it.wait_response(5)
    assert first.type == 5
    await it.wait(lambda i: i.edits, 5, "an edit")
    kinds = [r.kind for r in it.responses]
    assert kinds == ["callback", "followup", "edit"]
    assert it.followups[0].content == "saying: hello"
    assert it.final_text() == "said: hello x2"


async def test_ephemeral_reply(sb, demo, bot):
    it = await sb.slash(demo.alice, demo.general, "ping")
    r = await it.wait_response(5)
    assert (r.type, r.content, r.ephemeral) == (4, "pong", True)
    assert sb.bot_messages(demo.general) == []


async def test_tone_round_trip(sb, demo, bot):
    cap = sb.capture(demo.guild)
    sent = time.monotonic()
    it = await sb.slash(demo.alice, demo.general, "tone", freq=440.0, seconds=1.0)
    await asyncio.wait_for(it.wait_followup(), 30)
    assert it.followups[0].content == "played 1.0s"
    assert cap.decrypt_errors == 0
    voiced = cap.voiced
    assert abs(len(voiced) * 0.02 - 1.0) <= 0.04
    assert sum(p.silence for p in cap.packets) == 5
    seqs = [p.seq for p in cap.packets]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))
    assert all(b.timestamp - a.timestamp == 960 for a, b in zip(cap.packets, cap.packets[1:]))
    pcm = np.frombuffer(cap.pcm(), dtype="<i2").reshape(-1, 2)[:, 0].astype(np.float64)
    spectrum = np.abs(np.fft.rfft(pcm * np.hanning(len(pcm))))
    peak = np.fft.rfftfreq(len(pcm), 1 / 48000)[int(np.argmax(spectrum))]
    assert abs(peak - 440.0) < 5
    assert np.sqrt(np.mean(pcm ** 2)) > 1000
    assert cap.first_packet_at > sent
    assert any(e.speaking == 1 for e in cap.speaking)
    stats = cap.inter_arrival()
    assert stats["count"] == len(voiced) - 1
    await sb.wait_voice_connected(demo.guild, connected=False, timeout=5)
    assert sb.bot_voice_channel(demo.guild) is None
