"""A busy engine: playback starts with a buffer instead of stuttering while other guilds share the engine."""

from __future__ import annotations

import asyncio

import pytest

from bot.speech.speaker import frames_of
from engine.base import Voice
from tests.e2e.conftest import make_settings

pytestmark = pytest.mark.e2e
TEXT = ("Our town library opened a new reading room last spring, and it has been busy ever since. "
        "Children come after school to read comics and picture books after their lessons.")
HOG_TEXT = "Somebody else is talking at length in another guild, sentence after sentence. " * 15


@pytest.fixture
def settings(tmp_path):
    # a long allowed wait so a slow CI machine still reaches the buffer; the default is 4 s
    return make_settings(tmp_path, speech={"idle_leave_s": 0.0, "busy_preroll_wait_s": 30.0})


async def speak_once(sb, demo, bot) -> tuple[object, str]:
    done: asyncio.Future = asyncio.get_running_loop().create_future()

    def on(guild_id, utt, outcome) -> None:
        if guild_id == demo.guild.id and not done.done():
            done.set_result((utt, outcome.value))

    bot.speech.listeners.append(on)
    try:
        it = await sb.slash(demo.alice, demo.general, "say", text=TEXT)
        assert await it.wait_text(timeout=30) == "Speaking."
        return await asyncio.wait_for(done, 120)
    finally:
        bot.speech.listeners.remove(on)


async def test_idle_engine_plays_at_the_first_frame_and_busy_engine_buffers_first(sb, demo, bot):
    it = await sb.slash(demo.alice, demo.general, "join")
    assert "Joined" in await it.wait_text(timeout=20)
    await sb.wait_voice_connected(demo.guild)

    utt, outcome = await speak_once(sb, demo, bot)
    assert outcome == "played" and not utt.prerolled
    assert utt.source.buffered_at_start < frames_of(5.0)

    async def hog(k: int) -> None:
        async for _ in bot.engine.stream(HOG_TEXT, Voice(), key=("other-guild", k)):
            pass

    hogs = [asyncio.create_task(hog(k)) for k in range(6)]
    try:
        scheduler = bot.engine.scheduler
        for _ in range(100):  # until their segments queue up (bounded)
            if sum(scheduler.stats().waiting.values()) >= scheduler.max_concurrency:
                break
            await asyncio.sleep(0.05)
        utt, outcome = await speak_once(sb, demo, bot)
    finally:
        for task in hogs:
            task.cancel()
        await asyncio.gather(*hogs, return_exceptions=True)
    assert outcome == "played" and utt.prerolled
    src = utt.source
    assert src.buffered_at_start >= min(frames_of(5.0), src.frames_written), (src.buffered_at_start, src.frames_written)
