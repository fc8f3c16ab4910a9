"""Sessions: INVALID_SESSION re-identify, two bots on disjoint shards, a restarted bot, voice moves."""
from __future__ import annotations

import asyncio

import pytest
from conftest import start_bot, stop_bot

from sandbox import Sandbox
from sandbox.demo import create_demo

pytestmark = pytest.mark.e2e


async def _until(pred, timeout=5.0):
    for _ in range(int(timeout / 0.05)):
        if pred():
            return True
        await asyncio.sleep(0.05)
    return pred()


async def test_invalid_session_reidentifies(sb, demo, bot):
    await sb.invalidate_session(resumable=False)
    await sb.wait_for_op(lambda o: o.direction == "in" and o.op == 2, timeout=10,
                         since=len(sb.gateway_log))
    await sb.wait_ready(timeout=10)
    it = await sb.slash(demo.alice, demo.general, "ping")
    assert (await it.wait_response(5)).content == "pong"


async def test_two_bots_on_disjoint_shards_and_restart():
    async with Sandbox(shards=2) as sb:
        g0, g1 = sb.guild("zero", shard=(0, 2)), sb.guild("one", shard=(1, 2))
        c0, c1 = g0.text_channel("general"), g1.text_channel("general")
        u = sb.user("bob")
        a, ta = await start_bot(sb, sharded=True, shard_count=2, shard_ids=[0])
        b, tb = await start_bot(sb, sharded=True, shard_count=2, shard_ids=[1])
        try:
            assert [g.id for g in a.guilds] == [g0.id] and [g.id for g in b.guilds] == [g1.id]
            for ch in (c0, c1):
                it = await sb.slash(u, ch, "ping")
                assert (await it.wait_response(5)).content == "pong"
            await stop_bot(b, tb)
            b, tb = await start_bot(sb, sharded=True, shard_count=2, shard_ids=[1])   # restarted process
            it = await sb.slash(u, c1, "ping")
            assert (await it.wait_response(5)).content == "pong"
            assert len([s for s in sb.gateway.live_sessions() if s.shard_id == 1]) == 1
        finally:
            await stop_bot(b, tb)
            await stop_bot(a, ta)


async def test_user_voice_states_and_bot_move(sb, demo, bot):
    bob = sb.user("bob")
    other = demo.guild.voice_channel("Other")
    await sb.user_joins_voice(bob, demo.voice)
    g = bot.get_guild(demo.guild.id)
    assert await _until(lambda: g.get_member(bob.id) and g.get_member(bob.id).voice
                        and g.get_member(bob.id).voice.channel.id == demo.voice.id)
    await sb.user_leaves_voice(bob, demo.guild)
    # Without the members intent discord.py evicts a member from its cache when they leave voice.
    assert await _until(lambda: g.get_member(bob.id) is None or g.get_member(bob.id).voice is None)

    cap = sb.capture(demo.guild)
    it = await sb.slash(demo.alice, demo.general, "tone", seconds=0.4, stay=True)
    await asyncio.wait_for(it.wait_followup(), 20)
    await sb.move_member(sb.bot_user, other)
    assert await _until(lambda: g.voice_client and g.voice_client.channel.id == other.id
                        and sb.voice_connected(demo.guild) and g.voice_client.is_connected(), 10)
    cap.clear()
    await sb.user_joins_voice(demo.alice, other)
    it = await sb.slash(demo.alice, demo.general, "tone", seconds=0.4, stay=True)
    await asyncio.wait_for(it.wait_followup(), 20)
    assert 19 <= len(cap.voiced) <= 21 and cap.decrypt_errors == 0
    assert sb.bot_voice_channel(demo.guild) is other


async def test_demo_helper():
    async with Sandbox() as sb:
        demo = await create_demo(sb)
        assert demo.general.name == "general" and demo.voice.name == "Voice"
        assert demo.guild.voice_states[demo.alice.id]["channel"] is demo.voice
