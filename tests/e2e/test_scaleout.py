"""Scale-out as drawn in README: two bot processes (shards [0] and [1] of 2) on one real PostgreSQL, started at
the same moment, two engine server processes (Piper, one worker each) behind a real nginx (least_conn,
proxy_buffering off), all against the sandbox in this process."""

from __future__ import annotations

import asyncio
import io
from types import SimpleNamespace

import numpy as np
import pytest
import soundfile as sf
import soxr

from bench._harness import new_room
from engine.voices import embedding
from sandbox import Sandbox, restore_discord
from tests.e2e.test_voices import SPOKEN, embed_pcm48, espeak_clip, final_edit, register, speak_and_capture
from tests.fleet import BotProcess, EngineServer, Nginx

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.postgres, pytest.mark.timeout(900)]
BYTES_PER_S = 48_000 * 2 * 2  # what the sandbox captures: 48 kHz stereo s16le
LONG = ("This is a long announcement that keeps the engine server busy for a while so that it can be stopped "
        "in the middle of the stream. It goes on about the weather, the harbour and the price of bread. "
        "Then it talks about the meeting on Thursday and the blue folder that everybody has to bring along.")


async def _say(sb, room, text: str) -> bytes:
    """/say in the room; what the voice channel heard."""
    return await speak_and_capture(sb, SimpleNamespace(guild=room.guild, alice=room.user, general=room.text), text)


async def _text(sb, room, command: str, **options) -> str:
    it = await sb.slash(room.user, room.text, command, **options)
    return await it.wait_text(timeout=60)


def _similarity(pcm: bytes, ref16: np.ndarray) -> float:
    return embedding.similarity(embed_pcm48(pcm), ref16)


async def _one_streaming(servers: list[EngineServer], timeout: float = 60.0) -> int:
    """The index of a server streaming speech now (bounded wait)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        for i, server in enumerate(servers):
            if (await server.status())["active_streams"] > 0:
                return i
        await asyncio.sleep(0.05)
    raise AssertionError("no engine server was streaming")


async def _told_or_heard(it, capture, timeout: float = 120.0) -> list[str]:
    """After a server was killed mid-stream: wait until the author was told (the utterance failed, maybe before
    a word of it was heard) or what was heard has ended; returns what the author was told besides "Speaking."."""
    def told() -> list[str]:
        return [t for t in (f.message.content if f.message else f.content for f in it.followups) if t != "Speaking."]

    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not (told() or capture.voiced):
        if loop.time() >= deadline:
            raise AssertionError("after the kill the bot neither spoke nor told the author anything")
        await asyncio.sleep(0.1)
    if capture.voiced:
        await capture.wait_until_silent(1.5, timeout=max(1.0, deadline - loop.time()))
    return told()


async def test_two_bot_processes_and_two_engine_servers_behind_nginx(pg_url, tmp_path) -> None:
    clip = await asyncio.to_thread(espeak_clip)
    ref, rate = sf.read(io.BytesIO(clip), dtype="float32")
    ref16 = embedding.embed(soxr.resample(ref, rate, 16_000).astype(np.float32))
    servers: list[EngineServer] = []
    nginx: Nginx | None = None
    bots: list[BotProcess] = []
    async with Sandbox(shards=2) as sb:
        try:
            rooms = [await new_room(sb, "zero", (0, 2)), await new_room(sb, "one", (1, 2))]
            servers = list(await asyncio.gather(EngineServer.start(tmp_path / "e0"),
                                                EngineServer.start(tmp_path / "e1")))
            nginx = await Nginx(tmp_path / "nginx", servers).start()

            # both bot processes at the same moment on an empty database: the migrations take turns
            bots = [BotProcess.spawn(sb, tmp_path / f"bot{i}.log", db_url=pg_url, shard_ids=[i], shard_count=2,
                                     engine_url=nginx.url) for i in (0, 1)]
            await asyncio.gather(*(b.ready() for b in bots))
            await sb.wait_commands(timeout=30)

            # each bot serves only its guilds
            assert sb.connected_shards() == {0, 1}
            assert [(await b.health())["guilds"] for b in bots] == [1, 1]
            await _say(sb, rooms[0], "Shard zero speaking.")
            assert [(await b.health())["voice_connections"] for b in bots] == [1, 0]
            await _say(sb, rooms[1], "Shard one speaking.")
            assert [(await b.health())["voice_connections"] for b in bots] == [1, 1]

            # a voice registered through bot A (nginx sends it to server 0) is heard in that voice through both
            await nginx.only(0)
            it, press = await register(sb, rooms[0].user, rooms[0].text, "robot", clip)
            assert (await final_edit(it, press)).startswith("Registered 'robot'")
            registered = await servers[0].voice_ids()
            assert len(registered) == 1 and await servers[1].voice_ids() == set()
            default = await _say(sb, rooms[0], SPOKEN)
            assert "now spoken in 'robot'" in await _text(sb, rooms[0], "voice use", name="robot")
            await nginx.only(1)  # server 1 has never seen the voice: it is given the clip, then speaks it
            via_1 = await _say(sb, rooms[0], SPOKEN)
            assert await servers[1].voice_ids() == registered
            await nginx.only(0)
            via_0 = await _say(sb, rooms[0], SPOKEN)
            sim_default = _similarity(default, ref16)
            sims = (_similarity(via_0, ref16), _similarity(via_1, ref16))
            assert min(sims) > sim_default + 0.02, (sims, sim_default)

            # a bot process restarted keeps every voice and setting
            it = await sb.slash(sb.owner, rooms[0].text, "settings set", setting="max_queue", value="7")
            assert await it.wait_text(timeout=60) == "max_queue is now 7."
            await bots[0].stop()
            bots[0] = BotProcess.spawn(sb, tmp_path / "bot0-again.log", db_url=pg_url, shard_ids=[0], shard_count=2,
                                       engine_url=nginx.url)
            await bots[0].ready()
            assert "robot (active)" in await _text(sb, rooms[0], "voice list")
            shown = await (await sb.slash(sb.owner, rooms[0].text, "settings show")).wait_text(timeout=60)
            assert "**max_queue**: 7" in shown
            after_restart = await _say(sb, rooms[0], SPOKEN)
            assert _similarity(after_restart, ref16) > sim_default + 0.02

            # an engine server killed mid-stream: that one utterance ends with a message or is carried on by the
            # other server (nothing of the segment sent yet: nginx asks the other one); the next utterance plays
            # through the other server
            whole = await _say(sb, rooms[1], LONG)
            await nginx.only(None)
            capture = sb.capture(rooms[1].guild)
            capture.clear()
            it = await sb.slash(rooms[1].user, rooms[1].text, "say", text=LONG)
            assert await it.wait_text(timeout=60) == "Speaking."
            killed = await _one_streaming(servers)
            await servers[killed].kill()
            told = await _told_or_heard(it, capture)
            heard, whole_s = len(capture.pcm()), len(whole) / BYTES_PER_S
            print(f"killed server {killed} mid-stream: heard {heard / BYTES_PER_S:.1f} of {whole_s:.1f} s; told {told}")
            assert told or heard > 0.8 * len(whole), "the utterance broke off and its author was not told"
            survivor = servers[1 - killed]
            served = await survivor.speech_requests()
            after = await _say(sb, rooms[1], "The other server speaks now.")
            assert len(after) > BYTES_PER_S // 2 and await survivor.speech_requests() > served
            assert [(await b.health())["status"] for b in bots] == ["ok", "ok"]
        finally:
            for b in bots:
                await b.stop()
            if nginx is not None:
                await nginx.stop()
            for s in servers:
                await s.stop()
    restore_discord()
