"""The load bench's report: one line per goal, met or missed, and the figures around them."""

from __future__ import annotations

import math
import os

from bench._harness import pct
from bench.load.accounting import CONTENT_MARGIN
from bench.load.drive import CAPACITY_STREAMS
from bench.load.traffic import WAITS, Plan


def goal_line(name: str, value: float, goal: float, fmt: str = "{:.2f}", *, at_least: bool = False) -> tuple[str, bool]:
    ok = value >= goal if at_least else value <= goal
    sign = ">=" if at_least else "<="
    return f"{name}: {fmt.format(value)} (goal {sign} {fmt.format(goal)}) {'OK' if ok else 'MISSED'}", ok


def offered_line(offered: float, factor: float) -> tuple[str, bool]:
    """The speech offered over the capacity the plan was sized from: within 0.1 of the plan's factor."""
    ok = abs(offered - factor) <= 0.1
    return f"offered_vs_capacity: {offered:.2f} (plan {factor:.1f}x, goal within 0.1) {'OK' if ok else 'MISSED'}", ok


def wait_value(name: str, r: dict) -> float:
    """A p95 wait of the run: total (from the item's sending: say_ttfa, readout_delay) or the bot's own part."""
    kind = name.split("_", 1)[0]
    values = r["rest"][kind] if "own_wait" in name else r["say_ttfa" if kind == "say" else "readout_delay"]
    return pct(values, 0.95) if values else math.inf


def wait_line(name: str, r: dict, plan: Plan) -> tuple[str, bool | None]:
    """A p95 wait: total (from the item's sending: say_ttfa, readout_delay) or the bot's own part (own_wait);
    with its goal when the plan has one, else for context."""
    value = wait_value(name, r)
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
    cpu, simulated = r.get("simulated") or ("none", {})
    measured = {"underruns_per_100": 100 * r["underruns"] / max(1, r["played"]),
                **{name: wait_value(name, r) for name in WAITS}}
    print(f"simulated (bench/load/simulate.py; cost model: {cpu}) against measured:")
    for name, value in simulated.items():
        real = measured.get(name, math.nan)
        ratio = value / real if real else math.nan
        print(f"  {name}: simulated {value:.2f}, measured {real:.2f} (ratio {ratio:.2f}; goal within 25%: "
              f"{'OK' if abs(ratio - 1) <= 0.25 or value == real else 'MISSED'})")
    if r["plan"].talkers:
        print(f"talkers: {r['plan'].talkers} members of the first guild talked in the call all along, "
              f"{r['talked']} packets (their receive cost alone: bench/hearing.py)")
    met = sum(goals) + (r["commands_unanswered"] == 0)
    unanswered = r["commands_unanswered"]
    print(f"commands_unanswered: {unanswered} (goal 0) {'OK' if unanswered == 0 else 'MISSED'}")
    print(f"load: {met}/{len(goals) + 1} goals met")
    return 0 if met == len(goals) + 1 else 1
