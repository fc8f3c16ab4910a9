"""Running a load plan: the engine's capacity measured, the bot started in its own process, the plan calibrated at full
load beside the bot's playback, its actions sent, and everything heard or told accounted for."""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import json
import random
import tempfile
import time
from pathlib import Path

from bench._harness import bench_settings, bot_subprocess, cpu_seconds, engine_totals, pct, peak_rss_mb, wav_of
from bench.load.accounting import References, account
from bench.load.traffic import (
    HOSTILE,
    PHRASES,
    SPEECH_SHARE,
    Dump,
    Item,
    Plan,
    Room,
    Traffic,
    build_rooms,
    expected_texts,
    first_text,
    hostile,
    mean_item,
    prepare,
    schedule,
    speech_texts,
)
from sandbox import Sandbox, restore_discord

CAPACITY_S = 12.0  # how long the capacity is measured


CAPACITY_STREAMS = 8


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


async def drive(sb, plan: Plan, rooms: list[Room], actions: int, lengths: dict[str, float], traffic: Traffic) -> None:
    rng = random.Random(plan.seed + 1)
    speed: dict[int, float] = collections.defaultdict(lambda: 1.0)  # each user's speed, once the bot confirmed it
    asked: dict[int, float] = collections.defaultdict(lambda: 1.0)  # ... and as last asked for
    pending: list[asyncio.Task] = []
    start = time.monotonic()
    plan_items = schedule(plan, rooms, actions)
    texts = {kind: speech_texts(rng, sum(1 for *_, k in plan_items if k == kind)) for kind in ("readout", "say")}
    for at, ri, ui, kind in plan_items:
        delay = start + at - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        room, user = rooms[ri], rooms[ri].users[ui]
        gid = room.guild.id
        traffic.sent[kind] += 1
        if kind in ("readout", "say"):
            text = key = texts[kind].pop()
            if key in HOSTILE:
                key, text = hostile(rng, [u.id for u in room.users], kind=key)
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
            talking = asyncio.ensure_future(talk(sb, rooms[0], plan.talkers, engine)) if plan.talkers else None
            t0, cpu0, own0 = time.monotonic(), cpu_seconds(child.pid), cpu_seconds()
            await drive(sb, plan, rooms, actions, lengths, traffic)
            sent_s = time.monotonic() - t0
            cores = ((cpu_seconds(child.pid) - cpu0) / sent_s, (cpu_seconds() - own0) / sent_s)
            drained = await settle(sb, rooms, traffic, plan.drain_s)
            load_s = time.monotonic() - t0
            talked = await stop_talking(talking)
            bot_peak = peak_rss_mb(child.pid)
        stats = json.loads((data / "child-stats.json").read_text())
        if Dump.entries is not None:
            Dump.entries.append({"child_log": (data / "child.log").read_text(errors="replace")[-200_000:],
                         "utterances": (data / "utterances.jsonl").read_text()})
        utterances = [json.loads(line) for line in (data / "utterances.jsonl").read_text().splitlines()]
        await refs.render({u.get("speed", 1.0) for u in utterances})  # each speed played, after the bot's run
        counts = account(sb, rooms, traffic, [u for u in utterances if u["created_at"] >= t0], refs, before)
    restore_discord()
    speeds = calibration.get("speeds") or {k: round(v, 2) for k, v in engine.counters.speeds.items()}
    simulated = await asyncio.to_thread(simulate_here, plan, speeds, engine.info.units)
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
        "simulated": simulated, "talked": talked,
    }


TALKED = "Sorry to cut in, could you say that again? I missed the last part."


async def talk(sb, room, members: int, engine) -> int:
    """`members` of `room` talking at once in the bot's call (real speech, DAVE- and transport-encrypted, as a
    Discord client sends it), over and over until cancelled: packets sent."""
    from engine.base import Voice

    wav = wav_of(b"".join([c.pcm async for c in engine.stream(TALKED, Voice(), key="talkers")]))
    sent = 0
    try:
        while True:
            talks = [sb.speak(user, wav, room.guild) for user in room.users[:members]]
            try:
                for t in talks:
                    await t.wait(timeout=60)
            finally:
                sent += sum(len(t.sent_at) for t in talks)
                for t in talks:  # (cancelled: none talks on into the sandbox's close)
                    if t.task is not None:
                        t.task.cancel()
    except asyncio.CancelledError:
        return sent


async def stop_talking(talking: asyncio.Future | None) -> int:
    """Stop the talkers (bench talk): packets they sent (0: none talked)."""
    if talking is None:
        return 0
    talking.cancel()
    try:
        return await talking
    except Exception as exc:  # noqa: BLE001 - the run's own figures are printed whatever the talkers did
        print(f"the talkers stopped: {exc!r}", flush=True)
        return -1


def simulate_here(plan: Plan, speeds: dict[int, float], units: tuple[float, ...]) -> tuple[str, dict[str, float]]:
    """The plan in the simulator (bench/load/simulate.py) on a cost model of this host: `speeds`, a slot's audio per
    second by slots busy as the bot's engine measured them in the calibration beside its playback (else as the bench's
    engine measured them sizing the plan), every unit's, a run's features included, its units the backend's: the
    model's name and each goal's simulated value."""
    from bench.load.simulate import CostModel, simulate

    speeds = {int(k): v for k, v in speeds.items()}  # (from the child's JSON: its keys are strings)
    model = CostModel(f"speeds per slot {speeds} measured in this run", speeds, {k: 0.0 for k in speeds}, units)
    try:
        return model.cpu, {name: value for name, (value, _, _) in simulate(plan, model).goals(plan).items()}
    except Exception as exc:  # noqa: BLE001 - the run's own figures are printed whatever the simulator does
        return f"{model.cpu}: the simulator failed ({exc!r})", {}


# The calibration's load, of the capacity measured alone, whatever the plan's: its speed with every slot busy is
# measured where the slots are busy most of the time. At the under plan's 0.7x (slots busy ~30%) it was 0.82-1.07x of
# the capacity the engine then had while the plan ran (a 2-core EPYC, four runs), from few stretches at full load,
# likely often an inference started alone on every core beside one on its share (slower than full load's steady state).
CALIBRATE_FACTOR = 1.0


async def calibrate(sb, plan: Plan, rooms: list[Room], data: Path, capacity: float, slots: int,
                    mean: float, lengths: dict) -> dict:
    """Load at CALIBRATE_FACTOR of the capacity measured alone for `plan.calibrate_s`, read how fast the bot's engine
    synthesized meanwhile with every slot busy, beside its playback and the sandbox, let it drain, and clear the
    captures; the capacity there sizes the plan."""
    trial = dataclasses.replace(plan, window_s=plan.calibrate_s, seed=plan.seed + 1000, factor=CALIBRATE_FACTOR)
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
