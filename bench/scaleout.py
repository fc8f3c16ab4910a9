"""Scale-out bench: `python bench/scaleout.py [--seconds S] [--clients N]`: one vs two engine servers behind nginx.

Two `python -m engine serve` processes (Piper, one worker each, each pinned to its own core and so running one
onnxruntime thread: engine.piper.intra_op_threads = 0) behind Debian's nginx (least_conn, proxy_buffering off), all
on 127.0.0.1 (tests/fleet.py). Prints, from one run:
- `scaleout_throughput_two_vs_one`: audio seconds per wall second with both servers over that with nginx sending
  everything to one, under the same offered load (N clients asking for sentences back to back; phases alternate;
  audio bytes counted as they arrive over the phase, after a ramp, while the load stays on); goal >= 1.7 (what is
  missing is the fleet's overhead). Each phase also shows the CPU the servers got and the load average: on a
  machine busy with other work, the two servers get less than two cores and the ratio says so;
- `scaleout_ttfa_nginx_vs_direct`: median time to the first audio byte through nginx over that of the same server
  asked directly, one request at a time; goal <= 1.1 x direct + 20 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from engine.bench import Metric  # noqa: E402
from tests.fleet import EngineServer, Nginx  # noqa: E402

RATE = 24_000  # pcm as OpenAI sends it: s16le mono
RAMP_S = 2.0  # load on before counting starts: every server busy, every client past its first request
SENTENCES = (
    "Please remember to bring your notes to the meeting on Thursday afternoon.",
    "The quick brown fox jumps over the lazy dog and runs into the forest.",
    "We will start at nine, finish by noon, and have lunch together afterwards.",
    "Every morning the old fisherman walked down to the harbour to check his nets.",
)


async def _speak(s: aiohttp.ClientSession, url: str, text: str,
                 received: Callable[[int], None] = lambda n: None) -> tuple[float, float]:
    """(seconds to the first audio byte, audio seconds received) of one speech request; `received` is told
    the size of each piece as it arrives."""
    t0 = time.perf_counter()
    async with s.post(url + "/v1/audio/speech", json={"input": text, "response_format": "pcm"}) as resp:
        if resp.status != 200:
            raise RuntimeError(f"{url} answered {resp.status}: {await resp.text()}")
        first = await resp.content.readany()
        ttfa = time.perf_counter() - t0
        size = len(first)
        received(size)
        async for piece in resp.content.iter_any():
            size += len(piece)
            received(len(piece))
    return ttfa, size / (2 * RATE)


@dataclass
class Phase:
    rate: float  # audio seconds per wall second
    busy: float  # CPU seconds per wall second of all the servers together
    load: float  # the machine's 1-minute load average at the end


async def _throughput(url: str, clients: int, seconds: float, servers: list[EngineServer]) -> Phase:
    """What `clients` back-to-back clients receive from `url`, counted over `seconds` after RAMP_S of the same
    load. The load never stops inside the count: with a drain at the end (the last requests finishing
    after the others), one of two servers would sit idle while the other finished, which is no fleet cost."""
    texts = itertools.cycle(SENTENCES)
    got = 0

    def count(n: int) -> None:
        nonlocal got
        got += n

    async def client(s: aiohttp.ClientSession) -> None:
        while True:
            await _speak(s, url, next(texts), count)

    async def hold(tasks: list[asyncio.Task[None]], duration: float) -> None:
        done, _ = await asyncio.wait(tasks, timeout=duration, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            task.result()  # a client only ends by failing

    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120)) as s:
        tasks = [asyncio.ensure_future(client(s)) for _ in range(clients)]
        try:
            await hold(tasks, RAMP_S)
            got0, cpu0, t0 = got, sum(x.cpu_seconds() for x in servers), time.perf_counter()
            await hold(tasks, seconds)
            got1, cpu1, t1 = got, sum(x.cpu_seconds() for x in servers), time.perf_counter()
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
    return Phase((got1 - got0) / (2 * RATE) / (t1 - t0), (cpu1 - cpu0) / (t1 - t0), os.getloadavg()[0])


async def run(seconds: float, clients: int, rounds: int, ttfa_pairs: int) -> list[Metric]:
    with tempfile.TemporaryDirectory(prefix="scaleout-") as tmp:
        servers: list[EngineServer] = []
        nginx: Nginx | None = None
        try:
            cores = sorted(os.sched_getaffinity(0))
            pin = len(cores) >= 2  # one core per server, as one GPU each; this process and nginx run anywhere
            servers = list(await asyncio.gather(*(EngineServer.start(Path(tmp) / f"e{i}",
                                                                     cpus={cores[i]} if pin else None)
                                                  for i in range(2))))
            nginx = await Nginx(Path(tmp) / "nginx", servers).start()
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as s:
                for server in servers:  # sessions and caches warm on both
                    for text in SENTENCES:
                        await _speak(s, server.url, text)
            one: list[Phase] = []
            two: list[Phase] = []
            for _ in range(rounds):  # alternate, so drift on a shared machine hits both alike
                await nginx.only(0)
                one.append(await _throughput(nginx.url, clients, seconds, servers))
                await nginx.only(None)
                two.append(await _throughput(nginx.url, clients, seconds, servers))
            await nginx.only(0)
            direct: list[float] = []
            proxied: list[float] = []
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as s:
                for i in range(ttfa_pairs):
                    text = SENTENCES[i % len(SENTENCES)]
                    pair = [(servers[0].url, direct), (nginx.url, proxied)]
                    for url, times in pair if i % 2 else reversed(pair):
                        times.append((await _speak(s, url, text))[0])
        finally:
            if nginx is not None:
                await nginx.stop()
            for server in servers:
                await server.stop()
    ratio = sum(x.rate for x in two) / sum(x.rate for x in one)

    def phases(runs: list[Phase]) -> str:
        return ", ".join(f"{x.rate:.2f} ({x.busy:.2f} cores, load {x.load:.1f})" for x in runs)

    d, p = statistics.median(direct), statistics.median(proxied)
    return [
        Metric("scaleout_throughput_two_vs_one", ratio, ">= 1.7", ratio >= 1.7,
               f"audio s per s (servers' CPU, load average) two: {phases(two)}; one: {phases(one)}; "
               f"{clients} clients, {rounds}x{seconds:g} s each after {RAMP_S:g} s"),
        Metric("scaleout_ttfa_nginx_vs_direct", p / d, "<= 1.1x + 20 ms", p <= 1.1 * d + 0.020,
               f"median {p * 1000:.0f} ms through nginx vs {d * 1000:.0f} ms direct, {ttfa_pairs} each"),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=15.0, help="length of each load phase")
    parser.add_argument("--clients", type=int, default=4, help="concurrent clients of the offered load")
    parser.add_argument("--rounds", type=int, default=2, help="one-server/two-server phase pairs")
    parser.add_argument("--ttfa-pairs", type=int, default=20, help="direct/nginx request pairs for TTFA")
    args = parser.parse_args(argv)
    for metric in asyncio.run(run(args.seconds, args.clients, args.rounds, args.ttfa_pairs)):
        print(metric.line(), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
