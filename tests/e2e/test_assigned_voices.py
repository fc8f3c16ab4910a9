"""Voices and names a server gives, through the sandbox: /settings set role_voice @role VOICE, lock_voice, a
moderator's /voice set @member VOICE and /nickname @member NAME (the member told by DM); bad input changes nothing."""

from __future__ import annotations

import numpy as np
import pytest

from engine.base import Voice
from tests.audio_util import band_profile, mono
from tests.e2e.recorders import heard_say
from tests.e2e.test_voices import FIT, espeak_clip

pytestmark = pytest.mark.e2e


async def answer(sb, user, channel, command: str, **options) -> str:
    it = await sb.slash(user, channel, command, **options)
    text = await it.wait_text(timeout=20)
    assert it.ephemeral, text
    return text


async def heard_in(bot, heard: np.ndarray, text: str, *voice_ids: str) -> str:
    """Which voice `heard` is `text` in: the one whose rendering's voiced spectrum (band_profile) is nearest, by
    at least half (measured: 0.7 to its own, 3.6 to the default voice's, 7.2 to another registered one's)."""
    far = {}
    for vid in voice_ids:
        rendering = await bot.engine.synthesize_all(text, Voice(vid, profile=await bot.voices.profile(vid)))
        far[vid] = float(np.linalg.norm(band_profile(heard) - band_profile(mono(rendering))))
    nearest, *others = sorted(far, key=far.__getitem__)
    assert all(far[nearest] * 2 < far[o] for o in others), far
    return nearest


async def test_role_voice_gives_way_to_the_members_own_unless_locked_and_a_moderator_sets_one(sb, demo, bot):
    manager, singers = sb.owner, demo.guild.role("singers")
    demo.guild.add_member(manager, roles=[demo.guild.role("admins", 1 << 5)])  # Manage Server
    demo.guild.add_member(demo.alice, roles=[singers])
    robot = await bot.voices.register(manager.id, "robot", espeak_clip(), FIT)  # the manager's, shared with the server
    await bot.voices.share(manager.id, "robot", "guild", demo.guild.id)
    mine = await bot.voices.register(demo.alice.id, "mine", espeak_clip(voice="en-us+m3", pitch=30), FIT)
    voices: list[str | None] = []
    bot.speech.listeners.append(lambda _g, utt, _o: voices.append(utt.request.voice.name))

    async def set_option(setting: str, value: str, user=manager) -> str:
        return await answer(sb, user, demo.general, "settings set", setting=setting, value=value)

    # bad input is told why and changes nothing
    assert "I see no role '<@&999>'" in await set_option("role_voice", "<@&999> robot")
    assert "No stock voice or voice shared with this server is named 'mine'" in \
        await set_option("role_voice", f"<@&{singers.id}> mine")  # alice's own: not every singer may use it
    assert "Manage Server" in await set_option("role_voice", f"<@&{singers.id}> robot", user=demo.alice)
    assert (await bot.prefs.guild(demo.guild.id)).role_voices == ""
    assert await set_option("role_voice", f"<@&{singers.id}> robot") == \
        f"role_voice is now robot for <@&{singers.id}>."
    shown = await answer(sb, demo.alice, demo.general, "settings show")
    assert f"**role_voice**: <@&{singers.id}> robot (default none)" in shown and "**lock_voice**: off" in shown

    heard_role = await heard_say(sb, demo, "The role's voice speaks.")
    assert voices == [robot.id]
    assert "now spoken in 'mine'" in await answer(sb, demo.alice, demo.general, "voice use", name="mine")
    heard_own = await heard_say(sb, demo, "My own voice speaks.")  # her own choice wins while the server does not lock
    assert await set_option("lock_voice", "on") == "lock_voice is now on."
    await heard_say(sb, demo, "The role's voice again.")
    assert voices == [robot.id, mine.id, robot.id]
    # what the channel heard: the role's voice, then her own (each nearest its own rendering, far from the other's)
    assert await heard_in(bot, heard_role, "The role's voice speaks.", robot.id, mine.id) == robot.id
    assert await heard_in(bot, heard_own, "My own voice speaks.", robot.id, mine.id) == mine.id

    # a moderator sets alice's voice: one she may use, the member told by DM; others are refused
    assert "That member has no voice named 'nobody'" in await answer(
        sb, manager, demo.general, "voice set", member=demo.alice, voice="nobody")
    assert "Manage Server" in await answer(sb, demo.alice, demo.general, "voice set", member=manager, voice="robot")
    assert (await bot.prefs.member(demo.guild.id, demo.alice.id)).voice is None
    said = await answer(sb, manager, demo.general, "voice set", member=demo.alice, voice="mine")
    assert said == f"<@{demo.alice.id}>'s voice here is now 'mine'; they were told by DM."
    dm = [m.content for m in sb.dm_channel(demo.alice).messages]
    assert dm == [f"In {demo.guild.name} a moderator set your voice to 'mine'."]
    await heard_say(sb, demo, "The moderator's choice.")  # over the role's voice
    assert voices[-1] == mine.id
    assert await answer(sb, manager, demo.general, "voice set", member=demo.alice, voice="default") == \
        f"<@{demo.alice.id}>'s voice here is their own choice again; they were told by DM."
    assert sb.dm_channel(demo.alice).messages[-1].content == \
        f"In {demo.guild.name} a moderator removed the voice set for you."
    await set_option("role_voice", f"<@&{singers.id}> off")
    await set_option("lock_voice", "off")
    await heard_say(sb, demo, "Her own once more.")
    assert voices[-1] == mine.id and (await bot.prefs.guild(demo.guild.id)).role_voices == ""


async def test_a_moderator_names_a_member_and_the_member_is_told(sb, demo, bot):
    manager = sb.owner
    demo.guild.add_member(manager, roles=[demo.guild.role("admins", 1 << 5)])
    assert "Manage Server" in await answer(sb, demo.alice, demo.general, "nickname", member=manager, name="Boss")
    assert await bot.prefs.nickname(demo.guild.id, manager.id) is None
    assert "at most 32 characters" in await answer(sb, manager, demo.general, "nickname", member=demo.alice,
                                                   name="x" * 33)
    stranger = sb.user("stranger")  # not a member of the server: the bot cannot see them there
    for command, options in (("nickname", {"name": "Who"}), ("voice set", {"voice": "default"})):
        assert await answer(sb, manager, demo.general, command, member=stranger, **options) == \
            "I cannot see stranger in this server; name one of its members."
    assert await bot.prefs.nickname(demo.guild.id, stranger.id) is None
    said = await answer(sb, manager, demo.general, "nickname", member=demo.alice, name="Ally")
    assert said == f"The name read for <@{demo.alice.id}> is now Ally; they were told by DM."
    assert [m.content for m in sb.dm_channel(demo.alice).messages] == \
        [f"In {demo.guild.name} a moderator set the name read for you to Ally."]
    assert await bot.prefs.nickname(demo.guild.id, demo.alice.id) == "Ally"
    # her DMs closed (Discord answers 403): she is told by a mention where the moderator asked
    dm = sb.fail_route("POST", f"/channels/{sb.dm_channel(demo.alice).id}/messages", status=403, times=1)
    said = await answer(sb, manager, demo.general, "nickname", member=demo.alice)
    assert said == f"The name read for <@{demo.alice.id}> is now their display name; they were told with a " \
                   "mention here." and dm.times == 0
    assert demo.general.messages[-1].content == \
        f"<@{demo.alice.id}>: In {demo.guild.name} a moderator set the name read for you back to the display name."
    assert await bot.prefs.nickname(demo.guild.id, demo.alice.id) is None
    assert await answer(sb, demo.alice, demo.general, "nickname", member=demo.alice, name="Al") == "I'll call you Al."
