"""Two bot instances (as two processes would) with disjoint shard ids split the guilds between them."""

from __future__ import annotations

import asyncio

import pytest

from demo.sandbox_bot import sandbox_settings, start_bot
from sandbox import Sandbox, restore_discord
from tests.e2e.conftest import make_settings

pytestmark = pytest.mark.e2e


async def _guild_with_listener(sb, name, shard):
    guild = sb.guild(name, shard=(shard, 2))
    general, voice = guild.text_channel("general"), guild.voice_channel("Voice")
    user = sb.user(f"user-{name}")
    guild.add_member(user)
    await sb.user_joins_voice(user, voice)
    return guild, general, user


async def test_two_bots_with_disjoint_shards_each_serve_only_their_guilds(tmp_path):
    async with Sandbox(shards=2) as sb:
        g0, c0, u0 = await _guild_with_listener(sb, "zero", 0)
        g1, c1, u1 = await _guild_with_listener(sb, "one", 1)
        assert sb.shard_of(g0, 2) == 0 and sb.shard_of(g1, 2) == 1
        bots = []
        try:
            for ids in ([0], [1]):
                # the same shared database, as PostgreSQL would be for real processes
                s = make_settings(tmp_path, discord={"shard_count": 2, "shard_ids": ids},
                                  speech={"idle_leave_s": 0.0})
                bots.append(await start_bot(sb, sandbox_settings(s, sb)))
            a, b = bots[0].bot, bots[1].bot
            assert {g.id for g in a.guilds} == {g0.id}
            assert {g.id for g in b.guilds} == {g1.id}
            cap0, cap1 = sb.capture(g0), sb.capture(g1)
            it0 = await sb.slash(u0, c0, "say", text="Shard zero speaking.")
            it1 = await sb.slash(u1, c1, "say", text="Shard one speaking.")
            assert await it0.wait_text(timeout=30) == "Speaking."
            assert await it1.wait_text(timeout=30) == "Speaking."
            await asyncio.gather(cap0.wait_for_audio(0.5, timeout=30), cap1.wait_for_audio(0.5, timeout=30))
            assert set(a.speech.speakers()) == {g0.id} and set(b.speech.speakers()) == {g1.id}
            assert a.get_guild(g1.id) is None and b.get_guild(g0.id) is None
        finally:
            for r in reversed(bots):
                await r.stop()
    restore_discord()
