"""A server's readout options through the sandbox: required_prefix, ignore_prefix, repeated_characters."""

from __future__ import annotations

import pytest

from engine.base import Voice
from tests.audio_util import assert_same_speech, mono
from tests.e2e.recorders import heard_post
from tests.e2e.test_readout import readout  # noqa: F401 (the fixture)

pytestmark = pytest.mark.e2e


async def set_option(sb, demo, setting: str, value: str) -> str:
    it = await sb.slash(sb.owner, demo.general, "settings set", setting=setting, value=value)
    return await it.wait_text(timeout=20)


async def rendered(bot, text: str):
    return mono(await bot.engine.synthesize_all(text, Voice()))


async def test_a_required_prefix_is_read_without_it_and_an_ignore_prefix_is_not_read(sb, demo, bot, readout):
    answer = await set_option(sb, demo, "required_prefix", "!tts")
    assert "starting with '!' are not read here" in answer  # the bot's command prefix: nothing would be read
    assert (await bot.prefs.guild(demo.guild.id)).required_prefix == ""
    assert await set_option(sb, demo, "required_prefix", "tts:") == "required_prefix is now `tts:`."
    await sb.post(demo.alice, demo.general, "not for reading aloud")
    heard = await heard_post(sb, demo, demo.alice, "tts: the meeting starts at noon")
    assert readout.texts() == ["alice said, the meeting starts at noon"]
    spoken = await rendered(bot, "alice said, the meeting starts at noon")
    with_prefix = await rendered(bot, "alice said, tts: the meeting starts at noon")
    assert len(with_prefix) > len(spoken) * 1.05  # so hearing the prefix would fail the check below
    assert_same_speech(heard, spoken)
    it = await sb.slash(demo.alice, demo.general, "settings show")
    shown = await it.wait_text(timeout=20)
    assert "**required_prefix**: `tts:` (default off)" in shown and "**ignore_prefix**: off" in shown

    assert "would skip them all" in await set_option(sb, demo, "ignore_prefix", "tts")
    assert (await bot.prefs.guild(demo.guild.id)).ignore_prefix == ""
    assert await set_option(sb, demo, "required_prefix", "off") == "required_prefix is now off."
    assert await set_option(sb, demo, "ignore_prefix", "//") == "ignore_prefix is now `//`."
    await sb.post(demo.alice, demo.general, "// a note to myself")
    await sb.post(demo.alice, demo.general, "(the operator's own skip prefix still applies)")
    await sb.post(demo.alice, demo.general, "read this one")
    await readout.wait_count(2)
    assert readout.texts() == ["alice said, the meeting starts at noon", "read this one"]


async def test_repeated_characters_caps_what_is_heard_and_bad_values_change_nothing(sb, demo, bot, readout):
    for bad, why in [("0", "must be from 1 to 20"), ("lots", "takes a whole number from 1 to 20")]:
        assert why in await set_option(sb, demo, "repeated_characters", bad)
    assert (await bot.prefs.guild(demo.guild.id)).repeated_characters == 3
    assert "is now 20, the most this bot allows" in await set_option(sb, demo, "repeated_characters", "100")
    assert await set_option(sb, demo, "repeated_characters", "1") == "repeated_characters is now 1."
    heard = await heard_post(sb, demo, demo.alice, "nooooooooooooooooooo, stoooooooooooooooooooop")
    assert readout.texts() == ["alice said, no, stop"]
    assert_same_speech(heard, await rendered(bot, "alice said, no, stop"))
