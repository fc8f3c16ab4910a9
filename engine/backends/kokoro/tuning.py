"""Which Kokoro vocoder (float or integer convolutions) and threads per inference run fastest on this host's CPU."""

from __future__ import annotations

import dataclasses
import json
import logging
import platform
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from engine.backends.cpu import usable_cores
from engine.backends.kokoro import assets as kokoro_assets
from engine.backends.kokoro import graph as graph
from engine.settings import EngineSettings

log = logging.getLogger(__name__)

TUNING_FILE = "tuning.json"
TUNING_VERSION = "1"  # how it measures: bump when that changes (every host measures again)
# Each timed inference vocodes FRAMES decoder frames (2.5 s, a window's size) of TEXT in the default voice; each
# candidate runs ROUNDS times, the candidates in turn, and keeps its best (a busy host slows some rounds, not all).
FRAMES, ROUNDS = 200, 3
TEXT = "The library opens at nine in the morning, and the reading room stays open until six in the evening."
CLOSE = 0.05  # throughputs within this of the best tie: float wins (nearer the unquantized model), then more threads
OPTIONS: tuple[tuple[str, str], ...] = ()  # session config entries every candidate runs with
NAMES = {graph.VOCODER: "float", graph.VOCODER_INT: "integer"}


@dataclasses.dataclass(frozen=True)
class Tuning:
    vocoder: str  # the vocoder's file name: kokoro_graph.VOCODER or VOCODER_INT
    threads: int  # onnxruntime intra-op threads per inference
    options: tuple[tuple[str, str], ...] = OPTIONS  # session config entries (sessions.new_session)
    why: str = ""  # one line for the log and status


def concurrency(settings: EngineSettings) -> int:
    """Inferences the engine runs at once: one per worker, at most its slots."""
    return max(1, min(settings.workers, settings.max_concurrency))


def host() -> dict[str, object]:
    """What the figures depend on: the CPU's model and flags, the cores this process may use."""
    found: dict[str, str] = {}
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            key, _, value = line.partition(":")
            found.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    return {"model": found.get("model name") or platform.processor() or platform.machine(),
            "flags": found.get("flags") or found.get("Features", ""), "cores": usable_cores()}


def stamp() -> dict[str, Any]:
    return {"version": TUNING_VERSION, "graph": kokoro_assets.graph_stamp(), "host": host()}


def candidates(cores: int, at_once: int) -> list[tuple[str, int]]:
    """Each vocoder with each thread count worth trying: a share of the cores per inference, and all of them."""
    threads = sorted({max(1, cores // max(1, at_once)), cores})
    return [(vocoder, n) for vocoder in NAMES for n in threads]


def text_feeds(text: str, assets_dir: str = "") -> dict[str, np.ndarray]:
    """The model's inputs (tokens, style, speed) for English `text` in the default voice, af_heart."""
    from engine.backends.kokoro.g2p import g2p_key, phonemize

    vocab = kokoro_assets.vocabulary()
    tokens = [vocab[c] for c in phonemize(text, g2p_key("en")) if c in vocab]
    rows = np.fromfile(kokoro_assets.voice_packs(assets_dir)["af_heart"], np.float32).reshape(-1, 256)
    return {"tokens": np.array([[0, *tokens, 0]], np.int64), "style": rows[len(tokens)].reshape(1, 256),
            "speed": np.ones(1, np.float32)}


def inputs(files: dict[str, Path], frames: int, vocoder) -> dict[str, np.ndarray]:
    """The feeds of the `vocoder` session for `frames` (at most ~500) frames of TEXT's speech, from its middle (past
    the leading pause), normalized by its own statistics (OWN 1)."""
    from engine.backends.sessions import new_session

    feeds = text_feeds(TEXT, str(files[graph.FEATURES].parent))
    x, f0 = new_session(str(files[graph.FEATURES]), usable_cores()).run([graph.X, graph.F0], feeds)
    lo = (x.shape[2] - frames) // 2  # TEXT makes ~530 frames
    norms = next(i.shape for i in vocoder.get_inputs() if i.name == graph.NORMS)
    return {graph.X: np.ascontiguousarray(x[:, :, lo:lo + frames]),
            graph.F0: np.ascontiguousarray(f0[:, lo:lo + frames]), "style": feeds["style"],
            graph.PHASE0: np.zeros((1, 1, graph.HARMONICS), np.float32),
            graph.NORMS: np.zeros(norms, np.float32), graph.OWN: np.ones(norms, np.float32)}


def _at_once(session, feeds: dict[str, np.ndarray], n: int) -> float:
    """Seconds for `n` inferences of `feeds` at once on `session` (as the engine's workers share it)."""
    threads = [threading.Thread(target=session.run, args=(None, feeds)) for _ in range(n)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - start


def measure(assets_dir: str = "", at_once: int = 1, frames: int = FRAMES, rounds: int = ROUNDS) -> dict:
    """Each candidate's real-time factor with `at_once` inferences at once on one session, and one alone (audio
    seconds per second; best of `rounds`, the candidates in turn), and the choice."""
    from engine.backends.sessions import new_session
    from engine.heap import give_back

    files = kokoro_assets.graph_paths(assets_dir)
    tried = candidates(usable_cores(), at_once)
    sessions = [new_session(str(files[vocoder]), threads, options=OPTIONS) for vocoder, threads in tried]
    feeds = inputs(files, frames, sessions[0])
    for session in sessions:
        session.run(None, feeds)  # warm: the arena grown, the kernels' packed weights made
    audio_s = frames * graph.HOP / 24_000
    together, alone = [0.0] * len(tried), [0.0] * len(tried)
    for _ in range(rounds):
        for k, session in enumerate(sessions):
            together[k] = max(together[k], at_once * audio_s / _at_once(session, feeds, at_once))
            alone[k] = max(alone[k], audio_s / _at_once(session, feeds, 1))
    del sessions
    give_back()
    figures = [{"vocoder": v, "threads": n, "together": round(t, 3), "alone": round(a, 3)}
               for (v, n), t, a in zip(tried, together, alone)]
    vocoder, threads = choose(figures)
    return {"at_once": at_once, "chosen": {"vocoder": vocoder, "threads": threads}, "figures": figures,
            "measured": time.strftime("%Y-%m-%d %H:%M:%S")}


def choose(figures: list[dict]) -> tuple[str, int]:
    """The fastest together; of those within CLOSE of it, float convolutions first, then more threads."""
    best = max(f["together"] for f in figures)
    chosen = max((f for f in figures if f["together"] >= (1 - CLOSE) * best),
                 key=lambda f: (f["vocoder"] == graph.VOCODER, f["threads"]))
    return chosen["vocoder"], chosen["threads"]


def _why(result: dict, model: str) -> str:
    def name(f: dict) -> str:
        return f"{NAMES[f['vocoder']]}/{f['threads']}"

    chosen = next(f for f in result["figures"] if f["vocoder"] == result["chosen"]["vocoder"]
                  and f["threads"] == result["chosen"]["threads"])
    others = ", ".join(f"{name(f)} {f['together']:.2f}x" for f in result["figures"] if f is not chosen)
    return (f"Kokoro's vocoder: {NAMES[chosen['vocoder']]} convolutions, {chosen['threads']} thread(s) per inference: "
            f"{chosen['together']:.2f}x real time with {result['at_once']} at once ({others}; one alone "
            f"{chosen['alone']:.2f}x) on {model}, measured {result['measured']}")


_lock = threading.Lock()


def tuning(assets_dir: str = "", at_once: int = 1) -> Tuning:
    """The stored choice for `at_once` inferences at once (concurrency()), measured first (and stored, where the
    folder is writable) when TUNING_FILE is missing, was made for another CPU, graph or way of measuring, or has none
    for it."""
    path = kokoro_assets.folder(assets_dir) / TUNING_FILE
    key, now = str(max(1, at_once)), stamp()
    with _lock:
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            record = {}
        if record.get("stamp") != now:
            record = {"stamp": now, "by_concurrency": {}}
        if key not in record["by_concurrency"]:
            log.info("measuring Kokoro's vocoders on this CPU for %s inference(s) at once (once)", key)
            record["by_concurrency"][key] = measure(assets_dir, int(key))
            try:
                tmp = path.with_name(path.name + ".part")
                tmp.write_text(json.dumps(record, indent=1), encoding="utf-8")
                tmp.replace(path)
            except OSError as exc:  # a read-only install: measured again by the next process
                log.warning("could not store Kokoro's tuning in %s: %s", path, exc)
    result = record["by_concurrency"][key]
    return Tuning(vocoder=result["chosen"]["vocoder"], threads=result["chosen"]["threads"], options=OPTIONS,
                  why=_why(result, str(now["host"]["model"])))
