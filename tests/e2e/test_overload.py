"""Pacing and overload through the sandbox: an idle engine starts at the first frame; with a slowed engine no
silence once speech is heard, readout skipped to catch up with one notice, /say told its wait and refused
past the guild's bound."""

from __future__ import annotations

import asyncio

import pytest

from bot.speech.queue.speaker import frames_of
from demo.sandbox_bot import sandbox_settings, start_bot
from engine.backends.piper.backend import PiperBackend
from engine.backends.piper.settings import PiperSettings
from engine.base import Voice
from engine.streaming import StreamingEngine
from tests.e2e.conftest import make_settings
from tests.e2e.doubles import SlowBackend
from tests.e2e.recorders import Heard
from tests.e2e.test_readout import enable_readout, join

pytestmark = pytest.mark.e2e
LONG = ("The river rose all week, and the town council met every evening to plan the sandbags. "
        "By Friday the water reached the old mill, but the new wall held. "
        "On Sunday the sun came out, and the children went back to school.")


async def slowed_bot(sb, tmp_path, speed: float):
    settings = make_settings(tmp_path, speech={"idle_leave_s": 0.0})
    piper = PiperBackend(PiperSettings.of(settings.engine), workers=settings.engine.workers)
    engine = StreamingEngine(SlowBackend(piper, speed=speed), settings.engine)
    return await start_bot(sb, sandbox_settings(settings, sb), engine=engine)


@pytest.fixture
async def slow_running(sb, demo, tmp_path, request):
    running = await slowed_bot(sb, tmp_path, request.param)
    yield running
    await running.stop()


async def test_idle_engine_starts_at_the_first_frame(sb, demo, bot):
    ended = []
    bot.speech.listeners.append(lambda guild_id, utt, outcome: ended.append((utt, outcome)))
    await join(sb, demo)
    it = await sb.slash(demo.alice, demo.general, "say", text=LONG)
    assert await it.wait_text(timeout=30) == "Speaking."
    for _ in range(1200):  # bounded
        if ended:
            break
        await asyncio.sleep(0.1)
    [(utt, outcome)] = ended
    assert outcome.value == "played" and not utt.prerolled and utt.source.underruns == 0
    # the first segment (a clause) was enough to start: far less than the whole utterance was buffered
    assert utt.stats.buffered_at_start < utt.source.frames_written // 2
    assert utt.stats.buffered_at_start < frames_of(8.0)


@pytest.mark.parametrize("slow_running", [0.8], indirect=True)
async def test_engine_slower_than_speech_never_inserts_silence_once_heard(sb, demo, slow_running):
    bot = slow_running.bot
    heard = Heard(bot)
    ended = []
    bot.speech.listeners.append(lambda guild_id, utt, outcome: ended.append(utt))
    await join(sb, demo)
    capture = sb.capture(demo.guild)
    capture.clear()
    # the engine measured itself slower than real time: started at the first frame, this would run dry
    assert 0 < bot.engine.capacity(demo.guild.id).share() < 1
    it = await sb.slash(demo.alice, demo.general, "say", text=LONG)
    assert (await it.wait_text(timeout=30)).startswith(("Speaking", "Queued"))
    await heard.wait(demo.guild, 1, timeout=120)
    [(text, outcome)] = heard.of(demo.guild)
    assert outcome == "played"
    utt = ended[-1]
    src = utt.source
    assert utt.prerolled and src.underruns == 0, (utt.held_s, src.underruns)
    assert src.frames_read == src.frames_written
    await capture.wait_until_silent(0.5, timeout=30)
    assert abs(len(capture.voiced) - src.frames_written) <= 2  # every frame made was heard, nothing more


@pytest.mark.parametrize("slow_running", [0.6], indirect=True)
async def test_readout_behind_by_more_than_max_delay_skips_with_one_notice(sb, demo, slow_running):
    bot = slow_running.bot
    heard = Heard(bot)
    await enable_readout(sb, demo)
    it = await sb.slash(sb.owner, demo.general, "settings set", setting="max_delay", value="5")
    assert "max_delay is now 5" in await it.wait_text()
    it = await sb.slash(sb.owner, demo.general, "settings set", setting="xsaid", value="off")
    await it.wait_text()
    await join(sb, demo)
    posted = 8
    authors = []
    for i in range(posted):  # one message each: the per-user rate limit stays out of this
        user = sb.user(f"reader{i}")
        demo.guild.add_member(user)
        await sb.user_joins_voice(user, demo.voice)
        authors.append(user)
    for i, user in enumerate(authors):
        await sb.post(user, demo.general, f"Message number {i}: the weather is nice and warm today.")
    speaker = bot.speech.speaker(demo.guild.id)
    for _ in range(1800):  # bounded: until each message was heard or counted, and nothing is pending
        notices = [m for m in sb.bot_messages(demo.general) if m.content.startswith("Skipped")]
        counted = sum(int(m.content.split()[1]) for m in notices)
        played = sum(o == "played" for _, o in heard.of(demo.guild))
        if played + counted >= posted and speaker.idle and not bot.readout.catch_up.pending(demo.guild.id):
            break
        await asyncio.sleep(0.1)
    played = [t for t, o in heard.of(demo.guild) if o == "played"]
    assert len(notices) == 1, [m.content for m in notices]
    skipped = int(notices[0].content.split()[1])
    assert skipped >= 1 and len(played) + skipped == posted, (played, notices[0].content)
    assert "to catch up" in notices[0].content and "5 s" in notices[0].content
    # read in order, the skipped ones are later messages (the first could start in time)
    numbers = [int(t.split()[2].rstrip(":")) for t in played]
    assert numbers == sorted(numbers) and numbers[0] == 0


@pytest.mark.parametrize("slow_running", [0.6], indirect=True)
async def test_say_is_told_a_long_wait_and_refused_past_the_bound(sb, demo, slow_running):
    await join(sb, demo)
    it = await sb.slash(sb.owner, demo.general, "settings set", setting="max_delay", value="20")
    await it.wait_text()
    answers = []
    for _ in range(4):
        it = await sb.slash(demo.alice, demo.general, "say", text=LONG)
        answers.append(await it.wait_text(timeout=30))
    assert answers[0].startswith(("Speaking", "Queued")), answers
    told = [a for a in answers if "starts in about" in a]
    refused = [a for a in answers if a.startswith("I'm busy here")]
    assert told and refused, answers
    assert all("limit of 20 s" in a for a in refused)
    waits = [int(a.split("about ")[1].split()[0]) for a in told + refused]
    assert all(w > 5 for w in waits) and all(int(a.split("about ")[1].split()[0]) > 20 for a in refused), answers


@pytest.mark.parametrize("slow_running", [0.6], indirect=True)
async def test_say_synthesis_does_not_wait_for_readout_synthesis(sb, demo, slow_running):
    """A guild synthesizes one readout at a time, at readout's priority in the engine; a /say arriving then
    starts its own synthesis at once (urgent) instead of queueing behind the readout ones."""
    bot = slow_running.bot
    ended = []
    bot.speech.listeners.append(lambda guild_id, utt, outcome: ended.append(utt))
    await enable_readout(sb, demo)
    it = await sb.slash(sb.owner, demo.general, "settings set", setting="max_delay", value="300")
    await it.wait_text()  # the wait the /say is told is not what this is about
    await join(sb, demo)
    for _ in range(2):  # one playing (and still synthesizing), one queued behind it
        await sb.post(demo.alice, demo.general, LONG)
    speaker = bot.speech.speaker(demo.guild.id)
    for _ in range(300):  # bounded: until the first readout is synthesizing
        if speaker.current is not None and speaker.current.synth_started:
            break
        await asyncio.sleep(0.1)
    it = await sb.slash(demo.alice, demo.general, "say", text="Short one.")
    assert (await it.wait_text(timeout=30)).startswith(("Speaking", "Queued"))
    for _ in range(1800):  # bounded: until all three ended
        if len(ended) >= 3:
            break
        await asyncio.sleep(0.1)
    say = next(u for u in ended if u.request.kind == "say")
    readouts = [u for u in ended if u.request.kind == "readout"]
    assert len(readouts) == 2 and all(u.synth_started for u in readouts + [say])
    first_done = min(u.synth_started + u.synth_seconds for u in readouts)
    assert say.synth_started < first_done, (say.synth_started, first_done)


async def test_a_channel_behind_speaks_faster_to_catch_up_and_every_word_is_heard(sb, demo, bot):
    ended = []
    bot.speech.listeners.append(lambda guild_id, utt, outcome: ended.append((utt, outcome)))
    await enable_readout(sb, demo)
    it = await sb.slash(sb.owner, demo.general, "settings set", setting="xsaid", value="off")
    await it.wait_text()
    await join(sb, demo)
    text = "The weather is nice and warm today, so we will walk along the river after lunch."
    posted = 6
    for i in range(posted):  # one message each: the per-user rate limit stays out of this
        user = sb.user(f"catcher{i}")
        demo.guild.add_member(user)
        await sb.user_joins_voice(user, demo.voice)
        await sb.post(user, demo.general, text)
    for _ in range(1800):  # bounded
        if len(ended) >= posted:
            break
        await asyncio.sleep(0.1)
    assert [o.value for _, o in ended] == ["played"] * posted
    first = ended[0][0]
    assert first.speed_factor == 1.0  # nothing was waiting when it was made
    faster = [u for u, _ in ended if u.speed_factor > 1.0]
    assert faster, [u.speed_factor for u, _ in ended]
    assert all(u.speed_factor <= bot.speech.settings.catch_up_speed for u, _ in ended)
    # the same words made fastest are shorter: as long as the engine makes them at that speed (steady Piper,
    # tests/e2e/conftest.py), shorter than at speed 1
    fastest = max((u for u, _ in ended), key=lambda u: u.speed_factor)
    made = [(round(u.speed_factor, 2), u.source.frames_written) for u, _ in ended]
    at_speed = [-(-len(await bot.engine.synthesize_all(text, Voice(speed=s))) // 3840) for s in (1.0, fastest.speed)]
    assert fastest.speed_factor >= 1.1 and abs(fastest.source.frames_written - at_speed[1]) <= 2, (made, at_speed)
    assert at_speed[1] < at_speed[0] and abs(first.source.frames_written - at_speed[0]) <= 2, (made, at_speed)
    # and once the queue drains, the speed is back to normal
    assert ended[-1][0].speed_factor == 1.0
    assert all(u.source.underruns == 0 and u.source.frames_read == u.source.frames_written for u, _ in ended)


@pytest.mark.parametrize("slow_running", [0.3], indirect=True)
async def test_a_readout_held_back_steps_aside_for_say_at_once(sb, demo, slow_running):
    """An engine this slow makes a readout wait until all of it is synthesized before a word plays (else it would
    run dry); a /say asked meanwhile takes its turn at once, not once the readout is made, and the readout
    follows whole."""
    bot = slow_running.bot
    ended = []
    bot.speech.listeners.append(lambda guild_id, utt, outcome: ended.append((utt, outcome)))
    await enable_readout(sb, demo)
    await join(sb, demo)
    await sb.post(demo.alice, demo.general, LONG.split(". ")[0] + ".")
    speaker = bot.speech.speaker(demo.guild.id)
    for _ in range(300):  # bounded: until the readout is synthesizing and held back
        readout = speaker.current
        if readout is not None and readout.source is not None and readout.source.frames_written and readout.prerolled:
            break
        await asyncio.sleep(0.1)
    assert readout.source.frames_read == 0 and not readout.source.finished
    it = await sb.slash(demo.alice, demo.general, "say", text="Short one.")
    assert (await it.wait_text(timeout=30)).startswith(("Speaking", "Queued"))
    for _ in range(600):  # bounded: until the /say is the one being played
        if speaker.current is not None and speaker.current.request.kind == "say":
            break
        await asyncio.sleep(0.05)
    assert speaker.current.request.kind == "say"
    assert not readout.source.finished and readout.source.frames_read == 0  # it stepped aside, still being made
    for _ in range(1800):  # bounded: until both ended
        if len(ended) >= 2:
            break
        await asyncio.sleep(0.1)
    assert [(u.request.kind, o.value) for u, o in ended] == [("say", "played"), ("readout", "played")]
    assert readout.source.frames_read == readout.source.frames_written and readout.source.underruns == 0
