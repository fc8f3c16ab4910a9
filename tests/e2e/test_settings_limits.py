"""/settings limits through the sandbox: a guild may only lower the bot's limits, and is told the binding one."""

from __future__ import annotations

import pytest

from bot.config import MORE
from tests.e2e.conftest import make_settings
from tests.e2e.recorders import Heard

pytestmark = pytest.mark.e2e
TEXT_LIMIT = 60  # speech.max_text_chars for these tests: below the guild default max_length (300)


@pytest.fixture
def settings(tmp_path):
    return make_settings(tmp_path, speech={"idle_leave_s": 0.0, "max_text_chars": TEXT_LIMIT})


async def answer(sb, demo, command, **options) -> str:
    it = await sb.slash(sb.owner, demo.general, command, **options)
    return await it.wait_text()


async def test_max_queue_above_the_bots_limit_is_lowered_to_it_and_said_so(sb, demo, bot):
    assert bot.config.speech.queue_max == 20
    said = await answer(sb, demo, "settings set", setting="max_queue", value="100")
    assert said == "max_queue is now 20, the most this bot allows (you asked for 100)."
    assert (await bot.prefs.guild(demo.guild.id)).max_queue == 20
    assert "**max_queue**: 20 — " in await answer(sb, demo, "settings show")
    assert await answer(sb, demo, "settings set", setting="max_queue", value="7") == "max_queue is now 7."
    assert (await bot.prefs.guild(demo.guild.id)).max_queue == 7
    said = await answer(sb, demo, "settings set", setting="max_queue", value="0")
    assert said.startswith("max_queue must be from 1 to 20.")
    assert (await bot.prefs.guild(demo.guild.id)).max_queue == 7


async def test_max_length_is_bound_by_the_bots_text_limit(sb, demo, bot):
    said = await answer(sb, demo, "settings set", setting="max_length", value="300")
    assert said == f"max_length is now {TEXT_LIMIT}, the most this bot allows (you asked for 300)."
    await bot.prefs.update_guild(demo.guild.id, max_queue=50)  # stored under an older, larger config
    shown = await answer(sb, demo, "settings show")
    assert "**max_queue**: 20 (set to 50; the most this bot allows is 20)" in shown


async def test_readout_reads_no_more_than_the_bots_text_limit(sb, demo, bot):
    assert (await bot.prefs.guild(demo.guild.id)).max_message_chars == 300  # the guild default, above 60
    assert "read aloud" in await answer(sb, demo, "readout channel", channel=demo.general)
    it = await sb.slash(demo.alice, demo.general, "join")
    await it.wait_text(timeout=20)
    await sb.wait_voice_connected(demo.guild)
    heard = Heard(bot)
    await sb.post(demo.alice, demo.general, " ".join(f"word{i}" for i in range(40)))
    await heard.wait_count(1)
    (text,) = heard.texts()
    assert text.startswith("alice said, word0 word1 ") and text.endswith(MORE), text
    assert len(text) <= TEXT_LIMIT + len(MORE), text


async def test_voice_speed_and_pitch_bounds_and_reset_come_from_the_user_declaration(sb, demo, bot):
    assert await answer(sb, demo, "voice settings", speed=3.0) == "Speed goes from 0.5 (slow) to 2.0 (fast)."
    assert await answer(sb, demo, "voice settings", pitch=-12.5) == "Pitch goes from -12 to 12 semitones."
    assert await answer(sb, demo, "voice settings", speed=1.5, pitch=-2.0) == "Speed 1.5, pitch -2 semitones."
    assert await answer(sb, demo, "voice reset") == "Back to the default voice, speed and pitch."
    prefs = await bot.prefs.user(sb.owner.id)
    assert (prefs.speed, prefs.pitch, prefs.active_voice_id) == (1.0, 0.0, None)
