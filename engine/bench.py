"""`python -m engine bench`: the engine against raw Piper, as ratios measured in one run (noisy machines)."""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from dataclasses import dataclass, replace

from engine.backends.piper.backend import bundled_model_path
from engine.backends.piper.settings import PiperSettings
from engine.base import Engine, Voice
from engine.factory import build_engine
from engine.settings import EngineSettings

ONE_SENTENCE = "The weather this morning was bright and clear, with a gentle breeze coming in from the west."
THIRTY_WORDS = (
    "When the old lighthouse keeper finally climbed the narrow stairs that evening he found the great lamp "
    "dark and cold and a small gray bird sleeping quietly beside the brass rail. "
    "He did not wake it."
)
PARAGRAPH = (
    "Our town library opened a new reading room last spring, and it has been busy ever since. "
    "Children come after school to read comics and picture books, while older students use the long "
    "tables to study for their exams. On weekends the room hosts talks about local history, gardening "
    "and the stars. The librarians say that more people borrow books now than at any time in the past "
    "ten years. "
)
LONG_TEXT = (
    "Good evening everyone, and thank you for joining the call tonight. " + PARAGRAPH * 4
)[:1500]
FRENCH_PARAGRAPH = (
    "La bibliothèque de notre ville a ouvert une nouvelle salle de lecture au printemps dernier, et elle ne "
    "désemplit pas depuis. Les enfants viennent après l'école lire des bandes dessinées. "
)
OVERHEAD_TEXTS = (
    ONE_SENTENCE,
    PARAGRAPH,
    "Please remember to bring your notes to the meeting. We will start at nine, finish by noon, and have lunch "
    "together.",
)


@dataclass
class Metric:
    name: str
    value: float
    goal: str
    ok: bool
    note: str = ""

    def line(self) -> str:
        note = f"  [{self.note}]" if self.note else ""
        if not self.goal:  # shown for context, no goal
            return f"{self.name}: {self.value:.3f}{note}"
        return f"{self.name}: {self.value:.3f} (goal {self.goal}) {'OK' if self.ok else 'MISSED'}{note}"


def report(metrics: list[Metric]) -> int:
    """Print each metric and a summary of the goals met; 1 when one was missed (a bench's exit status)."""
    for m in metrics:
        print(m.line(), flush=True)
    goals = [m for m in metrics if m.goal]  # lines without a goal are shown for context
    missed = [m.name for m in goals if not m.ok]
    print(f"summary: {len(goals) - len(missed)}/{len(goals)} goals met"
          + (f"; missed: {', '.join(missed)}" if missed else ""), flush=True)
    return 1 if missed else 0


def _settings(workers: int, model: str = "", intra_op: int = 0) -> EngineSettings:
    return EngineSettings(
        workers=workers, max_concurrency=workers, per_key_limit=1, max_text_chars=5000,
        tables=(PiperSettings(model=model, intra_op_threads=intra_op),),
    )


async def _engine(workers: int, model: str, intra_op: int = 0, **overrides: object) -> Engine:
    engine = build_engine(replace(_settings(workers, model, intra_op), **overrides))  # type: ignore[arg-type]
    await engine.warm_up()
    return engine


async def _stream_times(engine: Engine, text: str, key: object = "bench",
                        voice: Voice = Voice()) -> tuple[float, float, float]:
    """(time to first chunk, time to last chunk, audio seconds)."""
    t0 = time.perf_counter()
    first = None
    audio = 0.0
    async for chunk in engine.stream(text, voice, key=key):
        if first is None:
            first = time.perf_counter() - t0
        audio += chunk.duration
    return first or 0.0, time.perf_counter() - t0, audio


def _raw_times(raw: object, text: str) -> tuple[float, float]:
    """Raw PiperVoice.synthesize: (time to first chunk, time to last chunk)."""
    t0 = time.perf_counter()
    first = None
    for _ in raw.synthesize(text):  # type: ignore[attr-defined]
        if first is None:
            first = time.perf_counter() - t0
    return first or 0.0, time.perf_counter() - t0


async def bench_latency(model: str, rounds: int) -> list[Metric]:
    from piper import PiperVoice

    raw = PiperVoice.load(model or bundled_model_path())
    _raw_times(raw, "Warm up.")
    engine = await _engine(1, model)
    try:
        raw_total = eng_total = 0.0
        for _ in range(rounds):  # alternate so drifting load hits both sides alike
            for text in OVERHEAD_TEXTS:
                raw_total += _raw_times(raw, text)[1]
                eng_total += (await _stream_times(engine, text))[1]
        overhead = eng_total / raw_total

        long_ttfa, short_ttfa, eng30, raw30 = [], [], [], []
        for _ in range(rounds):
            long_ttfa.append((await _stream_times(engine, LONG_TEXT))[0])
            short_ttfa.append((await _stream_times(engine, ONE_SENTENCE))[0])
            eng30.append((await _stream_times(engine, THIRTY_WORDS))[0])
            raw30.append(_raw_times(raw, THIRTY_WORDS)[0])
        long_vs_short = statistics.median(long_ttfa) / statistics.median(short_ttfa)
        vs_raw = statistics.median(eng30) / statistics.median(raw30)
    finally:
        await engine.close()
    return [
        Metric("overhead", overhead, "<= 1.10", overhead <= 1.10, f"engine {eng_total:.2f} s vs raw Piper "
                                                                  f"{raw_total:.2f} s"),
        Metric(
            "ttfa_long_vs_short", long_vs_short, "<= 1.2", long_vs_short <= 1.2,
            f"1500 chars {statistics.median(long_ttfa) * 1000:.0f} ms vs one sentence "
            f"{statistics.median(short_ttfa) * 1000:.0f} ms",
        ),
        Metric(
            "ttfa_vs_raw_first_chunk", vs_raw, "<= 0.6", vs_raw <= 0.6,
            f"engine {statistics.median(eng30) * 1000:.0f} ms vs raw Piper {statistics.median(raw30) * 1000:.0f} "
            "ms, 30-word first sentence",
        ),
    ]


async def _throughput(engine: Engine, n: int) -> float:
    """Audio seconds per wall second for n utterances from n keys at once."""
    t0 = time.perf_counter()
    results = await asyncio.gather(*(_stream_times(engine, PARAGRAPH, key=i) for i in range(n)))
    return sum(r[2] for r in results) / (time.perf_counter() - t0)


async def bench_scaling(model: str, utterances: int, rounds: int) -> list[Metric]:
    """Worker scaling: 2 workers vs 1, each worker one intra-op thread, so the ratio is what a second
    worker adds. Also shown: one worker given both cores as intra-op threads (what `engine.workers = 1`
    runs) against the two workers. Configurations are interleaved round by round and the best round of
    each is kept: other load on a shared machine only ever slows a round down."""
    cpus = os.cpu_count() or 1
    configs: list[tuple[str, int, int]] = [("1w1t", 1, 1), ("2w1t", 2, 1), ("1w", 1, 0)]
    engines = {label: await _engine(workers, model, intra) for label, workers, intra in configs}
    rates: dict[str, list[float]] = {label: [] for label in engines}
    try:
        for _ in range(rounds):
            for label, engine in engines.items():
                rates[label].append(await _throughput(engine, utterances))
    finally:
        for engine in engines.values():
            await engine.close()
    best = {label: max(r) for label, r in rates.items()}
    ratio = best["2w1t"] / best["1w1t"]
    intra = best["1w"] / best["2w1t"]
    spread = ", ".join(f"{label} {min(r):.1f}-{max(r):.1f}" for label, r in rates.items())
    return [
        Metric(
            "scaling_2_vs_1_workers", ratio, ">= 1.7", ratio >= 1.7,
            f"{best['2w1t']:.2f} vs {best['1w1t']:.2f} audio s/s, one intra-op thread per worker, best of {rounds}; "
            f"audio s/s per round: {spread}",
        ),
        Metric(
            "one_worker_on_all_cores_vs_2_workers", intra, "", True,
            f"1 worker x {cpus} intra-op threads {best['1w']:.2f} audio s/s vs 2 workers x 1 thread",
        ),
    ]


async def bench_fairness(model: str, keys: int = 8, per_key: int = 5) -> list[Metric]:
    sentence = "This is one short sentence."
    text = " ".join([sentence] * per_key)  # five sentences; the segmenter is told to keep them apart
    engine = await _engine(2, model, first_segment_chars=len(sentence), max_segment_chars=len(sentence))
    events: list[tuple[float, str, object, int]] = []
    engine.trace = lambda event, key, index: events.append((time.perf_counter(), event, key, index))
    try:
        await asyncio.gather(*(_stream_times(engine, text, key=k) for k in range(keys)))
    finally:
        await engine.close()
    assert {i for _, e, _, i in events if e == "granted"} == set(range(per_key)), "one segment per sentence"
    first_done = max(t for t, e, _, i in events if e == "synthesized" and i == 0)
    third_start = min(t for t, e, _, i in events if e == "granted" and i == 2)
    margin = third_start - first_done
    return [
        Metric(
            "fairness_first_before_third", margin * 1000, ">= 0 ms", margin >= 0,
            f"last first-segment end to first third-segment start, {keys} keys x {per_key} segments",
        )
    ]


async def bench_remote(model: str, rounds: int) -> list[Metric]:
    """The remote backend through the engine server (same process, loopback) against the local engine."""
    from engine.backends.remote.settings import RemoteSettings
    from engine.server.app import serve_in_background
    from engine.settings import ServerSettings

    local, served = await _engine(1, model), await _engine(1, model)
    loc_ttfa: list[float] = []
    rem_ttfa: list[float] = []
    loc_wall: list[float] = []
    rem_wall: list[float] = []
    try:
        async with serve_in_background(served, ServerSettings(port=0)) as url:
            remote = build_engine(replace(_settings(1, model), backend="remote").with_tables(RemoteSettings(url=url)))
            try:
                await _stream_times(remote, "Warm up.")
                for n in range(rounds):
                    for text in OVERHEAD_TEXTS:  # alternate, and swap who goes first each round
                        pair = [(local, loc_ttfa, loc_wall), (remote, rem_ttfa, rem_wall)]
                        for eng, ttfa, wall in pair if n % 2 == 0 else pair[::-1]:
                            first, last, _ = await _stream_times(eng, text)
                            ttfa.append(first)
                            wall.append(last)
            finally:
                await remote.close()
    finally:
        await local.close()
        await served.close()
    # Both swing with the load of a shared machine more than the server adds, so both compare
    # back-to-back pairs: overhead is the median pair ratio; the remote TTFA is the local median
    # plus the median pair difference.
    overhead = statistics.median(r / lo for lo, r in zip(loc_wall, rem_wall))
    loc_total, rem_total = sum(loc_wall), sum(rem_wall)
    loc = statistics.median(loc_ttfa)
    rem = loc + statistics.median(r - lo for lo, r in zip(loc_ttfa, rem_ttfa))
    return [
        Metric("remote_vs_local_overhead", overhead, "<= 1.15", overhead <= 1.15,
               f"median of pairs; totals to the last frame: server {rem_total:.2f} s, local {loc_total:.2f} s"),
        Metric("remote_vs_local_ttfa", rem / loc, "<= 1.1 x local + 20 ms", rem <= 1.1 * loc + 0.020,
               f"through the server {rem * 1000:.0f} ms vs local {loc * 1000:.0f} ms (paired; raw medians "
               f"{statistics.median(rem_ttfa) * 1000:.0f} vs {loc * 1000:.0f} ms)"),
    ]



def _p99(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=100, method="inclusive")[98]


def bench_detection(runs: int = 300) -> list[Metric]:
    """Language detection of 2,000 characters: French prose, Chinese, and random 4-byte characters (the most
    bytes per character; the sample is bounded in bytes too)."""
    import random

    from engine import langid

    langid.load()
    rng = random.Random(19)
    texts = {
        "French": (FRENCH_PARAGRAPH * 20)[:2000],
        "Chinese": ("今天天气很好，我们一起去公园散步，然后在湖边的小餐馆吃午饭。" * 80)[:2000],
        "random 4-byte": "".join(chr(rng.randint(0x10000, 0x3FFFF)) for _ in range(2000)),
    }
    times: dict[str, list[float]] = {name: [] for name in texts}
    for _ in range(runs):  # interleaved, so drifting load hits all alike
        for name, text in texts.items():
            t0 = time.perf_counter()
            langid.detect(text, "en")
            times[name].append(time.perf_counter() - t0)
    p99 = _p99([t for ts in times.values() for t in ts])
    per = ", ".join(f"{name} p99 {_p99(ts) * 1000:.2f} ms" for name, ts in times.items())
    return [Metric("langid_2000_chars_p99_ms", p99 * 1000, "<= 5 ms", p99 <= 0.005, f"{runs} runs of each: {per}")]


async def bench_espeak(model: str, rounds: int) -> list[Metric]:
    """eSpeak NG's first frame against Piper's, the same sentence through the same engine (scheduler, framing)."""
    from engine.backends.espeak.backend import VOICE_NAME

    engine = await _engine(1, model)  # eSpeak NG is in every engine's catalog where it is installed
    voices = {"espeak": Voice(name=VOICE_NAME, language="en"), "piper": Voice(language="en")}
    first: dict[str, list[float]] = {name: [] for name in voices}
    try:
        await _stream_times(engine, "Warm up.", voice=voices["espeak"])
        for n in range(max(5, rounds * 3)):
            for name, voice in (voices.items() if n % 2 == 0 else reversed(voices.items())):
                first[name].append((await _stream_times(engine, ONE_SENTENCE, voice=voice))[0])
    finally:
        await engine.close()
    espeak, piper = statistics.median(first["espeak"]), statistics.median(first["piper"])
    return [Metric("espeak_vs_piper_first_frame", espeak / piper, "<= 1.0", espeak <= piper,
                   f"eSpeak NG {espeak * 1000:.1f} ms vs Piper {piper * 1000:.1f} ms to the first frame, medians of "
                   f"{len(first['piper'])}, the same sentence")]


async def run_all(model: str, rounds: int, utterances: int, only: list[str] | None) -> list[Metric]:
    metrics: list[Metric] = []
    if not only or "latency" in only:
        metrics += await bench_latency(model, rounds)
    if not only or "scaling" in only:
        metrics += await bench_scaling(model, utterances, rounds)
    if not only or "fairness" in only:
        metrics += await bench_fairness(model)
    if not only or "remote" in only:
        metrics += await bench_remote(model, rounds)
    if not only or "languages" in only:
        metrics += bench_detection()
        metrics += await bench_espeak(model, rounds)
    return metrics


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default="", help="a Piper .onnx voice (default: the bundled one)")
    p.add_argument("--rounds", type=int, default=3, help="repetitions of each latency measurement")
    p.add_argument("--utterances", type=int, default=4, help="concurrent utterances in the scaling runs")
    p.add_argument("--only", action="append", choices=("latency", "scaling", "fairness", "remote", "languages"),
                   help="run only these")


def run(args: argparse.Namespace) -> int:
    metrics = asyncio.run(run_all(args.model, args.rounds, args.utterances, args.only))
    for m in metrics:
        print(m.line(), flush=True)
    return 0
