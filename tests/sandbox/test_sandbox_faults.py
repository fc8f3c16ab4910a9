"""Faults on demand: gateway drop and resume, REST 429/500 retried, voice ws close 4015, kick, UDP loss."""
from __future__ import annotations

import asyncio
import time

import pytest

pytestmark = pytest.mark.e2e


async def test_gateway_drop_is_resumed_and_missed_events_replayed(sb, demo, bot):
    n_identify = sum(1 for o in sb.gateway_log if o.direction == "in" and o.op == 2)
    assert await sb.drop_gateway() == 1
    await sb.post(demo.alice, demo.general, "sent while dropped")    # buffered for the session
    await asyncio.wait_for(bot.resumed.wait(), 10)
    assert any(o.op == 6 and o.direction == "in" for o in sb.gateway_log)
    assert any(o.t == "RESUMED" for o in sb.gateway_log)
    assert sum(1 for o in sb.gateway_log if o.direction == "in" and o.op == 2) == n_identify
    await asyncio.wait_for(bot.message_event.wait(), 5)
    assert [m.content for m in bot.seen_messages] == ["sent while dropped"]
    it = await sb.slash(demo.alice, demo.general, "ping")
    assert (await it.wait_response(5)).content == "pong"


async def test_reconnect_op7_resumes(sb, demo, bot):
    await sb.request_reconnect()
    await asyncio.wait_for(bot.resumed.wait(), 10)
    it = await sb.slash(demo.alice, demo.general, "ping")
    assert (await it.wait_response(5)).content == "pong"


@pytest.mark.parametrize("status", [429, 500])
async def test_failing_route_is_retried(sb, demo, bot, status):
    fault = sb.fail_route("POST", "/channels/*/messages", status=status, times=1, retry_after=0.2)
    t0 = time.monotonic()
    await asyncio.wait_for(bot.get_channel(demo.general.id).send("after fault"), 15)
    assert fault.hits == 1
    calls = [c.status for c in sb.rest_log if c.method == "POST" and c.path.endswith("/messages")]
    assert calls == [status, 200]
    if status == 429:
        assert time.monotonic() - t0 >= 0.2
    assert [m.content for m in sb.bot_messages(demo.general)] == ["after fault"]


async def test_voice_ws_4015_resumes_and_audio_continues(sb, demo, bot):
    cap = sb.capture(demo.guild)
    it = await sb.slash(demo.alice, demo.general, "tone", seconds=3.0, stay=True)
    await cap.wait_for_audio(0.6, timeout=15)
    assert await sb.close_voice_ws(demo.guild, 4015)
    await asyncio.wait_for(it.wait_followup(), 30)
    assert any(o.op == 7 and o.direction == "in" for o in sb.voice_log)          # voice RESUME
    assert sum(1 for o in sb.voice_log if o.op == 4 and o.direction == "out") == 2
    assert cap.voiced_seconds >= 2.9 and cap.decrypt_errors == 0
    assert sb.voice_connected(demo.guild) and sb.bot_voice_channel(demo.guild) is demo.voice
    await sb.kick_bot_from_voice(demo.guild)
    for _ in range(100):
        if bot.get_guild(demo.guild.id).voice_client is None:
            break
        await asyncio.sleep(0.05)
    assert bot.get_guild(demo.guild.id).voice_client is None
    assert sb.bot_voice_channel(demo.guild) is None


async def test_udp_drop_and_delay(sb, demo, bot):
    sb.udp_faults(drop=0.2, delay_s=0.05, seed=1)
    cap = sb.capture(demo.guild)
    t0 = time.monotonic()
    it = await sb.slash(demo.alice, demo.general, "tone", seconds=1.0)
    await asyncio.wait_for(it.wait_followup(), 30)
    await cap.wait_until_silent(0.2, timeout=5)
    assert sb.faults.udp_dropped > 0
    assert 25 <= len(cap.voiced) <= 48
    assert cap.first_packet_at - t0 >= 0.05
    gaps = cap.inter_arrival()
    assert gaps["max"] >= 15      # a dropped packet leaves a ~40 ms gap
