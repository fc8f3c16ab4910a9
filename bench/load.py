"""Load through the sandbox: guilds x users sending readout messages and slash commands (hostile text
included) at the real bot; prints what was accepted, spoken, rejected with a message, skipped, lost,
TTFA, underruns, peak memory, event-loop lag and tasks left running.

    python -m bench.load            # 50 guilds x 20 users, 2,000 actions over 180 s (<= ~5 min in all)
    python -m bench.load --quick    # 10 guilds x 5 users, 120 actions over 20 s (<= ~60 s; the CI smoke test)

lost = accepted - spoken - rejected with a message - skipped by a user; the goal is 0. The sandbox runs
on the same event loop as the bot, so the loop lag measured includes the sandbox's own work (RTP
decryption and Opus decoding for every guild): an upper bound on the bot's.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import dataclasses
import gc
import logging
import random
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bot.config import DEFAULT_CONFIG, load_settings  # noqa: E402
from demo.sandbox_bot import sandbox_settings, start_bot  # noqa: E402
from sandbox import Sandbox, restore_discord  # noqa: E402


@dataclass(frozen=True)
class Plan:
    guilds: int
    users: int
    actions: int
    window_s: float  # actions are spread over this
    drain_s: float  # then at most this long for queues to empty
    seed: int = 20


FULL = Plan(guilds=50, users=20, actions=2000, window_s=180.0, drain_s=110.0)
QUICK = Plan(guilds=10, users=5, actions=120, window_s=20.0, drain_s=25.0)

PHRASES = [
    "Hello everyone.", "Good morning.", "I'll be back in five minutes.", "Did anyone see the match?",
    "That sounds great.", "Let's start the meeting.", "Can you hear me?", "Thanks a lot.",
    "See you tomorrow.", "Who is up for a game?", "The build is green again.", "Lunch is ready.",
    "Please mute your microphone.", "Nice work on the release.", "I'm going to grab a coffee.",
]
ZALGO = "".join(ch + "\u0336\u0317\u0345\u0353\u035c\u0361" * 3 for ch in "hello zalgo")


def hostile(rng: random.Random, mention_ids: list[int]) -> tuple[str, str]:
    """(kind, text) of one hostile message."""
    kind = rng.choice(["zalgo", "10k", "control", "mentions", "markdown", "rtl"])
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
    return kind, "\u202eevil text\u202c \u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645 \u05e9\u05dc\u05d5\u05dd"


@dataclass
class Room:
    guild: object
    general: object
    voice: object
    users: list


@dataclass
class Tally:
    """What happened, as a user would see it, plus the bot's own outcome reports."""

    sent: collections.Counter = field(default_factory=collections.Counter)
    interactions: list = field(default_factory=list)  # (kind, Interaction)
    readout_ids: set = field(default_factory=set)
    decisions: dict = field(default_factory=dict)  # message id -> Decision
    outcomes: list = field(default_factory=list)  # (guild, kind, outcome, ttfa, error, author, channel, underruns)
    hostile: collections.Counter = field(default_factory=collections.Counter)


def settings_for(tmp: Path):
    s = load_settings(DEFAULT_CONFIG, environ={})
    s = dataclasses.replace(s, database=dataclasses.replace(s.database, path=str(tmp / "load.db")))
    s = dataclasses.replace(s, speech=dataclasses.replace(s.speech, idle_leave_s=0.0))
    return s


def peak_rss_mb() -> float:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    v = sorted(values)
    return v[min(len(v) - 1, int(round(q * (len(v) - 1))))]


def task_kind(t: asyncio.Task) -> str:
    coro = t.get_coro()
    return getattr(coro, "__qualname__", None) or type(coro).__name__


class GcPauses:
    """Durations of the garbage collector's passes (they stop the loop too)."""

    def __init__(self) -> None:
        self.pauses: list[float] = []
        self._t0 = 0.0

    def __call__(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._t0 = time.perf_counter()
        else:
            self.pauses.append(time.perf_counter() - self._t0)


async def lag_ticker(samples: list[float], stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        t0 = loop.time()
        await asyncio.sleep(0.01)
        samples.append(loop.time() - t0 - 0.01)


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


async def prepare(sb, bot, rooms: list[Room]) -> None:
    """Readout on (xsaid off), the bot in each voice channel, one utterance per guild (so the idle set
    includes the speakers)."""
    async def one(room: Room) -> None:
        it = await sb.slash(sb.owner, room.general, "readout channel", channel=room.general)
        await it.wait_text(timeout=60)
        # "NAME said" off: twenty authors a guild would otherwise double every message's audio
        it = await sb.slash(sb.owner, room.general, "settings set", setting="xsaid", value="off")
        await it.wait_text(timeout=60)
        it = await sb.slash(room.users[0], room.general, "join")
        await it.wait_text(timeout=60)
        await sb.wait_voice_connected(room.guild, timeout=60)
        it = await sb.slash(room.users[0], room.general, "say", text="Ready.")
        await it.wait_text(timeout=60)
    for i in range(0, len(rooms), 10):
        await asyncio.gather(*(one(r) for r in rooms[i:i + 10]))
    await wait_idle(bot, 60)


async def wait_idle(bot, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(sp.idle for sp in bot.speech.speakers.values()):
            return True
        await asyncio.sleep(0.1)
    return False


def schedule(plan: Plan, rooms: list[Room]) -> list[tuple[float, int, int, str]]:
    """(at, room index, user index, action) sorted by time."""
    rng = random.Random(plan.seed)
    weights = {"readout": 45, "say": 20, "skip": 5, "stop": 1, "queue": 8, "voice list": 8,
               "voice settings": 5, "settings show": 8}
    kinds = rng.choices(list(weights), weights=list(weights.values()), k=plan.actions)
    return sorted((rng.uniform(0, plan.window_s), rng.randrange(len(rooms)), rng.randrange(plan.users), k)
                  for k in kinds)


async def drive(sb, plan: Plan, rooms: list[Room], tally: Tally) -> None:
    rng = random.Random(plan.seed + 1)
    start = time.monotonic()
    for at, ri, ui, kind in schedule(plan, rooms):
        delay = start + at - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        room, user = rooms[ri], rooms[ri].users[ui]
        text = rng.choice(PHRASES)
        if kind in ("readout", "say") and rng.random() < 0.15:
            hk, text = hostile(rng, [u.id for u in room.users])
            tally.hostile[hk] += 1
        tally.sent[kind] += 1
        if kind == "readout":
            mentions = room.users if text.startswith("<@") else None
            msg = await sb.post(user, room.general, text, mentions=mentions)
            tally.readout_ids.add(msg.id)
            continue
        options = {"say": {"text": text}, "voice settings": {"speed": rng.choice([0.9, 1.0, 1.2])}}.get(kind, {})
        it = await sb.slash(user, room.general, kind, **options)
        tally.interactions.append((kind, it))


def instrument(bot, tally: Tally) -> None:
    def on_utterance(guild_id, utt, outcome) -> None:
        r = utt.request
        tally.outcomes.append((guild_id, r.kind, outcome.value, utt.ttfa, utt.error, r.author_id, r.channel_id,
                               utt.source.underruns if utt.source is not None else 0))
    bot.speech.listeners.append(on_utterance)
    service = bot.readout
    original = service.handle

    async def handle(message):
        decision = await original(message)
        tally.decisions[message.id] = decision
        return decision
    service.handle = handle


def first_text(it) -> str | None:
    for r in it.responses:
        if r.kind in ("followup", "edit") or (r.kind == "callback" and r.type in (4, 7)):
            text = (r.message.content if r.message is not None and r.message.content else None) or r.content
            if text:
                return text
    return None


def account(sb, tally: Tally, rooms: list[Room]) -> dict:
    """The user-visible accounting. A request is accepted when the bot should act on it."""
    say_its = [it for k, it in tally.interactions if k == "say"]
    cmd_its = [it for k, it in tally.interactions if k != "say"]
    say_queued = say_rejected = say_unanswered = 0
    for it in say_its:
        text = first_text(it)
        if text is None:
            say_unanswered += 1
        elif text.startswith(("Speaking", "Queued")):
            say_queued += 1
        else:
            say_rejected += 1
    from bot.readout import Skip

    ignored_rules = {Skip.NOT_READOUT, Skip.BOT, Skip.PREFIX, Skip.OPTED_OUT, Skip.ROLE, Skip.NOT_IN_VOICE,
                     Skip.EMPTY, Skip.NOT_CONNECTED}
    readout_queued = readout_told = readout_untold = readout_ignored = readout_undecided = 0
    for mid in tally.readout_ids:
        d = tally.decisions.get(mid)
        if d is None:
            readout_undecided += 1
        elif d.queued:
            readout_queued += 1
        elif d.skip in ignored_rules:
            readout_ignored += 1
        elif d.told:
            readout_told += 1
        else:
            readout_untold += 1
    # outcomes of what was queued during the load (the warm-up "Ready." utterances are excluded)
    played = failed_told = failed_untold = skipped = 0
    by_channel_user: dict[tuple[int, int], list] = collections.defaultdict(list)
    for it in say_its:
        by_channel_user[(it.channel.id, it.user.id)].append(it)
    channels = {r.general.id: r.general for r in rooms}
    for _, kind, outcome, _, error, author, channel, _ in tally.outcomes:
        if outcome == "played":
            played += 1
        elif outcome in ("skipped", "removed"):
            skipped += 1
        elif outcome == "failed":
            if kind == "say":
                seen = any(any((r.content or "") == error for r in it.responses)
                           for it in by_channel_user.get((channel, author), []))
            else:
                ch = channels.get(channel)
                seen = ch is not None and any(f"<@{author}>" in m.content and "could not read" in m.content
                                              for m in ch.messages if m.author.id == sb.bot_user.id)
            failed_told += seen
            failed_untold += not seen
    accepted = len(say_its) + len(tally.readout_ids) - readout_ignored
    rejected = say_rejected + readout_told + failed_told
    lost = accepted - played - rejected - skipped
    return {
        "accepted": accepted, "spoken": played, "rejected_with_message": rejected, "skipped_by_user": skipped,
        "lost": lost, "say_unanswered": say_unanswered, "readout_undecided": readout_undecided,
        "readout_untold": readout_untold, "failed_untold": failed_untold, "readout_ignored": readout_ignored,
        "queued": say_queued + readout_queued, "commands": len(cmd_its),
        "commands_unanswered": sum(1 for it in cmd_its if first_text(it) is None),
    }


async def run(plan: Plan, *, log_level: str = "ERROR") -> dict:
    logging.basicConfig(level=getattr(logging, log_level), format="%(levelname)s %(name)s: %(message)s")
    tally = Tally()
    with tempfile.TemporaryDirectory(prefix="load-") as tmp:
        settings = settings_for(Path(tmp))
        async with Sandbox() as sb:
            rooms = await build_rooms(sb, plan)
            t_start = time.monotonic()
            running = await start_bot(sb, sandbox_settings(settings, sb), ready_timeout=120)
            bot = running.bot
            try:
                await prepare(sb, bot, rooms)
                instrument(bot, tally)
                gc.collect()
                await asyncio.sleep(0.5)
                me = asyncio.current_task()
                idle_kinds = collections.Counter(task_kind(t) for t in asyncio.all_tasks() if t is not me)
                setup_s = time.monotonic() - t_start
                lags: list[float] = []
                stop = asyncio.Event()
                ticker = asyncio.create_task(lag_ticker(lags, stop))
                gcp = GcPauses()
                gc.callbacks.append(gcp)
                t0 = time.monotonic()
                await drive(sb, plan, rooms, tally)
                sent_s = time.monotonic() - t0
                drained = await wait_idle(bot, plan.drain_s)
                await asyncio.sleep(1.0)  # last answers, listeners and sends settle
                load_s = time.monotonic() - t0
                stop.set()
                await ticker
                gc.callbacks.remove(gcp)
                gc.collect()
                end_kinds = collections.Counter(task_kind(t) for t in asyncio.all_tasks() if t is not me)
                extra = end_kinds - idle_kinds
                counts = account(sb, tally, rooms)
                ttfas = [o[3] for o in tally.outcomes if o[2] == "played" and o[3] is not None]
                result = {
                    **counts, "drained": drained, "setup_s": setup_s, "sent_s": sent_s, "load_s": load_s,
                    "ttfa_p50_ms": pct(ttfas, 0.50) * 1000, "ttfa_p95_ms": pct(ttfas, 0.95) * 1000,
                    "underruns": sum(o[7] for o in tally.outcomes),
                    "peak_rss_mb": peak_rss_mb(), "loop_lag_p99_ms": pct(lags, 0.99) * 1000,
                    "loop_lag_max_ms": max(lags, default=0.0) * 1000,
                    "gc_max_ms": max(gcp.pauses, default=0.0) * 1000,
                    "sessions": getattr(getattr(bot.engine, "backend", None), "sessions_alive", 0),
                    "threads": threading.active_count(),
                    "tasks_idle": sum(idle_kinds.values()), "tasks_end": sum(end_kinds.values()),
                    "tasks_left": sum(extra.values()), "tasks_left_kinds": dict(extra),
                    "sent": dict(tally.sent), "hostile": dict(tally.hostile),
                    "outcomes": dict(collections.Counter(o[2] for o in tally.outcomes)),
                }
            finally:
                await running.stop()
        restore_discord()
    return result


def report(plan: Plan, r: dict) -> None:
    print(f"load: {plan.guilds} guilds x {plan.users} users, {plan.actions} actions over {plan.window_s:.0f} s "
          f"(sent in {r['sent_s']:.1f} s, drained {'yes' if r['drained'] else 'NO'}, {r['load_s']:.1f} s in all; "
          f"setup {r['setup_s']:.1f} s)")
    print(f"sent: {r['sent']}; hostile: {r['hostile']}")
    print(f"accepted: {r['accepted']}")
    print(f"spoken: {r['spoken']}")
    print(f"rejected with a message: {r['rejected_with_message']}")
    print(f"skipped by a user: {r['skipped_by_user']}")
    print(f"lost: {r['lost']}  (goal 0; unanswered /say {r['say_unanswered']}, readout undecided "
          f"{r['readout_undecided']}, refused untold {r['readout_untold']}, failed untold {r['failed_untold']})")
    print(f"ignored by readout rules (empty, not in voice...): {r['readout_ignored']}")
    print(f"other commands: {r['commands']}, unanswered: {r['commands_unanswered']} (goal 0)")
    print(f"utterance outcomes: {r['outcomes']}")
    print(f"TTFA p50: {r['ttfa_p50_ms']:.0f} ms, p95: {r['ttfa_p95_ms']:.0f} ms")
    print(f"underruns: {r['underruns']}")
    print(f"peak resident memory: {r['peak_rss_mb']:.0f} MiB (bot and sandbox; inference sessions held "
          f"{r['sessions']}, threads {r['threads']})")
    print(f"event-loop lag p99: {r['loop_lag_p99_ms']:.1f} ms (goal <= 50; max {r['loop_lag_max_ms']:.0f} ms; "
          f"longest GC pass {r['gc_max_ms']:.0f} ms)")
    print(f"tasks left running: {r['tasks_left']} beyond the idle set of {r['tasks_idle']} (goal 0)"
          + (f": {r['tasks_left_kinds']}" if r["tasks_left"] else ""))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="the short CI version (<= ~60 s)")
    ap.add_argument("--guilds", type=int)
    ap.add_argument("--users", type=int)
    ap.add_argument("--actions", type=int)
    ap.add_argument("--window", type=float, help="seconds over which the actions are sent")
    ap.add_argument("--seed", type=int)
    ap.add_argument("--log-level", default="ERROR")
    args = ap.parse_args(argv)
    plan = QUICK if args.quick else FULL
    changes = {k: v for k, v in {"guilds": args.guilds, "users": args.users, "actions": args.actions,
                                 "window_s": args.window, "seed": args.seed}.items() if v is not None}
    plan = dataclasses.replace(plan, **changes)
    result = asyncio.run(run(plan, log_level=args.log_level))
    report(plan, result)
    return 0 if result["lost"] == 0 and result["commands_unanswered"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
