"""Load through the sandbox at a chosen multiple of the engine's capacity: guilds x users sending readout messages
and slash commands (hostile text included) at the real bot in its own process; what was heard is taken from
the sandbox's capture, each utterance's audio identified in the captured stream.

    python -m bench.load --plan over    # offered speech ~1.3x what the engine can synthesize (>= 1.2x)
    python -m bench.load --plan under   # ~0.7x of the capacity the engine has beside the bot's playback
    python -m bench.load --quick        # the CI smoke: 10 guilds x 5 users over 20 s at ~0.7x

Each run first measures the engine's capacity (audio seconds per wall second, the bot's own engine settings,
concurrent streams of this load's phrases) and sizes the load from it. Then the bot is started in a
subprocess exactly as production starts it (bench/_harness.py child: bot.startup.create_bot), so its memory
and event-loop lag are its own. Each plan then calibrates: load at its factor (at most 1x) of that capacity for
`calibrate_s`, while the bot's engine reports how fast it synthesizes with every slot busy (its speed measured
window by window at each load) beside the bot's playback and the sandbox; the plan's load is sized from that
capacity, and offered_vs_capacity is the speech offered over it (within 0.1 of the plan's factor). The under plan's
goals are on the bot's own part of
each wait (from when the item could have started, its channel free of earlier items, to its first heard
frame); the total waits, which include the channel speaking earlier items (one voice per channel), are
printed beside them.

Accounting (tally, per guild): every accepted item (a readout message by a user in voice; a /say that was
answered "Speaking"/"Queued") ends as heard, told (a /say refused with its reason; readout counted in a "Skipped N
messages to catch up" notice, or refused at the door and its author told why by a notice of its own) or skipped by
a user (/stop's count, an utterance ended by /skip). Heard means found whole in the channel's capture: the
captured packets in the order the bot sent them (RTP sequence numbers), cut into talk spurts at the end-of-speech
silence frames, are paired in order with the stretches of the bot's record of each utterance (when each went to
the player and how many frames it had; a readout that gave way to a /say plays in two), and the spurt must hold
the stretch's frames (up to 5 % may be lost on loopback when the sandbox falls behind: printed). Checked beside
the record: the audio is as long as the item's text should sound, and its envelope is its own text's rendering
rather than another's. Told and skipped are what the sandbox saw the bot answer and post, given to the items they
can be about (the bot's record says which were ended by a user, refused, or too late); lost is every item none of
them accounts for, and what the answers and notices claim beyond those items is counted_twice, a goal of 0 (it is
not netted against lost). A /say never answered is neither accepted nor lost: say_unanswered, a goal of 0.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import dataclasses
import json
import math
import os
import random
import re
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench._harness import (  # noqa: E402
    bench_settings,
    bot_subprocess,
    cpu_seconds,
    engine_totals,
    pct,
    peak_rss_mb,
)
from sandbox import Sandbox, restore_discord  # noqa: E402
from sandbox.capture import FRAME_S  # noqa: E402
from tests.audio_util import mono, speech_frames, stretched_frames_correlation  # noqa: E402

SPEECH_SHARE = 0.65  # readout + /say among all actions
WEIGHTS = {"readout": 45, "say": 20, "skip": 5, "stop": 1, "queue": 8, "voice list": 8, "voice settings": 5,
           "settings show": 8}
LENGTH_TOLERANCE = 1.35  # a heard item's spurt is within this ratio of its text's expected length
SENT_SLACK_S = 0.1  # a stretch's spurt arrives no earlier than this before its first frame left the player ...
MAX_LAG_S = 5.0  # ... and no later than this after it (the sandbox's loop falls behind on a busy machine)
CONTENT_MARGIN = 0.0  # heard audio correlates with its own text's renderings by this much more than with another's
REFERENCES = 3  # renderings of each text (Piper's sampling noise on: one alone gave a right phrase -0.04 at 1.2x)
SPEED_STEP = 0.05  # references are rendered at each speed played, to this step
FRAMES_SLACK = 2  # frames an utterance's spurt may lack and still count as heard ...
FRAMES_LOST = 0.05  # ... or this share of them: UDP on loopback drops a few when the sandbox falls behind
CAPACITY_S = 12.0  # how long the capacity is measured
CAPACITY_STREAMS = 8
END_BURST = 5  # Opus silence frames discord.py sends when a source ends
DUMP: list | None = None  # --dump: what each guild sent, heard and was told, for reading afterwards


@dataclass(frozen=True)
class Plan:
    name: str
    guilds: int
    users: int
    factor: float  # offered speech audio per second, as a multiple of the measured capacity
    window_s: float  # actions are spread over this
    drain_s: float  # then at most this long for everything to be heard or told
    seed: int = 20
    goals: dict = field(default_factory=dict)
    calibrate_s: float = 0.0  # first load this long to size the plan from the capacity beside playback (0: alone)


WAITS = ("say_ttfa_p95_s", "readout_delay_p95_s", "say_own_wait_p95_s", "readout_own_wait_p95_s")
OVER = Plan("over", guilds=50, users=20, factor=1.3, window_s=180.0, drain_s=90.0, calibrate_s=40.0,
            goals={"say_ttfa_p95_s": 10.0, "readout_delay_p95_s": 35.0})
UNDER = Plan("under", guilds=50, users=20, factor=0.7, window_s=180.0, drain_s=60.0, calibrate_s=40.0,
             goals={"say_own_wait_p95_s": 1.0, "readout_own_wait_p95_s": 2.0})
QUICK = Plan("quick", guilds=10, users=5, factor=0.7, window_s=20.0, drain_s=60.0, goals=UNDER.goals)
PLANS = {p.name: p for p in (OVER, UNDER, QUICK)}

PHRASES = [
    "Hello everyone.", "Good morning.", "I'll be back in five minutes.", "Did anyone see the match?",
    "That sounds great.", "Let's start the meeting.", "Can you hear me?", "Thanks a lot.",
    "See you tomorrow.", "Who is up for a game?", "The build is green again.", "Lunch is ready.",
    "Please mute your microphone.", "Nice work on the release.", "I'm going to grab a coffee.",
]
ZALGO = "".join(ch + "\u0336\u0317\u0345\u0353\u035c\u0361" * 3 for ch in "hello zalgo")


HOSTILE = ["zalgo", "10k", "control", "mentions", "markdown", "rtl"]


def hostile(rng: random.Random, mention_ids: list[int], kind: str | None = None) -> tuple[str, str]:
    """(kind, text) of one hostile message."""
    kind = kind or rng.choice(HOSTILE)
    if kind == "zalgo":
        return kind, ZALGO
    if kind == "10k":
        return kind, ("lorem ipsum dolor " * 600)[:10_000]
    if kind == "control":
        return kind, "\x00\x07\x1b[31mred\x1b[0m text\x08\x7f with \u200b\u200d\ufeff hidden bytes"
    if kind == "mentions":
        return kind, " ".join(f"<@{u}>" for u in mention_ids[:50]) + " look at this"
    if kind == "markdown":
        return kind, "***__~~||`" * 8 + "deep markdown" + "`||~~__***" * 8
    return kind, ("\u202eevil text\u202c \u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645 "
                  "\u05e9\u05dc\u05d5\u05dd")


# -- capacity ------------------------------------------------------------------------------------------------


async def spoken(kind: str, text: str, names: dict[int, str]) -> str | None:
    """What the bot says for `text` sent as `kind` in a guild with the default settings (bot/speech/say.py
    spoken_text, as SpeechService.say: readout cut at the guild's max_length, /say refused over the bot's
    limit): the expected rendering, "" for nothing, None: refused."""
    from bot import guild_options
    from bot.config import Settings
    from bot.speech.say import Reason, Refusal, SayOrder, spoken_text
    from bot.storage.settings_repo import GuildPrefs

    config = Settings()
    prefs = guild_options.effective(GuildPrefs(guild_id=0), config)
    order = SayOrder(guild=None, author=None, text=text, kind=kind, cut_long=kind == "readout",  # type: ignore[arg-type]
                     names=dict(names))  # no guild: mentions are named from `names` alone
    try:
        return (await spoken_text(order, config.speech, prefs))[0]
    except Refusal as exc:
        if exc.reason is Reason.EMPTY:
            return ""
        return None


async def expected_texts() -> dict[tuple[str, str], str | None]:
    """(kind, phrase or hostile kind) -> what the bot says; mentions as in a guild of users named user10xN."""
    names = {i: f"user10x{i}" for i in range(1, 21)}
    out: dict[tuple[str, str], str | None] = {}
    for kind in ("readout", "say"):
        out.update({(kind, p): await spoken(kind, p, names) for p in PHRASES})
        out.update({(kind, h): await spoken(kind, hostile(random.Random(0), list(names), h)[1],
                                            names) for h in HOSTILE})
    return out


class References:
    """The speech_frames of renderings of each text that is the same in every guild (not the mentions, whose names
    differ), by (kind, phrase or hostile kind), at each speed an utterance was played at (its user's speed and the
    catch-up, to SPEED_STEP): what a heard item is checked against. Rendered on an engine built from the bot's
    settings, as the bot builds it; REFERENCES renderings where the engine's are not all the same (Piper's sampling
    noise), one where they are (Kokoro)."""

    def __init__(self, engine, texts: dict[tuple[str, str], str | None]) -> None:
        self.engine = engine
        self.texts = {key: text for key, text in texts.items() if text and key[1] != "mentions"}
        self._frames: dict[tuple[str, float], list[np.ndarray]] = {}
        self.seconds: dict[tuple[str, float], float] = {}  # how long the first rendering is

    @staticmethod
    def step(speed: float) -> float:
        return round(round(speed / SPEED_STEP) * SPEED_STEP, 3)

    async def render(self, speeds: set[float]) -> None:
        """Render every text at each of `speeds` (to SPEED_STEP) not rendered yet."""
        from engine.base import Voice

        for speed in sorted({self.step(s) for s in speeds}):
            for text in set(self.texts.values()):
                if (text, speed) in self._frames:
                    continue
                renders = [await self.engine.synthesize_all(text, Voice(speed=speed))]
                renders += [await self.engine.synthesize_all(text, Voice(speed=speed))]
                if renders[0] != renders[1]:  # a sampling model: several renderings, the best counts
                    renders += [await self.engine.synthesize_all(text, Voice(speed=speed))
                                for _ in range(REFERENCES - 2)]
                self._frames[(text, speed)] = [speech_frames(mono(pcm)) for pcm in dict.fromkeys(renders)]
                self.seconds[(text, speed)] = len(renders[0]) / (48_000 * 4)

    def own(self, key: tuple[str, str], speed: float) -> list[np.ndarray] | None:
        text = self.texts.get(key)
        return None if text is None else self._frames.get((text, self.step(speed)))

    def others(self, key: tuple[str, str], speed: float) -> list[np.ndarray]:
        texts = {t for k, t in self.texts.items() if k[0] == key[0] and t != self.texts.get(key)}
        return [f for t in texts for f in self._frames.get((t, self.step(speed)), [])]


async def measure_capacity(engine) -> tuple[float, dict[tuple[str, str], float | None], References]:
    """(audio seconds per wall second with CAPACITY_STREAMS concurrent streams of this load's phrases: every slot
    busy, the audio seconds the bot should say for each (kind, phrase or hostile kind): None when it refuses, 0 for
    nothing to say, and the References, rendered at speed 1), on `engine`, built from the bot's own settings."""
    from engine.base import Voice

    await engine.warm_up()
    texts = await expected_texts()
    refs = References(engine, texts)
    await refs.render({1.0})
    lengths = {key: None if text is None else 0.0 if not text else refs.seconds.get((text, 1.0))
               or len(await engine.synthesize_all(text, Voice())) / (48_000 * 4) for key, text in texts.items()}
    made = 0.0
    stop_at = time.monotonic() + CAPACITY_S

    async def stream(k: int) -> None:
        nonlocal made
        rng = random.Random(k)
        while time.monotonic() < stop_at:
            async for chunk in engine.stream(rng.choice(PHRASES), Voice(), key=("capacity", k)):
                made += chunk.duration
    t0 = time.monotonic()
    await asyncio.gather(*(stream(k) for k in range(CAPACITY_STREAMS)))
    return made / (time.monotonic() - t0), lengths, refs


HOSTILE_SHARE = 0.15


def mean_item(lengths: dict[tuple[str, str], float | None]) -> float:
    """Expected audio seconds of one speech item of this load's mix (readout and /say, hostile included)."""
    def mean(kind: str, keys: list[str]) -> float:
        return sum(lengths[(kind, k)] or 0.0 for k in keys) / len(keys)
    w = WEIGHTS["readout"] / (WEIGHTS["readout"] + WEIGHTS["say"])
    return sum(share * ((1 - HOSTILE_SHARE) * mean(kind, PHRASES) + HOSTILE_SHARE * mean(kind, HOSTILE))
               for kind, share in (("readout", w), ("say", 1 - w)))


# -- the rooms and the traffic ---------------------------------------------------------------------------------


@dataclass
class Room:
    guild: object
    general: object
    voice: object
    users: list


@dataclass
class Item:
    """One request to speak, as the sandbox saw it."""

    kind: str  # readout | say
    key: str  # the phrase, or the hostile kind
    sent_at: float
    user_id: int
    expected_s: float | None  # audio seconds of what the bot should say (None: /say refuses it)
    expected_hi: float | None = None  # as long as this when a speed change was on its way (else expected_s)
    interaction: object = None  # /say
    message_id: int | None = None  # readout
    accepted: bool = True
    record: dict | None = None  # the bot's record of its utterance, when it was queued
    heard_at: float | None = None  # when its audio started in the capture, when all of it was heard
    margin: float | None = None  # how surely its heard audio is its own text (content_margin), when checked


@dataclass
class Traffic:
    items: dict = field(default_factory=lambda: collections.defaultdict(list))  # guild id -> [Item]
    commands: list = field(default_factory=list)  # (guild id, kind, Interaction)
    sent: collections.Counter = field(default_factory=collections.Counter)
    hostile: collections.Counter = field(default_factory=collections.Counter)
    offered_audio_s: float = 0.0


async def build_rooms(sb, plan: Plan) -> list[Room]:
    rooms = []
    for g in range(plan.guilds):
        guild = sb.guild(f"Load {g}")
        general, voice = guild.text_channel("general"), guild.voice_channel("Voice")
        users = []
        for u in range(plan.users):
            user = sb.user(f"user{g}x{u}")
            guild.add_member(user)
            await sb.user_joins_voice(user, voice)
            users.append(user)
        rooms.append(Room(guild, general, voice, users))
    return rooms


async def prepare(sb, rooms: list[Room]) -> None:
    """Readout on, "NAME said" off (twenty authors would double the audio), the bot in each voice channel, and
    one utterance per guild so every path is warm."""
    async def one(room: Room) -> None:
        for name, options in (("readout channel", {"channel": room.general}),
                              ("settings set", {"setting": "xsaid", "value": "off"})):
            it = await sb.slash(sb.owner, room.general, name, **options)
            await it.wait_text(timeout=60)
        it = await sb.slash(room.users[0], room.general, "join")
        await it.wait_text(timeout=60)
        await sb.wait_voice_connected(room.guild, timeout=60)
        it = await sb.slash(room.users[0], room.general, "say", text="Ready.")
        await it.wait_text(timeout=60)
        await sb.capture(room.guild).wait_for_audio(0.2, timeout=120)
    for i in range(0, len(rooms), 10):
        await asyncio.gather(*(one(r) for r in rooms[i:i + 10]))


def schedule(plan: Plan, rooms: list[Room], actions: int) -> list[tuple[float, int, int, str]]:
    """(at, room index, user index, action) sorted by time."""
    rng = random.Random(plan.seed)
    kinds = rng.choices(list(WEIGHTS), weights=list(WEIGHTS.values()), k=actions)
    return sorted((rng.uniform(0, plan.window_s), rng.randrange(len(rooms)), rng.randrange(plan.users), k)
                  for k in kinds)


async def drive(sb, plan: Plan, rooms: list[Room], actions: int, lengths: dict[str, float], traffic: Traffic) -> None:
    rng = random.Random(plan.seed + 1)
    speed: dict[int, float] = collections.defaultdict(lambda: 1.0)  # each user's speed, once the bot confirmed it
    asked: dict[int, float] = collections.defaultdict(lambda: 1.0)  # ... and as last asked for
    pending: list[asyncio.Task] = []
    start = time.monotonic()
    for at, ri, ui, kind in schedule(plan, rooms, actions):
        delay = start + at - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        room, user = rooms[ri], rooms[ri].users[ui]
        gid = room.guild.id
        traffic.sent[kind] += 1
        if kind in ("readout", "say"):
            text = key = rng.choice(PHRASES)
            if rng.random() < HOSTILE_SHARE:
                key, text = hostile(rng, [u.id for u in room.users])
                traffic.hostile[key] += 1
            length = lengths[(kind, key)]
            speeds = sorted({speed[user.id], asked[user.id]})  # a change not yet confirmed may apply already
            expected = None if length is None else length / speeds[-1]
            traffic.offered_audio_s += expected or 0.0
            item = Item(kind, key, time.monotonic(), user.id, expected, accepted=length != 0.0,
                        expected_hi=None if length is None else length / speeds[0])
            traffic.items[gid].append(item)
            if kind == "readout":
                message = await sb.post(user, room.general, text,
                                        mentions=room.users if text.startswith("<@") else None)
                item.message_id = message.id
            else:
                item.interaction = await sb.slash(user, room.general, "say", text=text)
            continue
        options = {}
        if kind == "voice settings":
            options = {"speed": rng.choice([0.9, 1.0, 1.2])}
            asked[user.id] = options["speed"]
        it = await sb.slash(user, room.general, kind, **options)
        traffic.commands.append((gid, kind, it))
        if kind == "voice settings":
            pending.append(asyncio.create_task(_track_speed(it, user.id, options["speed"], speed)))
    await asyncio.gather(*pending, return_exceptions=True)


async def _track_speed(it, user_id: int, value: float, speed: dict) -> None:
    """Later utterances of this user are expected at the new speed once the bot confirmed it."""
    try:
        await it.wait_text(timeout=60)
        speed[user_id] = value
    except Exception:  # noqa: BLE001 - a /settings reply that never came: the speed stays unconfirmed
        pass


def first_text(it) -> str | None:
    for r in it.responses:
        if r.kind in ("followup", "edit") or (r.kind == "callback" and r.type in (4, 7)):
            text = (r.message.content if r.message is not None and r.message.content else None) or r.content
            if text:
                return text
    return None


# -- what was heard ------------------------------------------------------------------------------------------


@dataclass
class Spurt:
    start: float
    end: float
    frames: int
    packets: list = field(default_factory=list, repr=False)
    seqs: list = field(default_factory=list, repr=False)  # each packet's RTP sequence number, unwrapped

    @property
    def seconds(self) -> float:
        return self.frames * FRAME_S


def in_send_order(packets: list) -> list[tuple[int, object]]:
    """(unwrapped RTP sequence number, packet) in the order the bot sent them: discord.py numbers every packet it
    sends, so the order holds however the arrival times lag and bunch when the sandbox's loop falls behind. A
    new SSRC (a new connection) follows the one before it."""
    last: dict[int, int] = {}
    keyed = []
    for i, p in enumerate(packets):
        prev = last.get(p.ssrc)
        seq = p.seq if prev is None else prev + ((p.seq - prev + 32768) % 65536 - 32768)
        last[p.ssrc] = seq if prev is None else max(prev, seq)
        keyed.append((list(last).index(p.ssrc), seq, i, p))
    return [(seq, p) for _, seq, _, p in sorted(keyed, key=lambda k: k[:3])]


def spurts(capture) -> list[Spurt]:
    """Each stretch the bot played, as the channel heard it: the packets in the order they were sent, cut at the
    Opus silence frames that end every stretch (discord.py's player and the bot's driver send five; the bot's
    own audio never encodes to that frame). Timing plays no part: a burst that arrived spread out still ends."""
    out: list[Spurt] = []
    current: Spurt | None = None
    for seq, p in in_send_order(capture.packets):
        if p.silence:
            current = None
            continue
        if current is None:
            current = Spurt(p.at, p.at, 0)
            out.append(current)
        current.end = max(current.end, p.at)
        current.frames += 1
        current.packets.append(p)
        current.seqs.append(seq)
    return out


def cut(s: Spurt, frames: int) -> tuple[Spurt, Spurt | None]:
    """A spurt of a stretch of `frames` frames, and what of the next stretch ran into it (None if nothing): the
    next one starts after END_BURST or more missing sequence numbers (the burst between them, all lost) that end
    no earlier than the stretch's frames and a burst after its first. More packets without such a gap are the
    stretch's own: the silence the player sent when its buffer ran dry (underruns, not in its frame count)."""
    def part(a: int, b: int) -> Spurt | None:
        ps = s.packets[a:b]
        return Spurt(ps[0].at, max(p.at for p in ps), len(ps), ps, s.seqs[a:b]) if ps else None
    k = next((k for k in range(1, len(s.seqs)) if s.seqs[k] - s.seqs[k - 1] > END_BURST
              and s.seqs[k] >= s.seqs[0] + frames + END_BURST), None)
    return (s, None) if k is None else (part(0, k), part(k, len(s.packets)))


def length_fits(seconds: float, item: Item) -> bool:
    """Whether `seconds` of heard audio is as long as `item`'s text should sound (a check independent of the
    bot's record)."""
    if not item.expected_s:
        return False
    hi = item.expected_hi or item.expected_s
    faster = item.record["catch_up"] if item.record else 1.0  # made faster while its channel was behind
    return item.expected_s / (LENGTH_TOLERANCE * faster) <= seconds <= hi * LENGTH_TOLERANCE


def label(items: list[Item], records: list[dict]) -> None:
    """Give each item the bot's record of its utterance, if it was queued: readout by its message's id, /say by
    its author in the order asked."""
    readout = {r["message_id"]: r for r in records if r["kind"] == "readout"}
    says: dict[int, collections.deque] = collections.defaultdict(collections.deque)
    for r in sorted((r for r in records if r["kind"] == "say"), key=lambda r: r["created_at"]):
        says[r["author"]].append(r)
    for it in items:
        if it.kind == "readout":
            it.record = readout.get(it.message_id)
        elif it.accepted and says[it.user_id]:
            it.record = says[it.user_id].popleft()


def whole(s: Spurt | None, frames: int) -> bool:
    """Whether spurt `s` holds a stretch of `frames` frames: all of them but what loopback may lose."""
    return s is not None and s.frames >= frames - max(FRAMES_SLACK, FRAMES_LOST * frames)


def find_audio(spurt_list: list[Spurt], records: list[dict]) -> int:
    """Give each stretch the player played its talk spurt: one voice per channel, so the stretches in the order
    they started and the spurts in the order they were sent pair up one after the other. A spurt heard before
    the stretch it would pair with began (SENT_SLACK_S) is audio of no item. A stretch was not heard when its next
    spurt comes more than MAX_LAG_S after it began, or starts where the stretch after it starts: by sequence
    number, each stretch's frames (or more: underruns) and a burst after the spurt before it; before any spurt
    was found, when the spurt came after the next stretch began and its frames are nearer that one's. A spurt
    may hold the next stretch too (the burst between them lost): cut. Sets record["spurts"] (None where a
    stretch has none); returns the spurts no stretch accounts for."""
    queue = collections.deque(spurt_list)
    spans = sorted(((start, frames, r) for r in records for start, frames in r["spans"]), key=lambda x: x[0])
    unclaimed = 0
    expected: int | None = None  # the sequence number this stretch's first frame had, from the spurts before it
    for i, (start, frames, r) in enumerate(spans):
        while queue and queue[0].start < start - SENT_SLACK_S:
            queue.popleft()
            unclaimed += 1
        found = queue[0] if queue and queue[0].start <= start + MAX_LAG_S else None
        if found is not None:
            if expected is not None:
                later = found.seqs[0] >= expected + frames + END_BURST
            else:
                later = i + 1 < len(spans) and whole(found, spans[i + 1][1]) and found.start >= spans[i + 1][0] \
                    - SENT_SLACK_S and abs(found.frames - spans[i + 1][1]) < abs(found.frames - frames)
            if later:
                found = None  # this stretch's audio never came: the spurt is a later one's
        if found is not None:
            queue.popleft()
            found, rest = cut(found, frames)
            if rest is not None:
                queue.appendleft(rest)
            expected = max(found.seqs[0] + frames, found.seqs[-1] + 1) + END_BURST
        elif expected is not None:
            expected += frames + END_BURST
        r.setdefault("spurts", []).append(found)
    return unclaimed + len(queue)


def heard_at(it: Item) -> float | None:
    """When the item's audio started in the capture, if the channel heard all of it: played, and every frame the
    player took is there, each stretch as one spurt (no gap that ended it early)."""
    r = it.record
    if r is None or r["outcome"] != "played" or not r["spans"]:
        return None
    if not all(whole(s, frames) for (_, frames), s in zip(r["spans"], r["spurts"])):
        return None
    return r["spurts"][0].start


def channel_busy(it: Item, others: list[Item]) -> float:
    """Seconds between the item's sending and its first heard frame that its channel spent speaking other items
    (one voice per channel: the wait no scheduling can remove)."""
    return sum(max(0.0, min(s.end, it.heard_at) - max(s.start, it.sent_at))
               for o in others if o is not it for s in o.record["spurts"] if s is not None)


def frames_missing(it: Item) -> int:
    """Frames of a heard item that did not reach the sandbox (within the slack heard_at allows)."""
    return sum(max(0, frames - s.frames) for (_, frames), s in zip(it.record["spans"], it.record["spurts"]))


def content_margin(heard: np.ndarray, own: list[np.ndarray], others: list[np.ndarray]) -> float:
    """How much more heard audio (its speech_frames) correlates with the renderings of its own text at the speed it
    was played (References; stretched to the same length: Piper's sampling noise; the best of them) than with any
    rendering of this load's other texts about as long at that speed; below CONTENT_MARGIN it does not sound like its
    text."""
    def best(refs: list[np.ndarray]) -> float:
        near = [o for o in refs if 1 / LENGTH_TOLERANCE ** 2 <= len(o) / max(1, len(heard)) <= LENGTH_TOLERANCE ** 2]
        return max((stretched_frames_correlation(heard, o) for o in near), default=-1.0)
    return max(stretched_frames_correlation(heard, o) for o in own) - best(others)


def content_margins(capture, items: list[Item], refs: References) -> list[float]:
    """The content_margin of each heard item's decoded audio (also set as its margin), beside the bot's record;
    items whose text is not rendered the same in every guild (mentions: the names differ) are not checked."""
    margins = []
    for it in items:
        speed = it.record.get("speed", 1.0) if it.record else 1.0
        own = refs.own((it.kind, it.key), speed)
        if it.heard_at is None or own is None:
            continue
        pcm = b"".join(pcm for s in it.record["spurts"] for _, pcm in capture.decoded(s.packets))
        others = refs.others((it.kind, it.key), speed)
        it.margin = content_margin(speech_frames(mono(pcm)), own, others)
        margins.append(it.margin)
    return margins


# -- accounting ----------------------------------------------------------------------------------------------


SKIPPED_NOTICE = re.compile(r"^Skipped (\d+) messages? to catch up")
STOPPED = re.compile(r"^Stopped( what was being said)?; (\d+) waiting")
TOLD_AUTHOR = ("faster than I can read", "could not read your message", "queue is full")


def posted_ms(snowflake: int) -> int:
    """When a message was posted (ms, the snowflake's clock)."""
    return snowflake >> 22


def told(items: list[Item], notices: list) -> int:
    """How many of `items` (readout refused at the door or failed) their authors were told about, each by a
    notice of its own: a bot message naming the author and a reason (TOLD_AUTHOR). A notice tells about the
    earliest item of its author not yet told that was sent before it; an item sent within the bot's TOLD_WINDOW_S
    after a notice to its author was told by that one (the bot tells a flooding user once in that window)."""
    from bot.readout import TOLD_WINDOW_S

    count = 0
    for user in {it.user_id for it in items}:
        at = sorted(posted_ms(m.id) for m in notices if f"<@{user}>" in m.content)
        free = list(at)
        for it in sorted((it for it in items if it.user_id == user), key=lambda it: it.message_id):
            sent = posted_ms(it.message_id)
            if any(sent - TOLD_WINDOW_S * 1000 <= t <= sent for t in at if t not in free):
                count += 1  # told moments before, not again
                continue
            own = next((t for t in free if t >= sent), None)
            if own is not None:
                free.remove(own)
                count += 1
    return count


def tally(items: list[Item], records: list[dict], spurt_list: list[Spurt], bot_msgs: list,
          commands: list[tuple[str, object]]) -> collections.Counter:
    """One guild's accounting, item by item: each accepted item is heard (found whole in the capture), skipped by a
    user (its utterance ended or taken out of the queue, as many as /skip and /stop answered), told (readout
    refused at the door or failed, with a notice of its own; readout skipped to catch up, as many as the catch-up
    notices counted; a /say refused with its reason) or lost. What the answers and notices claim beyond the
    items they can be about is counted_twice (a goal of 0, never netted against lost). Sets each item's record
    and heard_at. `commands`: (kind, interaction) of the guild's other commands."""
    counts = collections.Counter()
    for item in items:
        if item.kind == "say":
            answer = first_text(item.interaction)
            item.accepted = (answer or "").startswith(("Speaking", "Queued"))
            counts["say_unanswered" if answer is None else "say_told" if not item.accepted else "say_accepted"] += 1
    counts["unidentified_spurts"] = find_audio(spurt_list, records)
    speech = [it for it in items if it.accepted]  # readout with nothing to say is not
    label(speech, records)
    for it in speech:
        it.heard_at = heard_at(it)
        if it.heard_at is not None:
            counts["off_length"] += not length_fits(sum(s.seconds for s in it.record["spurts"]), it)
            counts["frames_missing"] += frames_missing(it)
    unheard = [it for it in speech if it.heard_at is None]

    def ended(*outcomes: str) -> list[Item]:
        return [it for it in unheard if (it.record["outcome"] if it.record else None) in outcomes]
    # each /skip answered "Skipped." ended one utterance, cut short or before its first word; /stop says how many
    answered = sum(1 for kind, it in commands if kind == "skip" and (first_text(it) or "").startswith("Skipped"))
    answered += sum(int(m.group(2)) + bool(m.group(1)) for kind, it in commands
                    if kind == "stop" for m in [STOPPED.match(first_text(it) or "")] if m)
    by_user = min(answered, len(ended("skipped", "removed")))
    refused = [it for it in ended(None, "failed") if it.kind == "readout"]
    told_own = told(refused, [x for x in bot_msgs if any(t in x.content for t in TOLD_AUTHOR)])
    caught_up = sum(int(m.group(1)) for m in (SKIPPED_NOTICE.match(x.content) for x in bot_msgs) if m)
    stale = len(refused) - told_own + len(ended("stale"))  # readout the catch-up notices can be about
    told_stale = min(caught_up, stale)
    heard = len(speech) - len(unheard)
    counts.update(accepted=len(speech) + counts["say_told"], heard=heard,
                  told=told_own + told_stale + counts["say_told"], skipped_by_user=by_user,
                  lost=len(unheard) - by_user - told_own - told_stale,
                  counted_twice=answered - by_user + caught_up - told_stale)
    return counts


def bot_posts(messages: list, bot_id: int, after: int) -> list:
    """The bot's messages posted after message id `after` (a calibration's catch-up notices are about its own items,
    not this run's)."""
    return [m for m in messages if m.author.id == bot_id and m.id > after]


def account(sb, rooms: list[Room], traffic: Traffic, records: list[dict],
            refs: References | None = None, before: dict[int, int] | None = None) -> dict:
    """Heard, told, skipped and lost per guild (tally), summed; the heard items' audio checked against renderings
    of their texts (`refs`: speech_frames of renderings by (kind, phrase or hostile kind)), TTFA and delays.
    `before`: per guild, the last message id posted before this traffic (the bot's earlier posts are not counted)."""
    totals = collections.Counter()
    say_ttfa: list[float] = []
    readout_delay: list[float] = []
    margins: list[float] = []  # content_margin of each heard item checked
    busy: dict[str, list[float]] = {"say": [], "readout": []}  # per heard item: its channel speaking others
    rest: dict[str, list[float]] = {"say": [], "readout": []}  # ... and the rest of its wait
    for room in rooms:
        gid = room.guild.id
        items = traffic.items.get(gid, [])
        capture = sb.capture(room.guild)
        spurt_list = spurts(capture)
        # everything the bot posted, also the tells it deleted after 20 s (their authors saw them)
        bot_msgs = bot_posts(room.general.messages, sb.bot_user.id, (before or {}).get(gid, 0))
        totals.update(tally(items, [r for r in records if r["guild"] == gid], spurt_list, bot_msgs,
                            [(kind, it) for g, kind, it in traffic.commands if g == gid]))
        heard_items = [it for it in items if it.heard_at is not None]
        if refs is not None:
            margins += content_margins(capture, heard_items, refs)
        say_ttfa += [it.heard_at - it.sent_at for it in heard_items if it.kind == "say"]
        readout_delay += [it.heard_at - it.sent_at for it in heard_items if it.kind == "readout"]
        for it in heard_items:
            busy[it.kind].append(channel_busy(it, heard_items))
            rest[it.kind].append(it.heard_at - it.sent_at - busy[it.kind][-1])
        if DUMP is not None:
            DUMP.append({"guild": gid, "spurts": [(round(s.start, 2), round(s.seconds, 2)) for s in spurt_list],
                         "packets": [(round(p.at, 3), p.seq, p.silence) for p in capture.packets],
                         "items": [(it.kind, it.key, round(it.sent_at, 2), it.expected_s and round(it.expected_s, 2),
                                    it.accepted, it.record and it.record["outcome"],
                                    it.heard_at and round(it.heard_at, 2), it.margin,
                                    it.record and it.record["catch_up"], it.record and len(it.record["spans"]))
                                   for it in items],
                         "bot": [m.content[:60] for m in bot_msgs],
                         "commands": [(kind, first_text(it)) for g, kind, it in traffic.commands if g == gid]})
    cmds = [it for _, _, it in traffic.commands]
    keys = ("accepted", "heard", "told", "skipped_by_user", "lost", "counted_twice", "say_told", "say_unanswered",
            "unidentified_spurts", "off_length", "frames_missing")
    return {**{k: totals[k] for k in keys}, "content_checked": len(margins),
            "content_failed": sum(1 for m in margins if m < CONTENT_MARGIN),
            "content_margin_min": min(margins, default=math.nan), "say_ttfa": say_ttfa, "readout_delay": readout_delay,
            "busy": busy, "rest": rest,
            "commands": len(cmds), "commands_unanswered": sum(1 for it in cmds if first_text(it) is None)}


# -- the run ------------------------------------------------------------------------------------------------


async def settle(sb, rooms: list[Room], traffic: Traffic, timeout: float) -> bool:
    """Until every channel has been quiet for 4 s (nothing left to say or tell), at most `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        last = max((p.at for r in rooms for p in sb.capture(r.guild).packets[-1:]), default=0.0)
        answered = all(first_text(it.interaction) is not None
                       for items in traffic.items.values() for it in items if it.kind == "say")
        if answered and time.monotonic() - last > 4.0:
            return True
        await asyncio.sleep(0.5)
    return False


async def run(plan: Plan) -> dict:
    from engine.factory import build_engine

    with tempfile.TemporaryDirectory(prefix="load-") as tmp:
        data = Path(tmp)
        engine_settings = bench_settings(data).engine
        engine = build_engine(engine_settings)  # the bot's settings, as the bot builds it: capacity and references
        try:
            return await _run(plan, data, engine)
        finally:
            await engine.close()


async def _run(plan: Plan, data: Path, engine) -> dict:
    """The plan against the bot in its own process, sized and checked with `engine` (capacity, references)."""
    capacity, lengths, refs = await measure_capacity(engine)
    engine_settings = bench_settings(data).engine
    slots = min(engine_settings.workers, engine_settings.max_concurrency)
    mean = mean_item(lengths)
    actions = max(20, round(plan.factor * capacity * plan.window_s / (mean * SPEECH_SHARE)))
    traffic = Traffic()
    async with Sandbox() as sb:
        rooms = await build_rooms(sb, plan)
        async with bot_subprocess(sb, data, max_s=plan.window_s + plan.drain_s + 900) as child:
            t_setup = time.monotonic()
            await prepare(sb, rooms)
            await settle(sb, rooms, traffic, 120)
            for r in rooms:
                sb.capture(r.guild).clear()
            setup_s = time.monotonic() - t_setup
            calibration = {}
            if plan.calibrate_s > 0:
                calibration = await calibrate(sb, plan, rooms, data, capacity, slots, mean, lengths)
                actions = max(20, round(plan.factor * calibration["capacity"] * plan.window_s /
                                        (mean * SPEECH_SHARE)))
            # what the bot posted before (setup, the calibration's notices) is about none of this run's items
            before = {r.guild.id: max((m.id for m in r.general.messages), default=0) for r in rooms}
            t0, cpu0, own0 = time.monotonic(), cpu_seconds(child.pid), cpu_seconds()
            await drive(sb, plan, rooms, actions, lengths, traffic)
            sent_s = time.monotonic() - t0
            cores = ((cpu_seconds(child.pid) - cpu0) / sent_s, (cpu_seconds() - own0) / sent_s)
            drained = await settle(sb, rooms, traffic, plan.drain_s)
            load_s = time.monotonic() - t0
            bot_peak = peak_rss_mb(child.pid)
        stats = json.loads((data / "child-stats.json").read_text())
        if DUMP is not None:
            DUMP.append({"child_log": (data / "child.log").read_text(errors="replace")[-200_000:],
                         "utterances": (data / "utterances.jsonl").read_text()})
        utterances = [json.loads(line) for line in (data / "utterances.jsonl").read_text().splitlines()]
        await refs.render({u.get("speed", 1.0) for u in utterances})  # each speed played, after the bot's run
        counts = account(sb, rooms, traffic, [u for u in utterances if u["created_at"] >= t0], refs, before)
    restore_discord()
    utterances = [u for u in utterances if u["created_at"] >= t0]  # not the warm-up "Ready." of each guild
    played = [u for u in utterances if u["outcome"] == "played" and u["kind"] != "preview"]
    return {
        **counts, "plan": plan, "capacity": capacity, "mean_phrase_s": mean, "actions": actions,
        "calibration": calibration,
        "offered": traffic.offered_audio_s / plan.window_s / calibration.get("capacity", capacity),
        "sent": dict(traffic.sent),
        "hostile": dict(traffic.hostile), "setup_s": setup_s, "sent_s": sent_s, "load_s": load_s,
        "drained": drained, "cores": cores, "bot_peak_rss_mb": max(bot_peak, stats["peak_rss_mb"]),
        "loop_lag_p99_ms": pct(stats["lag_s"], 0.99) * 1000 if stats["lag_s"] else float("nan"),
        "underruns": sum(u["underruns"] for u in played), "played": len(played),
        "faster": [u["catch_up"] for u in played if u["catch_up"] > 1.0],
        "engine_beside": engine_beside(stats["engine"], t0, t0 + sent_s, slots),
        "outcomes": dict(collections.Counter(u["outcome"] for u in utterances)),
    }


async def calibrate(sb, plan: Plan, rooms: list[Room], data: Path, capacity: float, slots: int,
                    mean: float, lengths: dict) -> dict:
    """Load at the plan's factor (at most 1x) of the capacity measured alone for `plan.calibrate_s`, read how fast the
    bot's engine synthesized meanwhile with every slot busy, beside its playback and the sandbox, let it drain, and
    clear the captures; the capacity there sizes the plan."""
    trial = dataclasses.replace(plan, window_s=plan.calibrate_s, seed=plan.seed + 1000, factor=min(plan.factor, 1.0))
    actions = max(10, round(trial.factor * capacity * trial.window_s / (mean * SPEECH_SHARE)))
    t0 = time.monotonic()
    await drive(sb, trial, rooms, actions, lengths, Traffic())
    t1 = time.monotonic()
    await asyncio.sleep(1.5)  # the child writes its engine's totals each second
    beside = engine_beside(engine_totals(data), t0, t1, slots)
    if not beside:
        raise RuntimeError("calibration: the bot's engine reported no totals")
    await settle(sb, rooms, Traffic(), plan.drain_s)
    await asyncio.sleep(3.0)  # what was still speaking ends
    for r in rooms:
        sb.capture(r.guild).clear()
    return {**beside, "seconds": t1 - t0, "actions": actions}


MIN_FULL_S = 5.0  # slot seconds at full load a stretch needs for its speed there to size a plan


def engine_beside(totals: list, t0: float, t1: float, slots: int) -> dict:
    """How the bot's engine did while the load was sent, beside everything else on the machine (the bot's
    playback, the sandbox): the share of its slots' time it was synthesizing, the audio it made per second, and its
    speed with every slot busy (audio per slot-second at full load, as the engine measured it window by window: one
    inference may use every core, so a slot alone runs faster than each of several at once), and from that the
    capacity it has there, the load it runs at when it is full. With too little time at full load, the nearest load
    measured, its total shared among the slots."""
    inside = [t for t in totals if t0 <= t[0] <= t1]
    if len(inside) < 2:
        return {}
    (ta, audio_a, synth_a, load_a), (tb, audio_b, synth_b, load_b) = inside[0], inside[-1]
    per_load = {int(k): [v[0] - load_a.get(k, [0.0, 0.0])[0], v[1] - load_a.get(k, [0.0, 0.0])[1]]
                for k, v in load_b.items()}
    measured = {k: a / s for k, (a, s) in per_load.items() if s >= MIN_FULL_S or (k == slots and s > 0)}
    if not measured:
        return {}
    level = slots if slots in measured else min(measured, key=lambda k: abs(k - slots))
    full = measured[level] * min(1.0, level / slots)
    return {"busy": (synth_b - synth_a) / (slots * (tb - ta)), "per_slot_full": full, "level": level,
            "full_s": per_load.get(slots, [0.0, 0.0])[1], "capacity": slots * full,
            "made": (audio_b - audio_a) / (tb - ta),
            "speeds": {k: round(v, 2) for k, v in sorted(measured.items())}}


def goal_line(name: str, value: float, goal: float, fmt: str = "{:.2f}", *, at_least: bool = False) -> tuple[str, bool]:
    ok = value >= goal if at_least else value <= goal
    sign = ">=" if at_least else "<="
    return f"{name}: {fmt.format(value)} (goal {sign} {fmt.format(goal)}) {'OK' if ok else 'MISSED'}", ok


def offered_line(offered: float, factor: float) -> tuple[str, bool]:
    """The speech offered over the capacity the plan was sized from: within 0.1 of the plan's factor."""
    ok = abs(offered - factor) <= 0.1
    return f"offered_vs_capacity: {offered:.2f} (plan {factor:.1f}x, goal within 0.1) {'OK' if ok else 'MISSED'}", ok


def wait_line(name: str, r: dict, plan: Plan) -> tuple[str, bool | None]:
    """A p95 wait: total (from the item's sending: say_ttfa, readout_delay) or the bot's own part (own_wait);
    with its goal when the plan has one, else for context."""
    kind = name.split("_", 1)[0]
    values = r["rest"][kind] if "own_wait" in name else r["say_ttfa" if kind == "say" else "readout_delay"]
    value = pct(values, 0.95) if values else math.inf
    if name in plan.goals:
        return goal_line(name, value, plan.goals[name])
    why = "the bot's own part of the wait" if "own_wait" in name else "includes its channel speaking earlier items"
    return f"{name}: {value:.2f} (no goal in this plan: {why})", None


def report(r: dict) -> int:
    plan: Plan = r["plan"]
    print(f"load plan {plan.name}: {plan.guilds} guilds x {plan.users} users, {r['actions']} actions over "
          f"{plan.window_s:.0f} s (sent in {r['sent_s']:.1f} s; settled {'yes' if r['drained'] else 'NO'}, "
          f"{r['load_s']:.1f} s in all; setup {r['setup_s']:.1f} s)")
    print(f"engine capacity: {r['capacity']:.2f} audio s per s ({CAPACITY_STREAMS} streams, measured in this run); "
          f"mean item {r['mean_phrase_s']:.2f} s of audio")
    if c := r["calibration"]:
        print(f"calibration: {c['actions']} actions over {c['seconds']:.0f} s: slots busy {c['busy']:.0%}, speed per "
              f"slot by slots busy {c['speeds']} audio s per slot-second: capacity beside the bot's playback with "
              f"{c['level']} busy {c['capacity']:.2f} audio s per s; the plan is sized from it")
    print(f"sent: {r['sent']}; hostile: {r['hostile']}")
    if e := r["engine_beside"]:
        print(f"engine while sending, beside the bot's playback and the sandbox: slots busy {e['busy']:.0%} of the "
              f"time, made {e['made']:.2f} audio s per s; speed per slot by slots busy {e['speeds']}: capacity there "
              f"{e['capacity']:.2f} audio s per s ({e['full_s']:.0f} slot-s at full load), the offered load "
              f"{r['offered'] * (r['calibration'] or {}).get('capacity', r['capacity']) / e['capacity']:.2f}x of it")
    print(f"CPU while sending (cores of {os.cpu_count()}): bot {r['cores'][0]:.2f}, sandbox and bench "
          f"{r['cores'][1]:.2f}")
    print(f"accepted {r['accepted']}: heard {r['heard']}, told {r['told']} (refused or skipped with a message), "
          f"skipped by a user {r['skipped_by_user']}; unanswered /say {r['say_unanswered']}; audio of no item "
          f"{r['unidentified_spurts']} spurts; heard at an unexpected length {r['off_length']}; frames the "
          f"sandbox missed in heard items {r['frames_missing']}; counted twice {r['counted_twice']}; not sounding "
          f"like their text {r['content_failed']} of {r['content_checked']} checked (least margin "
          f"{r['content_margin_min']:.2f}, {CONTENT_MARGIN} needed)")
    print(f"bot utterance outcomes: {r['outcomes']}")
    faster = r["faster"]
    print(f"made faster to catch up: {len(faster)} of {r['played']} played"
          + (f" (mean x{sum(faster) / len(faster):.2f}, most x{max(faster):.2f})" if faster else ""))
    print(f"other commands: {r['commands']}, unanswered: {r['commands_unanswered']}")
    for kind in ("say", "readout"):
        b, w = r["busy"][kind], r["rest"][kind]
        if b:
            print(f"{kind} wait, heard items: its channel speaking other items p50 {pct(b, 0.5):.2f} p95 "
                  f"{pct(b, 0.95):.2f} s; the rest (synthesis, engine queue, start) p50 {pct(w, 0.5):.2f} p95 "
                  f"{pct(w, 0.95):.2f} s")
    lines = [
        offered_line(r["offered"], plan.factor),
        goal_line("underruns_per_100_utterances", 100 * r["underruns"] / max(1, r["played"]), 1.0),
        *(wait_line(name, r, plan) for name in WAITS),
        goal_line("lost_heard", r["lost"], 0, "{:.0f}"),
        goal_line("say_unanswered", r["say_unanswered"], 0, "{:.0f}"),
        goal_line("counted_twice", r["counted_twice"], 0, "{:.0f}"),
        goal_line("unidentified_spurts", r["unidentified_spurts"], 0, "{:.0f}"),
        goal_line("content_failed", r["content_failed"], 0, "{:.0f}"),
        goal_line("bot_peak_rss_mb", r["bot_peak_rss_mb"], 1024, "{:.0f}"),
        goal_line("loop_lag_p99_ms", r["loop_lag_p99_ms"], 50.0, "{:.1f}"),
    ]
    goals = [ok for _, ok in lines if ok is not None]
    for text, _ in lines:
        print(text)
    met = sum(goals) + (r["commands_unanswered"] == 0)
    unanswered = r["commands_unanswered"]
    print(f"commands_unanswered: {unanswered} (goal 0) {'OK' if unanswered == 0 else 'MISSED'}")
    print(f"load: {met}/{len(goals) + 1} goals met")
    return 0 if met == len(goals) + 1 else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--plan", choices=sorted(PLANS), default="over")
    ap.add_argument("--quick", action="store_true", help="the CI smoke plan (same as --plan quick)")
    ap.add_argument("--guilds", type=int)
    ap.add_argument("--users", type=int)
    ap.add_argument("--window", type=float, help="seconds over which the actions are sent")
    ap.add_argument("--factor", type=float, help="offered speech as a multiple of the measured capacity")
    ap.add_argument("--seed", type=int)
    ap.add_argument("--dump", type=Path, help="write each guild's items, talk spurts and bot messages here (JSON)")
    args = ap.parse_args(argv)
    global DUMP
    DUMP = [] if args.dump else None
    plan = QUICK if args.quick else PLANS[args.plan]
    changes = {k: v for k, v in {"guilds": args.guilds, "users": args.users, "window_s": args.window,
                                 "factor": args.factor, "seed": args.seed}.items() if v is not None}
    result = asyncio.run(run(dataclasses.replace(plan, **changes)))
    if args.dump:
        args.dump.write_text(json.dumps(DUMP, indent=1))
    return report(result)


if __name__ == "__main__":
    sys.exit(main())
