"""Faults through the sandbox: the bot stays up, the affected user is told, other guilds keep speaking,
and once the fault clears the same bot works again without a restart."""

from __future__ import annotations

import asyncio
import sqlite3
import sys
import textwrap
import threading
import time
import uuid
from dataclasses import dataclass

import pytest
from sqlalchemy import event

from bot.plugins import PluginManager
from demo.sandbox_bot import sandbox_settings, start_bot
from engine.backends.piper.backend import PiperBackend
from engine.backends.piper.settings import PiperSettings
from engine.streaming import StreamingEngine
from tests.audio_util import utterances
from tests.e2e.conftest import make_settings
from tests.e2e.doubles import FlakyBackend
from tests.e2e.recorders import Heard

pytestmark = pytest.mark.e2e
OK_TEXT = "The other guild is still speaking clearly."


@dataclass
class Room:
    """A guild with a text channel, a voice channel and a user sitting in it."""

    guild: object
    general: object
    voice: object
    user: object


async def make_room(sb, bot, name: str, user_name: str) -> Room:
    guild = sb.guild(name)
    general, voice = guild.text_channel("general"), guild.voice_channel("Voice")
    user = sb.user(user_name)
    guild.add_member(user)
    await sb.user_joins_voice(user, voice)
    for _ in range(100):  # GUILD_CREATE reaches the bot
        if bot.get_guild(guild.id) is not None:
            break
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.1)
    return Room(guild, general, voice, user)


def demo_room(demo) -> Room:
    return Room(demo.guild, demo.general, demo.voice, demo.alice)


async def say(sb, room: Room, text: str, timeout: float = 20.0):
    it = await sb.slash(room.user, room.general, "say", text=text)
    answer = await it.wait_text(timeout=timeout)
    return it, answer


async def speaks(sb, room: Room, text: str = OK_TEXT, seconds: float = 0.5, timeout: float = 40.0) -> None:
    """/say in `room` is accepted and at least `seconds` of new audio is heard there."""
    capture = sb.capture(room.guild)
    before = capture.voiced_seconds
    _, answer = await say(sb, room, text)
    assert answer.startswith(("Speaking", "Queued")), answer
    await capture.wait_for_audio(before + seconds, timeout=timeout)


async def enable_readout(sb, room: Room) -> None:
    it = await sb.slash(sb.owner, room.general, "readout channel", channel=room.general)
    assert "read aloud" in await it.wait_text()


async def join(sb, room: Room) -> None:
    it = await sb.slash(room.user, room.general, "join")
    assert "Joined" in await it.wait_text(timeout=20)
    await sb.wait_voice_connected(room.guild)


def told(channel, user, needle: str) -> list:
    """Bot messages in `channel` mentioning `user` and containing `needle` (also ones since auto-deleted)."""
    return [m for m in channel.messages
            if m.author.bot and f"<@{user.id}>" in m.content and needle in m.content]


# -- the engine raising and hanging ---------------------------------------------------------------------

@pytest.fixture
async def flaky_bot(sb, demo, tmp_path):
    settings = make_settings(tmp_path, speech={"idle_leave_s": 0.0}, engine={"segment_timeout_s": 3.0})
    flaky = FlakyBackend(PiperBackend(PiperSettings.of(settings.engine), workers=settings.engine.workers),
                         fail_rate=0.10, hang_rate=0.01, seed=9)
    engine = StreamingEngine(flaky, settings.engine)
    await engine.warm_up()
    running = await start_bot(sb, sandbox_settings(settings, sb), engine=engine)
    yield running.bot, flaky
    await running.stop()


def pick(flaky, engine, fmt: str, want: dict[str, int]) -> list[str]:
    """Texts from `fmt` whose segments get the wanted verdicts (at most one non-ok segment each)."""
    out: list[str] = []
    need = dict(want)
    for i in range(5000):
        text = fmt.format(i=i)
        verdicts = {flaky.verdict(s) for s in engine.segments(text)}
        kind = "ok" if verdicts == {"ok"} else next(iter(verdicts - {"ok"}), "ok")
        if len(verdicts - {"ok"}) <= 1 and need.get(kind, 0) > 0:
            need[kind] -= 1
            out.append((kind, text))
        if not any(need.values()):
            break
    assert not any(need.values()), need
    return out


def expected_outcome(flaky, engine, text: str) -> str:
    return "played" if all(flaky.verdict(s) == "ok" for s in engine.segments(text)) else "failed"


async def test_engine_raising_and_hanging_fails_only_those_requests_and_tells_their_authors(sb, demo, flaky_bot):
    bot, flaky = flaky_bot
    engine = bot.engine
    heard = Heard(bot)
    a = demo_room(demo)
    b = await make_room(sb, bot, "Readout Guild", "bob")
    c = await make_room(sb, bot, "Bystander Guild", "carol")
    assert expected_outcome(flaky, engine, OK_TEXT) == "played"
    # Guild A: /say with ~10 % failing and one hanging segment, in an order that puts the hang mid-queue.
    picked = pick(flaky, engine, "Item {i} of the fault drill.", {"ok": 8, "fail": 1, "hang": 1})
    picked = picked[:3] + [p for p in picked[3:] if p[0] != "ok"] + [p for p in picked[3:] if p[0] == "ok"]
    interactions = {}
    for kind, text in picked:
        it, answer = await say(sb, a, text)
        assert answer.startswith(("Speaking", "Queued")), answer
        interactions[text] = (kind, it)
    # Guild B: readout of one failing message (xsaid prefix included in what the engine sees).
    await enable_readout(sb, b)
    await join(sb, b)
    settings_set = await sb.slash(sb.owner, b.general, "settings set", setting="xsaid", value="off")
    await settings_set.wait_text()
    (_, bad_readout), = pick(flaky, engine, "Message {i} that the engine chokes on.", {"fail": 1})
    await sb.post(b.user, b.general, bad_readout)
    # Guild C is unaffected while A waits on its hanging segment.
    await speaks(sb, c, OK_TEXT, seconds=1.0)
    await heard.wait(a.guild, len(picked), timeout=120)
    await heard.wait(b.guild, 1, timeout=30)

    outcomes = dict(heard.of(a.guild))
    for text, (kind, it) in interactions.items():
        assert outcomes[text] == ("played" if kind == "ok" else "failed"), (text, kind, outcomes[text])
        if kind == "fail":
            assert "speech engine failed" in await it.wait(lambda i: i.final_text() if "failed" in (
                i.final_text() or "") else None, timeout=10)
        elif kind == "hang":
            text_seen = await it.wait(lambda i: i.final_text() if "longer than" in (i.final_text() or "") else None,
                                      timeout=10)
            assert "longer than 3 s" in text_seen
            assert it.followups[-1].ephemeral
        else:
            assert it.final_text().startswith(("Speaking", "Queued"))
    assert len(flaky.hung) == 1 and flaky.released == flaky.hung  # the engine cancelled the hang at its timeout
    assert len(utterances(sb.capture(a.guild).packets)) >= 7  # the queue went on past both failures
    assert dict(heard.of(b.guild))[bad_readout] == "failed"
    assert told(b.general, b.user, "could not read your message")
    assert dict(heard.of(c.guild))[OK_TEXT] == "played"

    flaky.enabled = False  # the fault clears: the same texts now play
    bad_text = next(t for t, (k, _) in interactions.items() if k == "hang")
    await speaks(sb, a, bad_text, seconds=1.0)
    await sb.post(b.user, b.general, bad_readout)
    await heard.wait(b.guild, 2, timeout=30)
    assert heard.of(b.guild)[-1] == (bad_readout, "played")


# -- voice websocket, UDP -------------------------------------------------------------------------------

@pytest.mark.parametrize("code", [4006, 4015])  # 4006: session no longer valid (a new session); 4015: resume
async def test_voice_websocket_closed_mid_utterance_the_rest_of_the_queue_is_heard(sb, demo, bot, code):
    a = demo_room(demo)
    c = await make_room(sb, bot, "Bystander Guild", "carol")
    heard = Heard(bot)
    capture = sb.capture(a.guild)
    texts = ["The first message is long enough to be cut in the middle by the fault, we hope.",
             "The second message follows it.", "The third and last message."]
    for text in texts:
        await say(sb, a, text)
    await capture.wait_for_audio(0.6, timeout=30)
    assert await sb.close_voice_ws(a.guild, code)
    await speaks(sb, c, seconds=1.0)  # another guild is unaffected
    await heard.wait(a.guild, 3, timeout=60)
    results = heard.of(a.guild)
    assert [t for t, _ in results] == texts
    assert [o for _, o in results][1:] == ["played", "played"], results
    await capture.wait_until_silent(0.5, timeout=30)
    assert sb.voice_connected(a.guild)
    before = len(utterances(capture.packets))
    await speaks(sb, a, "Working again after the voice connection came back.", seconds=1.0)
    await heard.wait(a.guild, 4, timeout=30)
    assert heard.of(a.guild)[-1][1] == "played"
    await capture.wait_until_silent(0.5, timeout=30)
    assert len(utterances(capture.packets)) >= before + 1


async def test_kicked_from_voice_the_queue_is_cleared_and_the_next_say_rejoins(sb, demo, bot):
    a = demo_room(demo)
    heard = Heard(bot)
    capture = sb.capture(a.guild)
    texts = ["A long first message that is playing when a moderator disconnects the bot.", "Never heard."]
    for text in texts:
        await say(sb, a, text)
    await capture.wait_for_audio(0.4, timeout=30)
    await sb.kick_bot_from_voice(a.guild)
    await heard.wait(a.guild, 2, timeout=20)
    # by text: the queued one may be reported removed before the playing one is reported cut off
    outcomes = dict(heard.of(a.guild))
    assert "played" not in outcomes.values(), outcomes  # the cut-off one failed (its author told) or was skipped
    assert outcomes[texts[0]] in ("failed", "skipped") and outcomes[texts[1]] in ("failed", "removed",
                                                                                  "skipped"), outcomes
    await asyncio.sleep(1.0)
    assert not sb.voice_connected(a.guild)  # a kick is respected: no rejoin by itself
    await speaks(sb, a, "Back after a new request.", seconds=0.5)


async def test_udp_packets_dropped_audio_still_heard_then_full_once_cleared(sb, demo, bot):
    a = demo_room(demo)
    c = await make_room(sb, bot, "Bystander Guild", "carol")
    heard = Heard(bot)
    text = "A sentence spoken while one packet in five is lost on the way."
    capture = sb.capture(a.guild)
    sb.udp_faults(drop=0.2, seed=3)
    try:
        await speaks(sb, a, text, seconds=1.0)
        await speaks(sb, c, seconds=1.0)
        await heard.wait(a.guild, 1, timeout=40)
        await capture.wait_until_silent(0.5, timeout=30)
        lossy = len(capture.voiced)
        assert sb.faults.udp_dropped > 0
    finally:
        sb.udp_faults(drop=0.0)
    capture.clear()
    await speaks(sb, a, text, seconds=1.0)
    await heard.wait(a.guild, 2, timeout=40)
    await capture.wait_until_silent(0.5, timeout=30)
    full = len(capture.voiced)
    assert [o for _, o in heard.of(a.guild)] == ["played", "played"]
    # ~20 % fewer packets under loss (Piper's durations vary by a few %), and none missing once cleared
    assert 0.6 * full < lossy < 0.92 * full, (lossy, full)
    seqs = [p.seq for p in capture.voiced]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))


# -- gateway --------------------------------------------------------------------------------------------

async def test_gateway_dropped_the_bot_resumes_and_misses_nothing(sb, demo, bot):
    a = demo_room(demo)
    c = await make_room(sb, bot, "Bystander Guild", "carol")
    heard = Heard(bot)
    await enable_readout(sb, a)
    await join(sb, a)
    await sb.post(a.user, a.general, "A message read while the gateway goes away and comes back.")
    mark = len(sb.gateway_log)
    assert await sb.drop_gateway() == 1
    await sb.post(a.user, a.general, "posted during the drop")  # replayed after RESUME
    await sb.wait_for_op(lambda o: o.op == 6, timeout=20, since=mark)
    await sb.wait_ready(timeout=20)
    await heard.wait(a.guild, 2, timeout=40)
    assert [o for _, o in heard.of(a.guild)] == ["played", "played"], heard.of(a.guild)
    assert not [o for o in sb.gateway_log[mark:] if o.op == 2]  # resumed, not re-identified
    await speaks(sb, c, seconds=1.0)
    await speaks(sb, a, seconds=1.0)


async def test_gateway_session_invalidated_the_bot_reidentifies_and_keeps_speaking(sb, demo, bot):
    async def no_wait(shard_id, *, initial=False):  # discord.py sleeps 5 s before a non-first IDENTIFY
        return None
    bot.before_identify_hook = no_wait
    a = demo_room(demo)
    c = await make_room(sb, bot, "Bystander Guild", "carol")
    heard = Heard(bot)
    capture = sb.capture(a.guild)
    await say(sb, a, "Speech that was already playing when the session was invalidated, and goes on.")
    await capture.wait_for_audio(0.4, timeout=30)
    mark = len(sb.gateway_log)
    assert await sb.invalidate_session(resumable=False) == 1
    await sb.wait_for_op(lambda o: o.op == 2, timeout=20, since=mark)
    await sb.wait_ready(timeout=20)
    await heard.wait(a.guild, 1, timeout=40)
    await speaks(sb, c, seconds=1.0)
    await speaks(sb, a, seconds=1.0)
    await heard.wait(a.guild, 2, timeout=40)
    assert [o for _, o in heard.of(a.guild)] == ["played", "played"], heard.of(a.guild)


# -- REST 429 and 500 -----------------------------------------------------------------------------------

async def test_rest_429_and_500_are_retried_and_the_user_still_gets_the_answer(sb, demo, bot):
    a = demo_room(demo)
    c = await make_room(sb, bot, "Bystander Guild", "carol")
    limited = sb.fail_route("POST", "/interactions/*/callback", status=429, times=1, retry_after=0.3)
    it, answer = await say(sb, a, "Answered after a rate limit.")
    assert answer == "Speaking." and limited.hits == 1
    broken = sb.fail_route("POST", "/interactions/*/callback", status=500, times=1)
    it, answer = await say(sb, c, "Answered after a server error.")
    assert answer == "Speaking.", answer
    assert broken.hits == 1
    # readout's message to the author (a channel message) through a 429 and a 500
    await enable_readout(sb, a)
    await join(sb, a)
    await asyncio.sleep(1.0)  # let the first /say finish so the next one queues behind nothing odd
    sb.fail_route("POST", "/channels/*/messages", status=429, times=1, retry_after=0.2)
    sb.fail_route("POST", "/channels/*/messages", status=500, times=1)
    for i in range(8):  # past the burst of 5: the author is told they are going too fast
        await sb.post(a.user, a.general, f"flood line {i}")
    msg = await sb.wait_bot_message(a.general, lambda m: "faster than I can read" in m.content, timeout=20)
    assert f"<@{a.user.id}>" in msg.content
    assert all(f.times == 0 for f in sb.faults.routes)
    bot.speech.stop(a.guild.id)
    await speaks(sb, a, "Everything works once the faults are gone.", seconds=1.0)
    await speaks(sb, c, seconds=1.0)


# -- database locked or read-only -----------------------------------------------------------------------

def hold_exclusive_lock(path: str, seconds: float, started: threading.Event) -> None:
    con = sqlite3.connect(path, timeout=1.0, isolation_level=None)
    try:
        con.execute("BEGIN EXCLUSIVE")
        started.set()
        time.sleep(seconds)
        con.execute("ROLLBACK")
    finally:
        con.close()


async def test_database_locked_or_read_only_settings_write_says_so_and_works_after(sb, demo, bot, settings):
    a = demo_room(demo)
    c = await make_room(sb, bot, "Bystander Guild", "carol")
    await speaks(sb, a, "Warm up the settings cache first.", seconds=0.3)
    path = settings.database.path
    # locked: another process holds the write lock past the bot's busy timeout (5 s)
    started = threading.Event()
    locker = threading.Thread(target=hold_exclusive_lock, args=(path, 7.0, started), daemon=True)
    locker.start()
    assert await asyncio.to_thread(started.wait, 5)
    try:
        it = await sb.slash(sb.owner, a.general, "settings set", setting="max_queue", value="9")
        await speaks(sb, c, seconds=0.5)  # the loop is not blocked; another guild speaks meanwhile
        text = await it.wait_text(timeout=15)
        assert "database is busy or read-only" in text and "nothing was changed" in text, text
        assert it.ephemeral and "Traceback" not in text
    finally:
        await asyncio.to_thread(locker.join, 15)
    it = await sb.slash(sb.owner, a.general, "settings set", setting="max_queue", value="9")
    assert await it.wait_text(timeout=10) == "max_queue is now 9."

    # read-only: new connections refuse writes (root ignores chmod, so SQLite's query_only stands in)
    def read_only(dbapi_connection, _record):
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA query_only=ON")
        cursor.close()
    engine = bot.db.engine
    event.listen(engine.sync_engine, "connect", read_only)
    await engine.dispose()
    try:
        it = await sb.slash(sb.owner, a.general, "settings set", setting="max_queue", value="11")
        text = await it.wait_text(timeout=10)
        assert "database is busy or read-only" in text, text
        await speaks(sb, c, seconds=0.5)
        await speaks(sb, a, "Reading settings still works while writes fail.", seconds=0.5)
    finally:
        event.remove(engine.sync_engine, "connect", read_only)
        await engine.dispose()
    it = await sb.slash(sb.owner, a.general, "settings set", setting="max_queue", value="11")
    assert await it.wait_text(timeout=10) == "max_queue is now 11."
    assert (await bot.prefs.guild(a.guild.id)).max_queue == 11


# -- a plugin raising in its listeners ------------------------------------------------------------------

BROKEN_PLUGIN = '''
"""A plugin whose listeners raise."""
from discord.ext import commands

class Broken(commands.Cog):
    def __init__(self, bot):
        self.bot = bot
        self.calls = 0

    @commands.Cog.listener()
    async def on_message(self, message):
        self.calls += 1
        raise RuntimeError("broken plugin on_message")

    def on_utterance(self, guild_id, utt, outcome):
        self.calls += 1
        raise RuntimeError("broken plugin speech listener")

async def setup(bot):
    cog = Broken(bot)
    bot.speech.listeners.append(cog.on_utterance)
    await bot.add_cog(cog)

async def teardown(bot):
    cog = bot.get_cog("Broken")
    if cog is not None and cog.on_utterance in bot.speech.listeners:
        bot.speech.listeners.remove(cog.on_utterance)
'''


@pytest.fixture
def broken_plugins(tmp_path, monkeypatch):
    name = "tfaultplugins_" + uuid.uuid4().hex[:8]
    root = tmp_path / name
    (root / "broken").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "broken" / "__init__.py").write_text(textwrap.dedent(BROKEN_PLUGIN))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name, root
    for mod in [m for m in sys.modules if m.startswith(name)]:
        del sys.modules[mod]


async def test_plugin_raising_in_a_listener_does_not_stop_readout_or_commands(sb, demo, bot, broken_plugins):
    name, root = broken_plugins
    a = demo_room(demo)
    c = await make_room(sb, bot, "Bystander Guild", "carol")
    manager = PluginManager(bot, package=name, directory=root)
    assert await manager.load("broken")
    heard = Heard(bot)
    await enable_readout(sb, a)
    await join(sb, a)
    await sb.post(a.user, a.general, "Read aloud although another plugin raises.")
    await sb.post(a.user, a.general, "And this one too.")
    await heard.wait(a.guild, 2, timeout=40)
    assert [o for _, o in heard.of(a.guild)] == ["played", "played"]
    assert bot.get_cog("Broken").calls >= 4  # both of its listeners ran (and raised) for each
    await speaks(sb, c, seconds=0.5)
    it = await sb.slash(a.user, a.general, "queue")
    assert await it.wait_text() == "Nothing is waiting."
    assert await manager.unload("broken")
    await sb.post(a.user, a.general, "After the plugin is unloaded.")
    await heard.wait(a.guild, 3, timeout=40)
    assert heard.of(a.guild)[-1] == ("After the plugin is unloaded.", "played")
