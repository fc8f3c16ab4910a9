"""Join and leave announcements through the sandbox: off by default, "NAME joined" heard in the bot's channel, a
burst said once, a raid one sentence, a move out a leave, the server's language, never who opted out."""

from __future__ import annotations

import pytest

from engine.base import Voice
from tests.audio_util import assert_same_speech, mono
from tests.e2e.recorders import Heard, heard_after
from tests.e2e.test_readout import join
from tests.e2e.test_readout_options import set_option

pytestmark = pytest.mark.e2e


def members(sb, demo, *names):
    users = [sb.user(name) for name in names]
    for user in users:
        demo.guild.add_member(user)
    return users


async def test_comings_and_goings_are_announced_once_on(sb, demo, bot):
    heard = Heard(bot)
    await join(sb, demo)
    bob, carol, dave, erin, frank, quitter = members(sb, demo, "bob", "carol", "dave", "erin", "frank", "quitter")
    await sb.user_joins_voice(bob, demo.voice)  # announce is off by default: not said
    assert await set_option(sb, demo, "announce", "on") == "announce is now on."

    async def carol_joins() -> None:
        await sb.user_joins_voice(carol, demo.voice)

    heard_carol = await heard_after(sb, demo, carol_joins, least_s=0.3)  # a short sentence
    assert heard.texts() == ["carol joined"]
    assert_same_speech(heard_carol, mono(await bot.engine.synthesize_all("carol joined", Voice())),
                       mono(await bot.engine.synthesize_all("bob joined", Voice())))

    it = await sb.slash(quitter, demo.general, "optout")
    assert "not be read" in await it.wait_text(timeout=20)
    for user in (dave, erin, frank, quitter):
        await sb.user_joins_voice(user, demo.voice)
    await heard.wait_count(2)
    assert heard.texts()[-1] == "3 people joined"  # the one who opted out is not counted

    other = demo.guild.voice_channel("Other")
    await sb.user_joins_voice(dave, other)  # a move out of the bot's channel is a leave
    await sb.user_leaves_voice(erin, demo.guild)
    gina, = members(sb, demo, "gina")
    await sb.user_joins_voice(gina, demo.voice)
    await sb.user_leaves_voice(gina, demo.guild)  # in and out within the burst: nothing to say of her
    await sb.user_joins_voice(bob, other)
    await sb.user_joins_voice(bob, demo.voice)  # out and back: nothing either
    await heard.wait_count(3)
    assert heard.texts()[-1] == "2 people left"

    assert "French" in await set_option(sb, demo, "language", "fr")
    await sb.user_leaves_voice(frank, demo.guild)
    await heard.wait_count(4)
    assert heard.texts()[-1] == "frank a quitté le salon"
    assert {o for _g, _t, o in heard.items} == {"played"}


async def test_a_raid_is_one_short_sentence_and_off_says_nothing(sb, demo, bot):
    heard = Heard(bot)
    await join(sb, demo)
    assert await set_option(sb, demo, "announce", "on") == "announce is now on."
    raid = members(sb, demo, *(f"raider{i}" for i in range(40)))
    for user in raid:
        await sb.user_joins_voice(user, demo.voice)
    await heard.wait_count(1)
    kate, = members(sb, demo, "kate")
    await sb.user_joins_voice(kate, demo.voice)
    await heard.wait_count(2)
    assert heard.texts() == ["40 people joined", "kate joined"]
    assert await set_option(sb, demo, "announce", "off") == "announce is now off."
    for user in raid:
        await sb.user_leaves_voice(user, demo.guild)
    assert await set_option(sb, demo, "announce", "on") == "announce is now on."
    lena, = members(sb, demo, "lena")
    await sb.user_joins_voice(lena, demo.voice)
    await heard.wait_count(3)
    assert heard.texts() == ["40 people joined", "kate joined", "lena joined"]  # nothing of the leaves while off
