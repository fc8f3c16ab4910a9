"""Channel readout through the sandbox: order, skip rules, xsaid, limits, settings and their persistence."""

from __future__ import annotations

import asyncio

import pytest

from demo.sandbox_bot import sandbox_settings, start_bot
from tests.audio_util import utterances
from tests.e2e.recorders import Heard

pytestmark = pytest.mark.e2e


async def enable_readout(sb, demo, channel=None):
    it = await sb.slash(demo.guild.owner if hasattr(demo.guild, "owner") else sb.owner, demo.general,
                        "readout channel", channel=channel or demo.general)
    assert "read aloud" in await it.wait_text()


async def join(sb, demo):
    it = await sb.slash(demo.alice, demo.general, "join")
    await it.wait_text(timeout=20)
    await sb.wait_voice_connected(demo.guild)


@pytest.fixture
async def readout(sb, demo, bot):
    await enable_readout(sb, demo)
    await join(sb, demo)
    return Heard(bot)


async def test_messages_are_read_in_order_with_xsaid_once_per_author(sb, demo, bot, readout):
    capture = sb.capture(demo.guild)
    bob = sb.user("bob")
    demo.guild.add_member(bob)
    await sb.user_joins_voice(bob, demo.voice)
    await asyncio.sleep(0.3)
    await sb.post(demo.alice, demo.general, "first message")
    await sb.post(demo.alice, demo.general, "second message")
    await sb.post(bob, demo.general, "third message")
    await readout.wait_count(3)
    assert readout.texts() == ["alice said, first message", "second message", "bob said, third message"]
    assert len(utterances(capture.packets)) == 3
    # xsaid off
    it = await sb.slash(sb.owner, demo.general, "settings set", setting="xsaid", value="off")
    assert "xsaid is now off" in await it.wait_text()
    await sb.post(demo.alice, demo.general, "fourth")
    await readout.wait_count(4)
    assert readout.texts()[-1] == "fourth"


async def test_skip_rules(sb, demo, bot, readout):
    outsider = sb.user("outsider")
    demo.guild.add_member(outsider)  # not in the voice channel
    robot = sb.user("robot", bot=True)
    demo.guild.add_member(robot)
    quitter = sb.user("quitter")
    demo.guild.add_member(quitter)
    await sb.user_joins_voice(quitter, demo.voice)
    it = await sb.slash(quitter, demo.general, "optout")
    assert "not be read" in await it.wait_text()
    other_channel = demo.guild.text_channel("random")
    await sb.post(robot, demo.general, "i am a bot")
    await sb.post(demo.alice, demo.general, "hook", webhook=True)
    await sb.post(demo.alice, demo.general, "(aside, not for reading)")
    await sb.post(demo.alice, demo.general, "!play something")
    await sb.post(outsider, demo.general, "I am not in voice")
    await sb.post(quitter, demo.general, "please do not read me")
    await sb.post(demo.alice, other_channel, "wrong channel")
    await sb.post(demo.alice, demo.general, "word " * 400)
    await readout.wait_count(1)
    await asyncio.sleep(1.0)
    texts = readout.texts()
    assert len(texts) == 1, texts
    assert texts[0].startswith("alice said, word word") and texts[0].endswith(", and more")
    assert len(texts[0]) <= 300 + len(", and more") + len("alice said, ")
    # edits are not re-read; an attachment is announced
    msg = await sb.post(demo.alice, demo.general, "")
    await asyncio.sleep(0.3)  # a person edits after posting, not in the same instant
    await sb.edit_message(msg, "edited text")
    att = sb.attachment("cat.png", b"\x89PNG....", "image/png")
    await sb.post(demo.alice, demo.general, "", attachments=[att])
    await readout.wait_count(2)
    assert readout.texts()[1] == "alice sent an image"


async def test_deleted_message_leaves_the_queue(sb, demo, bot, readout):
    await sb.post(demo.alice, demo.general, "a long first message to keep the speaker busy for a while " * 3)
    queued = await sb.post(demo.alice, demo.general, "delete me before I am read")
    await asyncio.sleep(0.3)
    sb.delete_message(queued)
    await sb.post(demo.alice, demo.general, "last one")
    await readout.wait_count(3, timeout=60)
    outcomes = {t: o for _, t, o in readout.items}
    assert outcomes.get("delete me before I am read") == "removed"
    assert outcomes.get("last one") == "played"


async def test_autojoin_and_required_role(sb, demo, bot):
    heard = Heard(bot)
    await enable_readout(sb, demo)
    await sb.post(demo.alice, demo.general, "nobody hears this")
    await asyncio.sleep(0.5)
    assert not sb.voice_connected(demo.guild) and heard.items == []
    it = await sb.slash(sb.owner, demo.general, "settings set", setting="autojoin", value="on")
    await it.wait_text()
    await sb.post(demo.alice, demo.general, "now you join")
    await heard.wait_count(1)
    assert sb.voice_connected(demo.guild)
    role = demo.guild.role("speakers")
    it = await sb.slash(sb.owner, demo.general, "settings role", role=role)
    assert "Only members with" in await it.wait_text()
    await sb.post(demo.alice, demo.general, "no role yet")
    await asyncio.sleep(0.8)
    assert len(heard.items) == 1


async def test_member_without_manage_server_cannot_change_settings(sb, demo, bot):
    for cmd, opts in [("settings set", {"setting": "xsaid", "value": "off"}), ("settings role", {}),
                      ("readout channel", {"channel": demo.general}), ("readout off", {})]:
        it = await sb.slash(demo.alice, demo.general, cmd, **opts)
        assert "Manage Server" in await it.wait_text(), cmd
        assert it.ephemeral
    assert (await bot.prefs.guild(demo.guild.id)).xsaid is True
    it = await sb.slash(demo.alice, demo.general, "settings show")
    assert "xsaid" in await it.wait_text()
    it = await sb.slash(sb.owner, demo.general, "settings set", setting="max_length", value="5000")
    assert "max_length is now 500, the most this bot allows (you asked for 5000)" in await it.wait_text()
    it = await sb.slash(sb.owner, demo.general, "settings set", setting="xsaid", value="maybe")
    assert "on or off" in await it.wait_text()


async def test_settings_persist_across_a_restart(sb, demo, settings, running):
    await enable_readout(sb, demo)
    it = await sb.slash(sb.owner, demo.general, "settings set", setting="max_queue", value="7")
    await it.wait_text()
    it = await sb.slash(demo.alice, demo.general, "nickname", name="Ally")
    await it.wait_text()
    await running.stop()
    again = await start_bot(sb, sandbox_settings(settings, sb))
    try:
        prefs = await again.bot.prefs.guild(demo.guild.id)
        assert prefs.readout_channel_ids == [demo.general.id] and prefs.max_queue == 7
        heard = Heard(again.bot)
        await join(sb, demo)
        await sb.post(demo.alice, demo.general, "after the restart")
        await heard.wait_count(1)
        assert heard.texts() == ["Ally said, after the restart"]
    finally:
        await again.stop()


async def test_flood_of_200_is_bounded_told_once_and_other_guilds_keep_speaking(sb, demo, bot, readout):
    other = sb.guild("Other")
    general2, voice2 = other.text_channel("general"), other.voice_channel("Voice")
    carol = sb.user("carol")
    other.add_member(carol)
    await sb.user_joins_voice(carol, voice2)
    await asyncio.sleep(0.3)
    for i in range(200):
        await sb.post(demo.alice, demo.general, f"flood message number {i}")
    await asyncio.sleep(0.2)
    capture2 = sb.capture(other)
    it = await sb.slash(carol, general2, "say", text="The other guild is not blocked.")
    assert await it.wait_text(timeout=10) == "Speaking."
    await capture2.wait_for_audio(0.5, timeout=30)
    told = [m for m in sb.bot_messages(demo.general) if "faster than I can read" in m.content]
    assert len(told) == 1, [m.content for m in sb.bot_messages(demo.general)]
    spoken_guild1 = [t for g, t, o in readout.items if g == demo.guild.id]
    bot.speech.stop(demo.guild.id)
    await asyncio.sleep(0.5)
    accepted = [t for g, t, o in readout.items if g == demo.guild.id]
    assert 1 <= len(accepted) <= 25 and len(spoken_guild1) <= len(accepted)
    # everything accepted reached an end: played, or removed by /stop
    assert all(o in ("played", "removed", "skipped") for g, t, o in readout.items if g == demo.guild.id)


async def test_say_cuts_in_between_readout_sentences_and_the_readout_resumes(sb, demo, bot, readout):
    """Asked-for speech does not wait behind a long readout: the readout gives way at its next sentence, the /say
    plays, then the rest of the readout, once (one utterance, all of its audio, nothing repeated)."""
    from engine.base import Voice

    made = {}  # each utterance's speed factor (catch-up may make the /say faster: the readout's rest waits)
    bot.speech.listeners.append(lambda guild_id, utt, outcome: made.setdefault(utt.request.kind, utt.speed_factor))
    capture = sb.capture(demo.guild)
    sentences = ["The first sentence of this message is here.", "Then comes a second sentence, a little longer.",
                 "A third one follows it.", "And the fourth sentence closes the long message at last."]
    await sb.post(demo.alice, demo.general, " ".join(sentences))
    await capture.wait_for_audio(0.3, timeout=30)
    it = await sb.slash(demo.alice, demo.general, "say", text="Short one.")
    assert (await it.wait_text(timeout=30)).startswith(("Speaking", "Queued"))
    await readout.wait_count(2)
    await capture.wait_until_silent(0.5, timeout=30)
    assert [o for _, o in readout.of(demo.guild)] == ["played", "played"]
    said, read = readout.texts()[0], readout.texts()[1]
    assert said == "Short one." and read.endswith(sentences[-1])
    pieces = [len(u) for u in utterances(capture.packets)]
    assert len(pieces) == 3, pieces  # readout, /say, the rest of the readout

    async def frames(text: str, speed: float) -> float:
        return len(await bot.engine.synthesize_all(text, Voice(speed=speed))) / 3840
    say_frames, read_frames = await frames(said, made["say"]), await frames(read, made["readout"])
    assert abs(pieces[1] - say_frames) <= 0.05 * say_frames + 2, (pieces, say_frames)
    assert abs(pieces[0] + pieces[2] - read_frames) <= 0.05 * read_frames + 2, (pieces, read_frames)


async def test_members_take_turns_a_long_say_gives_way_to_another_members_say(sb, demo, bot, readout):
    """A long /say (over TURN_CHARS) pauses at its next sentence for another member's /say, which plays, then the
    rest of it: one utterance, every frame heard once. The same member's next /say waits for the whole first."""
    from bot.speech.queue.queue_policy import TURN_CHARS

    made = {}
    bot.speech.listeners.append(lambda guild_id, utt, outcome: made.setdefault(utt.request.text, utt))
    bob = sb.user("bob")
    demo.guild.add_member(bob)
    await sb.user_joins_voice(bob, demo.voice)
    capture = sb.capture(demo.guild)
    sentences = ["The first sentence of this long request is here.", "Then comes a second sentence, a little longer.",
                 "A third one follows it without any hurry.", "And the fourth sentence closes the long request."]
    long_text = " ".join(sentences)
    assert len(long_text) > TURN_CHARS
    it = await sb.slash(demo.alice, demo.general, "say", text=long_text)
    assert (await it.wait_text(timeout=30)).startswith("Speaking")
    await capture.wait_for_audio(0.3, timeout=30)
    mine = await sb.slash(demo.alice, demo.general, "say", text="My own second one.")
    theirs = await sb.slash(bob, demo.general, "say", text="Bob has a turn.")
    for answer in (mine, theirs):
        assert (await answer.wait_text(timeout=30)).startswith(("Speaking", "Queued"))
    await readout.wait_count(3)
    await capture.wait_until_silent(0.5, timeout=30)
    assert readout.of(demo.guild) == [("Bob has a turn.", "played"), (long_text, "played"),
                                      ("My own second one.", "played")]
    pieces = [len(u) for u in utterances(capture.packets)]
    assert len(pieces) == 4, pieces  # alice's start, bob's, the rest of alice's, alice's second
    assert all(u.source.frames_read == u.source.frames_written for u in made.values())
    assert pieces[0] + pieces[2] == made[long_text].source.frames_written, (pieces,
                                                                            made[long_text].source.frames_written)
