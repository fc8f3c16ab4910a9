"""The load bench's traffic: its plans, the phrases and hostile texts users send, what the bot should say for each, and
the rooms (guilds, their users in voice) it is sent in."""

from __future__ import annotations

import asyncio
import collections
import random
from dataclasses import dataclass, field


class Dump:
    """--dump: what each guild sent, heard and was told, for reading afterwards (None: not asked for)."""

    entries: list | None = None


SPEECH_SHARE = 0.65  # readout + /say among all actions


WEIGHTS = {"readout": 45, "say": 20, "skip": 5, "stop": 1, "queue": 8, "voice list": 8, "voice settings": 5,
           "settings show": 8}


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
    talkers: int = 0  # members of the first guild talking in the bot's call all through the plan (its receive path)


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


async def spoken(kind: str, text: str, names: dict[int, str]) -> str | None:
    """What the bot says for `text` sent as `kind` in a guild with the default settings (bot/speech/text/say.py
    spoken_text, as SpeechService.say: readout cut at the guild's max_length, /say refused over the bot's
    limit): the expected rendering, "" for nothing, None: refused."""
    from bot import guild_options
    from bot.config import Settings
    from bot.speech.text.say import Reason, Refusal, SayOrder, spoken_text
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


HOSTILE_SHARE = 0.15


def mean_item(lengths: dict[tuple[str, str], float | None]) -> float:
    """Expected audio seconds of one speech item of this load's mix (readout and /say, hostile included)."""
    def mean(kind: str, keys: list[str]) -> float:
        return sum(lengths[(kind, k)] or 0.0 for k in keys) / len(keys)
    w = WEIGHTS["readout"] / (WEIGHTS["readout"] + WEIGHTS["say"])
    return sum(share * ((1 - HOSTILE_SHARE) * mean(kind, PHRASES) + HOSTILE_SHARE * mean(kind, HOSTILE))
               for kind, share in (("readout", w), ("say", 1 - w)))


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


def dealt(rng: random.Random, weights: dict[str, float], n: int) -> list[str]:
    """`n` keys in the proportions of `weights`, exactly (largest remainders), in a random order: the plan's mix
    without the luck of independent draws (four 10k-character messages drawn in one over plan offered 1.41x for
    its 1.3x)."""
    total = sum(weights.values())
    exact = {k: n * w / total for k, w in weights.items()}
    counts = {k: int(v) for k, v in exact.items()}
    for k in sorted(exact, key=lambda k: exact[k] - counts[k], reverse=True)[: n - sum(counts.values())]:
        counts[k] += 1
    out = [k for k, c in counts.items() for _ in range(c)]
    rng.shuffle(out)
    return out


def speech_texts(rng: random.Random, n: int) -> list[str]:
    """The text keys of `n` speech items: each phrase and each hostile kind as often as mean_item weighs it."""
    weights = {**{p: (1 - HOSTILE_SHARE) / len(PHRASES) for p in PHRASES},
               **{h: HOSTILE_SHARE / len(HOSTILE) for h in HOSTILE}}
    return dealt(rng, weights, n)


def schedule(plan: Plan, rooms: list[Room], actions: int) -> list[tuple[float, int, int, str]]:
    """(at, room index, user index, action) sorted by time."""
    rng = random.Random(plan.seed)
    kinds = dealt(rng, {k: float(w) for k, w in WEIGHTS.items()}, actions)
    return sorted((rng.uniform(0, plan.window_s), rng.randrange(len(rooms)), rng.randrange(plan.users), k)
                  for k in kinds)


def first_text(it) -> str | None:
    for r in it.responses:
        if r.kind in ("followup", "edit") or (r.kind == "callback" and r.type in (4, 7)):
            text = (r.message.content if r.message is not None and r.message.content else None) or r.content
            if text:
                return text
    return None
