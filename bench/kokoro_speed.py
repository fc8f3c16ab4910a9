"""Kokoro's speed on this host, in one run, against plain Kokoro (its int8 model, as kokoro-onnx runs it) and Piper."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import resource
import statistics
import sys
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.backends.cpu import usable_cores  # noqa: E402
from engine.backends.kokoro import assets as kokoro_assets  # noqa: E402
from engine.backends.kokoro import graph  # noqa: E402
from engine.backends.kokoro import tuning as kokoro_tuning  # noqa: E402
from engine.backends.kokoro.settings import KokoroSettings  # noqa: E402
from engine.base import Voice  # noqa: E402
from engine.settings import EngineSettings  # noqa: E402

TEXTS = [
    "Our town library opened a new reading room last spring, and it has been busy ever since.",
    "Children come after school to read comics and picture books after their lessons.",
    "Please bring your own water bottle to the trip on Saturday, because the shop will be closed.",
    "The library opens at nine in the morning and closes at six in the evening.",
]
PCM_BYTES_PER_S = 48_000 * 2 * 2  # the engine's stream: 48 kHz stereo 16-bit


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


# -- plain Kokoro: the joined int8 model, whole sentences, onnxruntime's default SessionOptions ------------------------

def plain_rate(session, feeds: list[dict], streams: int) -> float:
    """Audio seconds per second with `streams` threads each saying every sentence whole on the one session."""
    audio = [0.0] * streams

    def speak(k: int) -> None:
        for f in feeds:
            audio[k] += session.run(None, f)[0].size / 24_000

    threads = [threading.Thread(target=speak, args=(k,)) for k in range(streams)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(audio) / (time.perf_counter() - start)


def plain_whole_s(session, feeds: list[dict]) -> float:
    """The median seconds to a whole sentence's audio, one at a time."""
    times = []
    for f in feeds:
        start = time.perf_counter()
        session.run(None, f)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


# -- our engine ---------------------------------------------------------------------------------------------------

async def engine_rate(engine, text: str, streams: int) -> float:
    """Audio seconds per second with `streams` utterances at once (distinct keys), as bench/e2e.py measures it."""
    async def one(key: int) -> float:
        return sum([chunk.duration async for chunk in engine.stream(text, Voice(), key=("speed", key))])

    start = time.monotonic()
    audio = await asyncio.gather(*(one(k) for k in range(streams)))
    return sum(audio) / (time.monotonic() - start)


async def first_chunk_s(engine, texts: list[str]) -> float:
    """The median seconds from stream() to its first chunk, one sentence at a time (each consumed whole)."""
    times = []
    for text in texts:
        start, first = time.monotonic(), None
        async for _ in engine.stream(text, Voice(), key="speed-first"):
            first = first or time.monotonic() - start
        times.append(first)
    return statistics.median(times)


async def cpu_per_audio_s(engine, texts: list[str]) -> float:
    """The process's CPU seconds per second of audio, the sentences one after another."""
    start, audio = cpu_s(), 0.0
    for text in texts:
        audio += len(await engine.synthesize_all(text, Voice(language="en"))) / PCM_BYTES_PER_S
    return (cpu_s() - start) / audio


# -- the vocoder's work against the CPU's peak ------------------------------------------------------------------

def vocoder_flops_per_audio_s(path: Path, frames: int = 80) -> float:
    """Multiply-adds x 2 of the vocoder's convolutions and matrix products per second of audio, counted from the
    graph's weight shapes and the output lengths of one run of `frames` frames (the work grows with the audio)."""
    import onnx
    import onnxruntime

    model = onnx.load(str(path))
    shapes = {i.name: list(i.dims) for i in model.graph.initializer}
    kinds = ("Conv", "ConvInteger", "ConvTranspose", "MatMul", "MatMulInteger")
    nodes = [n for n in model.graph.node if n.op_type in kinds and n.input[1] in shapes]
    model.graph.output.extend(onnx.helper.make_empty_tensor_value_info(n.output[0]) for n in nodes)
    model.graph.output.extend(onnx.helper.make_empty_tensor_value_info(n.input[0]) for n in nodes
                              if n.op_type == "ConvTranspose")
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    norms = next(i.shape for i in session.get_inputs() if i.name == graph.NORMS)
    rng = np.random.default_rng(0)
    feeds = {graph.X: rng.standard_normal((1, 512, frames)).astype(np.float32),
             graph.F0: np.full((1, frames), 150.0, np.float32), "style": np.zeros((1, 256), np.float32),
             graph.PHASE0: np.zeros((1, 1, graph.HARMONICS), np.float32),
             graph.NORMS: np.zeros(norms, np.float32), graph.OWN: np.ones(norms, np.float32)}
    names = [o.name for o in session.get_outputs()]
    out = dict(zip(names, session.run(names, feeds)))
    total = 0
    for n in nodes:
        w = shapes[n.input[1]]
        if n.op_type.startswith("Conv") and n.op_type != "ConvTranspose":
            total += 2 * w[0] * int(np.prod(w[1:])) * out[n.output[0]].shape[-1]  # O x I/g x K per output step
        elif n.op_type == "ConvTranspose":
            total += 2 * int(np.prod(w)) * out[n.input[0]].shape[-1]  # I x O/g x K per input step
        else:
            total += 2 * int(np.prod(out[n.output[0]].shape)) * w[0]
    return total / (frames * graph.HOP / 24_000)


def matmul_peak(threads: int) -> float:
    """numpy's float32 matrix product, FLOP per second (best of 5) on `threads` threads."""
    from threadpoolctl import threadpool_limits

    a, b = (np.random.default_rng(k).standard_normal((2048, 2048)).astype(np.float32) for k in (1, 2))
    with threadpool_limits(threads):
        a @ b
        best = min(_timed(lambda: a @ b) for _ in range(5))
    return 2 * 2048 ** 3 / best


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


async def main(rounds: int) -> None:
    import onnxruntime

    from engine.factory import build_engine

    settings = EngineSettings()
    assets_dir = KokoroSettings.of(settings).assets_dir
    at_once, cores, host = kokoro_tuning.concurrency(settings), usable_cores(), kokoro_tuning.host()
    chosen = kokoro_tuning.tuning(assets_dir, at_once)
    print(f"host: {host['model']}, {cores} usable cores, onnxruntime {onnxruntime.__version__}")
    print(f"flags: {host['flags']}")
    print(f"tuning: {chosen.why}")

    plain = onnxruntime.InferenceSession(str(kokoro_assets.model_path()), providers=["CPUExecutionProvider"])
    feeds = [kokoro_tuning.text_feeds(t, assets_dir) for t in TEXTS]
    plain.run(None, feeds[0])
    engine, piper = build_engine(settings), build_engine(dataclasses.replace(settings, backend="piper"))
    await engine.warm_up()
    await piper.warm_up()
    # each pair alternated, round by round, each kept at its best or median (the host may be busy in some rounds)
    streams, ours, plain_rates = 2 * at_once, [], {1: [], 2: []}
    firsts, wholes, kokoro_cpu, piper_cpu = [], [], [], []
    for _ in range(rounds):
        for n in plain_rates:
            plain_rates[n].append(plain_rate(plain, feeds, n))
        ours.append(await engine_rate(engine, " ".join(TEXTS[:2]), streams))
        for text, f in zip(TEXTS, feeds):
            firsts.append(await first_chunk_s(engine, [text]))
            wholes.append(plain_whole_s(plain, [f]))
        kokoro_cpu.append(await cpu_per_audio_s(engine, TEXTS))
        piper_cpu.append(await cpu_per_audio_s(piper, TEXTS))
    await engine.close()
    await piper.close()
    plain_n = max(plain_rates, key=lambda n: max(plain_rates[n]))
    best, plain_best = max(ours), max(plain_rates[plain_n])
    print(f"kokoro_streams_vs_plain {best / plain_best:.2f}  (ours {best:.2f} real-time streams with {streams} at "
          f"once; plain {plain_best:.2f} at its best, {plain_n} at once (1: {max(plain_rates[1]):.2f}, "
          f"2: {max(plain_rates[2]):.2f}); best of {rounds} rounds)")
    first, whole = statistics.median(firsts), statistics.median(wholes)
    print(f"kokoro_first_audio_vs_plain {first / whole:.2f}  (our first chunk p50 {first * 1000:.0f} ms, plain's "
          f"whole sentence p50 {whole * 1000:.0f} ms; {len(firsts)} sentences one at a time)")
    ours_cpu, theirs_cpu = statistics.median(kokoro_cpu), statistics.median(piper_cpu)
    print(f"kokoro_cpu_vs_piper {ours_cpu / theirs_cpu:.2f}  (CPU s per audio s, p50: Kokoro {ours_cpu:.3f}, "
          f"Piper {theirs_cpu:.3f})")

    path = kokoro_assets.graph_paths(assets_dir)[chosen.vocoder]
    flops = vocoder_flops_per_audio_s(path)
    peak_all, peak_one = matmul_peak(cores), matmul_peak(chosen.threads)
    alone = vocoder_rate(assets_dir, chosen)
    print(f"kokoro_peak_fraction {flops * best / peak_all:.2f}  (the vocoder's {flops / 1e9:.1f} G multiply-adds x2 "
          f"per audio s x {best:.2f} streams over numpy's float32 matmul, {peak_all / 1e9:.0f} GFLOP/s on {cores} "
          f"threads; the {kokoro_tuning.NAMES[chosen.vocoder]} vocoder alone on {chosen.threads}: "
          f"{flops * alone / peak_one:.2f} of {peak_one / 1e9:.0f} GFLOP/s)")


def vocoder_rate(assets_dir: str, chosen: kokoro_tuning.Tuning, frames: int = kokoro_tuning.FRAMES) -> float:
    """The chosen vocoder's audio seconds per second, one inference alone (best of 3)."""
    from engine.backends.sessions import new_session

    files = kokoro_assets.graph_paths(assets_dir)
    session = new_session(str(files[chosen.vocoder]), chosen.threads, options=chosen.options)
    feeds = kokoro_tuning.inputs(files, frames, session)
    session.run(None, feeds)
    return frames * graph.HOP / 24_000 / min(_timed(lambda: session.run(None, feeds)) for _ in range(3))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=2, help="alternated rounds of the streams (best kept)")
    asyncio.run(main(parser.parse_args().rounds))
