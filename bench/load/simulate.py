"""The load plans in simulated time: the engine's Scheduler, deadlines and start rule (engine/realtime.py) on a virtual
clock, each unit's making time from a cost model measured on the real backend: a load question answered in seconds
(tests/engine/test_simulator.py; `python -m bench.load --simulate` prints it beside a real run)."""

from __future__ import annotations

import asyncio
import collections
import json
import math
import selectors
import threading
import time
from collections.abc import Callable, Coroutine
from dataclasses import asdict, dataclass, field
from typing import Any

from bench.load.traffic import HOSTILE, PHRASES, SPEECH_SHARE, Plan, expected_texts, hostile, schedule, speech_texts
from bot.speech.queue.pacing import catch_up_speed
from engine.base import Capacity
from engine.realtime import ALONE_S, PlayOut, stream_hold_s
from engine.scheduler import Scheduler

SECONDS_PER_CHAR = 0.065  # an item's audio from its spoken text's length (Kokoro's default voice, English)
SENTENCE_S = 4.0  # a long text's sentences, each a run of windows
MAX_DELAY_S = 30.0  # the guilds' default max_delay: a readout not started by then is skipped (told)
CATCH_UP = 1.3  # speech.catch_up_speed's default


class SimulationStalled(RuntimeError):
    """Nothing is ready and no timer is set: the simulated work waits for something that never comes."""


class _Jump(selectors.SelectSelector):
    """The virtual loop's selector: no I/O; a wait for the next timer moves the clock to it at once."""

    def __init__(self) -> None:
        super().__init__()
        self.now = 0.0

    def select(self, timeout: float | None = None) -> list[Any]:
        if timeout is None:
            raise SimulationStalled("the simulation waits with no timer set")
        self.now += max(0.0, timeout)
        return []


class VirtualLoop(asyncio.SelectorEventLoop):
    """An event loop on virtual time: sleeps, timeouts and timers take no wall time."""

    def __init__(self) -> None:
        self._jump = _Jump()
        super().__init__(self._jump)

    def time(self) -> float:
        return self._jump.now


def run_simulated(main: Coroutine[Any, Any, Any]) -> Any:
    """Run `main` on a VirtualLoop."""
    with asyncio.Runner(loop_factory=VirtualLoop) as runner:
        return runner.run(main)


@dataclass(frozen=True)
class CostModel:
    """How long a unit (a vocoder window) takes to make on a host, by slots busy: a run's first window its fixed part
    (features) plus its audio at the speed; later windows their audio at the speed."""

    cpu: str
    speed: dict[int, float]  # audio seconds per slot-second of later windows, by slots busy
    first_extra_s: dict[int, float]  # a run's first window's fixed part, by slots busy
    windows: tuple[float, ...] = ()  # audio seconds of a run's windows in turn (the last repeating)

    def _at(self, table: dict[int, float], busy: int, scale: float) -> float:
        """`table` at `busy` slots busy; at a load not measured, the nearest measured with the cores shared (`scale`: 1
        for times, -1 speeds)."""
        level = min(table, key=lambda k: (abs(k - max(busy, 1)), k))
        return table[level] * (max(busy, 1) / level) ** scale

    def unit_s(self, audio_s: float, busy: int, first: bool) -> float:
        extra = self._at(self.first_extra_s, busy, 1.0) if first else 0.0
        return extra + audio_s / self._at(self.speed, busy, -1.0)

    def run_units(self, audio_s: float) -> list[float]:
        """The windows (audio seconds) one run of `audio_s` is made in."""
        out, k = [], 0
        while audio_s > 1e-9:
            unit = self.windows[min(k, len(self.windows) - 1)]
            piece = audio_s if audio_s <= unit * 1.5 else unit
            out.append(piece)
            audio_s -= piece
            k += 1
        return out

    def save(self, path: str) -> None:
        with open(path, "w") as f:
            json.dump(asdict(self), f, indent=1)

    @classmethod
    def load(cls, path: str) -> CostModel:
        with open(path) as f:
            d = json.load(f)
        return cls(d["cpu"], {int(k): v for k, v in d["speed"].items()},
                   {int(k): v for k, v in d["first_extra_s"].items()}, tuple(d["windows"]))

    @classmethod
    def measure(cls, backend: Any, voice: Any, sentences: list[str], cpu: str, sample_rate: int,
                windows: tuple[float, ...]) -> CostModel:
        """Time each step of the real `backend` (a stepping one) alone and with two at once, on threads as the
        engine runs them."""
        speed, extra = {}, {}
        for busy in (1, 2):
            steps: list[tuple[bool, float, float]] = []  # (first of its run, audio s, seconds)
            lock = threading.Lock()

            def one(offset: int, out: list = steps, at_once: int = busy, lock: Any = lock) -> None:
                for text in sentences[offset::at_once]:
                    first, items = True, iter(backend.synthesize(text, voice, alone=False))
                    while True:
                        t0 = time.perf_counter()
                        item = next(items, None)
                        if item is None:
                            break
                        with lock:
                            out.append((first, len(item[0]) / sample_rate, time.perf_counter() - t0))
                        first = False
            threads = [threading.Thread(target=one, args=(i,)) for i in range(busy)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            later = [(a, s) for f, a, s in steps if not f]
            speed[busy] = sum(a for a, _ in later) / max(1e-9, sum(s for _, s in later))
            firsts = [s - a / speed[busy] for f, a, s in steps if f]
            extra[busy] = max(0.0, sum(firsts) / max(1, len(firsts)))
        return cls(cpu, speed, extra, windows)


LONGER = ["The build is green again, and the release notes are ready for everyone to read tonight.",
          "Please remember that the meeting moved to Thursday afternoon, right after lunch in the big room."]


def host_model() -> CostModel:
    """The cost model of the default backend (Kokoro, as the bot builds it) measured on this host now."""
    import platform

    from engine.backends.kokoro.backend import SAMPLE_RATE, KokoroBackend
    from engine.base import Voice

    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
               platform.processor())
    backend = KokoroBackend(workers=2)
    try:
        backend.warm_up()
        return CostModel.measure(backend, Voice(), [*PHRASES[:6], *LONGER] * 2, cpu, SAMPLE_RATE, backend.info.units)
    finally:
        backend.close()


@dataclass
class SimResult:
    """What a simulated plan gives, in the load bench's terms."""

    capacity: float = 0.0  # audio seconds per second, every slot busy (measured in the simulation as the bench does)
    offered: float = 0.0  # speech offered over the capacity
    say_ttfa: list[float] = field(default_factory=list)
    readout_delay: list[float] = field(default_factory=list)
    own_wait: dict[str, list[float]] = field(default_factory=lambda: {"say": [], "readout": []})
    first_audio: dict[str, list[float]] = field(default_factory=lambda: {"say": [], "readout": []})  # from its turn
    underrun_s: float = 0.0
    underrun_items: int = 0
    heard: int = 0
    stale: int = 0
    refused: int = 0

    def p95(self, values: list[float]) -> float:
        if not values:
            return math.inf
        values = sorted(values)
        return values[min(len(values) - 1, math.ceil(0.95 * len(values)) - 1)]

    def goals(self, plan: Plan) -> dict[str, tuple[float, float, bool]]:
        """Each goal of `plan` (and underruns: none): (value, goal, met)."""
        values = {"say_ttfa_p95_s": self.p95(self.say_ttfa), "readout_delay_p95_s": self.p95(self.readout_delay),
                  "say_own_wait_p95_s": self.p95(self.own_wait["say"]),
                  "readout_own_wait_p95_s": self.p95(self.own_wait["readout"]),
                  "underruns_per_100": 100 * self.underrun_items / max(1, self.heard)}
        goals = {**plan.goals, "underruns_per_100": 0.0}
        return {k: (values[k], g, values[k] <= g + 1e-9) for k, g in goals.items()}


class _Sim:
    """One simulated bot and engine: guilds' queues played in turn, each utterance a stream of windows in slots."""

    def __init__(self, model: CostModel, scheduler: Scheduler, result: SimResult) -> None:
        self.model = model
        self.sched = scheduler
        self.result = result
        self.changed = asyncio.Event()  # the load changed (the bot's holds look again)
        scheduler.on_change = self.changed.set
        self.active: dict[Any, int] = collections.Counter()  # keys with a stream under way
        self.playouts: set[PlayOut] = set()  # (as StreamingEngine's)
        self.asked: dict[Any, float] = {}  # when each key last asked for a slot

    def capacity(self, key: Any) -> Capacity:
        """The guild's view of the engine, as StreamingEngine.capacity prices it under load (every slot busy while
        others use it)."""
        others = sum(1 for k, n in self.active.items() if n and k != key)
        slots = self.sched.max_concurrency
        now = asyncio.get_running_loop().time()
        alone = not any(now - t <= ALONE_S for k, t in self.asked.items() if k != key)
        busy = min(slots, others + 1) if alone else slots
        first = self.model.first_extra_s
        blend = self.model.unit_s(1.0, busy, False)
        per_window = self.model.windows[0] if self.model.windows else 1.0
        mean_speed = 1.0 / (blend + first.get(busy, first[max(first)]) / (3 * per_window))
        heard = sum(1 for p in self.playouts if p.playing() and p.key != key)
        return Capacity(slots=slots, running=self.sched.running, waiting_others=0, other_keys=others,
                        audio_per_second=mean_speed, next_per_second=1.0 / blend, per_key=self.sched.per_key_limit,
                        heard_others=heard, key_streams=sum(1 for p in self.playouts if p.key == key and not p.done))

    def making(self, next_s: float) -> float:
        """Seconds a unit takes to make with every slot busy, as the engine prices it (StreamingEngine._making): of
        `next_s` audio seconds at a later window's speed; 0 (a run's first: its length unknown) a first window's."""
        busy = self.sched.max_concurrency
        return self.model.unit_s(next_s, busy, False) if next_s > 0 else self.model.unit_s(
            self.model.windows[0], busy, True)

    async def stream(self, key: Any, audio_s: float, playout: PlayOut,
                     on_chunk: Callable[[float, float, bool], None]) -> None:
        """Make `audio_s` of speech window by window as StreamingEngine._produce_steps does: each window in a slot by
        the play-out's deadline, a slot kept when nobody is due before; the next unit's length is known within a run
        (0 before a run's first, as the engine's backend says)."""
        self.active[key] += 1
        self.asked[key] = asyncio.get_running_loop().time()
        self.playouts.add(playout)
        try:
            runs = [SENTENCE_S] * int(audio_s // SENTENCE_S) + ([audio_s % SENTENCE_S] if audio_s % SENTENCE_S else [])
            units = [(u, i == 0) for run in runs for i, u in enumerate(self.model.run_units(run))]
            held, next_s = None, 0.0
            for k, (unit, opens) in enumerate(units):
                grant = held or await self.sched.acquire(key, deadline=lambda n=next_s: playout.deadline(next_s=n))
                try:
                    await asyncio.sleep(self.model.unit_s(unit, self.sched.running, opens))
                except asyncio.CancelledError:
                    grant.release()
                    raise
                follows = k + 1 < len(units)
                next_s = units[k + 1][0] if follows and not units[k + 1][1] else 0.0
                keep = follows and self.sched.keep(grant, playout.deadline(unit, next_s))
                held = grant if keep else None
                if not keep:
                    grant.release()
                on_chunk(unit, next_s, follows)
                self.changed.set()
        finally:
            self.active[key] -= 1
            self.playouts.discard(playout)
            playout.done = True


@dataclass
class _Item:
    kind: str
    audio_s: float
    sent_at: float
    playout: PlayOut | None = None
    task: asyncio.Task | None = None
    made_s: float = 0.0
    next_s: float = 0.0
    finished: bool = False
    got: asyncio.Event = field(default_factory=asyncio.Event)
    turn: bool = False  # its listener waits for it (its turn came)
    heard_from: float | None = None  # when it started playing
    first_at: float | None = None  # when its first audio was there at its turn
    dry: bool = False  # its listener ran dry once (counted once)


class _Guild:
    """A guild's queue (asked-for speech ahead of readout) played one at a time, the next made ahead (lookahead 1,
    as the bot's Lookahead: one stream per priority at a time)."""

    def __init__(self, sim: _Sim, key: Any) -> None:
        self.sim, self.key = sim, key
        self.queue: list[_Item] = []
        self.wake = asyncio.Event()
        self.free_at = 0.0  # when what played before ended
        self.current: _Item | None = None  # at its turn, not yet heard

    def add(self, item: _Item) -> None:
        """Queue `item`, or refuse it (told) when what plays before it is longer than the guild's max_delay, as the
        bot's SpeechQueue admits; what waits besides it makes it faster (the bot's catch-up speed)."""
        at = len(self.queue) if item.kind == "readout" else sum(1 for i in self.queue if i.kind == "say")
        now = asyncio.get_running_loop().time()
        playing = max(0.0, self.free_at - now) + (self.current.audio_s - self.current.made_s if self.current else 0.0)
        ahead = playing + sum(i.audio_s for i in self.queue[:at])
        if ahead > MAX_DELAY_S:
            self.sim.result.refused += 1
            return
        item.audio_s /= catch_up_speed(playing + sum(i.audio_s for i in self.queue), CATCH_UP)
        self.queue.insert(at, item)
        self.wake.set()

    def _start(self, item: _Item) -> None:
        if item.task is not None:
            return
        loop = asyncio.get_running_loop()

        def heard() -> float | None:
            if not item.turn:
                return None
            return 0.0 if item.heard_from is None else loop.time() - item.heard_from

        item.playout = PlayOut(loop.time, urgent=item.kind == "say", heard=heard, key=self.key,
                               largest=max(self.sim.model.windows),
                               making=self.sim.making)

        def on_chunk(audio: float, next_s: float, follows: bool) -> None:
            assert item.playout is not None
            now = loop.time()
            if item.heard_from is not None and now > item.heard_from + item.made_s:  # the listener ran dry
                gap = now - (item.heard_from + item.made_s)
                self.sim.result.underrun_s += gap
                item.heard_from += gap
                if not item.dry:
                    self.sim.result.underrun_items += 1
                    item.dry = True
            item.playout.add(audio)
            item.made_s += audio
            item.next_s = next_s
            item.finished = not follows
            item.got.set()
        item.task = asyncio.create_task(self.sim.stream(self.key, item.audio_s, item.playout, on_chunk))

    async def run(self, until: float) -> None:
        loop = asyncio.get_running_loop()
        while loop.time() < until or self.queue:
            if not self.queue:
                self.wake.clear()
                try:
                    await asyncio.wait_for(self.wake.wait(), max(0.0, until - loop.time()))
                except TimeoutError:
                    continue
                continue
            item = self.queue.pop(0)
            await self._play(item, loop)

    async def _play(self, item: _Item, loop: asyncio.AbstractEventLoop) -> None:
        r = self.sim.result
        turn_at = max(item.sent_at, self.free_at)
        item.turn = True
        self.current = item
        self._start(item)
        if self.queue:  # made ahead of its turn: at once in the other priority's slot, else once this one is made
            ahead = self.queue[0]
            if (ahead.kind == "say") != (item.kind == "say") or item.finished:
                self._start(ahead)
            elif item.task is not None:
                item.task.add_done_callback(lambda _: self._start(ahead) if ahead in self.queue else None)
        sim = self.sim
        while True:
            now = loop.time()
            if item.kind == "readout" and now > item.sent_at + MAX_DELAY_S and not item.heard_from:
                if item.task is not None:
                    item.task.cancel()
                r.stale += 1
                self.current, self.free_at = None, now
                return
            if item.made_s > 0 and item.first_at is None:
                item.first_at = now
            need = 0.0 if item.finished else stream_hold_s(
                sim.capacity(self.key), item.next_s, sim.making(0.0),
                item.audio_s - item.made_s, max(sim.model.windows), 1.5)
            if item.made_s > 0 and item.made_s >= need:
                break
            item.got.clear()
            sim.changed.clear()
            waits = [asyncio.ensure_future(item.got.wait()), asyncio.ensure_future(sim.changed.wait())]
            await asyncio.wait(waits, timeout=max(0.01, item.sent_at + MAX_DELAY_S - now) if item.kind == "readout"
                               else None, return_when=asyncio.FIRST_COMPLETED)
            for w in waits:
                w.cancel()
        start = item.heard_from = loop.time()
        self.current, self.free_at = None, start + item.audio_s
        r.heard += 1
        (r.say_ttfa if item.kind == "say" else r.readout_delay).append(start - item.sent_at)
        r.own_wait[item.kind].append(start - turn_at)
        r.first_audio[item.kind].append((item.first_at or start) - turn_at)
        if item.task is not None:
            await item.task
        self.free_at = item.heard_from + item.made_s  # (moved on by any time it ran dry)
        await asyncio.sleep(max(0.0, self.free_at - loop.time()))


async def _lengths() -> dict[tuple[str, str], float | None]:
    """Audio seconds of each (kind, phrase or hostile kind) from what the bot says for it (the load bench's)."""
    texts = await expected_texts()
    return {k: None if t is None else len(t) * SECONDS_PER_CHAR for k, t in texts.items()}


async def _capacity(model: CostModel, make: Callable[[], Scheduler]) -> float:
    """Audio seconds per second with 8 streams of the plan's phrases at once, as bench/load measures it."""
    sched = make()
    sim = _Sim(model, sched, SimResult())
    loop = asyncio.get_running_loop()
    made = 0.0
    stop = loop.time() + 60.0

    async def one(k: int) -> None:
        nonlocal made
        i = k
        while loop.time() < stop:
            audio = len(PHRASES[i % len(PHRASES)]) * SECONDS_PER_CHAR
            playout = PlayOut(loop.time, urgent=False)
            await sim.stream(("capacity", k), audio, playout, lambda a, n, f: None)
            made += audio
            i += 1
    t0 = loop.time()
    await asyncio.gather(*(one(k) for k in range(8)))
    return made / (loop.time() - t0)


def simulate(plan: Plan, model: CostModel, slots: int = 2, scheduler: type[Scheduler] = Scheduler) -> SimResult:
    """`plan`'s traffic (its schedule, texts and sizing as bench/load draws them) through the simulated bot."""
    def make() -> Scheduler:
        return scheduler(slots, 1, clock=asyncio.get_running_loop().time)

    async def main() -> SimResult:
        import random

        lengths = await _lengths()
        result = SimResult(capacity=await _capacity(model, make))
        w = 45 / 65
        mean = sum(share * sum((lengths[(kind, k)] or 0.0) * (0.85 / len(PHRASES) if k in PHRASES else
                                                              0.15 / len(HOSTILE)) for k in [*PHRASES, *HOSTILE])
                   for kind, share in (("readout", w), ("say", 1 - w)))
        actions = round(plan.factor * result.capacity * plan.window_s / (mean * SPEECH_SHARE))
        items = schedule(plan, [None] * plan.guilds, actions)  # type: ignore[list-item]
        rng = random.Random(plan.seed + 1)
        texts = {kind: speech_texts(rng, sum(1 for *_, k in items if k == kind)) for kind in ("readout", "say")}
        sim = _Sim(model, make(), result)
        guilds = [_Guild(sim, g) for g in range(plan.guilds)]
        loop = asyncio.get_running_loop()
        runs = [asyncio.create_task(g.run(plan.window_s)) for g in guilds]
        start, offered = loop.time(), 0.0
        for at, gi, _user, kind in items:
            if kind not in ("readout", "say"):
                continue
            await asyncio.sleep(max(0.0, start + at - loop.time()))
            key = texts[kind].pop()
            if key in HOSTILE:
                key = hostile(rng, list(range(1, 21)), kind=key)[0]
            audio = lengths[(kind, key)]
            if not audio:
                continue
            offered += audio
            guilds[gi].add(_Item(kind, audio, loop.time()))
        await asyncio.wait_for(asyncio.gather(*runs), plan.drain_s + plan.window_s)
        result.offered = offered / plan.window_s / result.capacity
        return result

    return run_simulated(main())


class FirstComeFirstServed(Scheduler):
    """A scheduler without deadlines (for showing what the simulator catches): every unit in the order it asked."""

    def keep(self, grant: Any, at: float | None) -> bool:
        return False

    def _best(self, freed: Any = None) -> Any:
        best = None
        for key, queue in self._queues.items():
            if self._running.get(key, 0) - (key == freed) >= self.per_key_limit:
                continue
            waiter = queue[0]
            order = (math.inf, 0.0, waiter.seq)
            if best is None or order < best[1]:
                best = (key, order, waiter)
        return best
