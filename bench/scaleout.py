"""Scale-out bench: `python bench/scaleout.py [--seconds S] [--clients N]`: one vs two engine servers behind nginx.

Two `python -m engine serve` processes (Piper, one worker each) behind Debian's nginx (least_conn, proxy_buffering
off), all on 127.0.0.1 (tests/fleet.py). Prints, from one run:
- `scaleout_throughput_two_vs_one`: audio seconds per wall second with both servers over that with nginx sending
  everything to one, under the same offered load (N clients asking for sentences back to back; phases alternate);
  goal >= 1.7 (what is missing is the fleet's overhead);
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
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from engine.bench import Metric  # noqa: E402
from tests.fleet import EngineServer, Nginx  # noqa: E402

RATE = 24_000  # pcm as OpenAI sends it: s16le mono
SENTENCES = (
    "Please remember to bring your notes to the meeting on Thursday afternoon.",
    "The quick brown fox jumps over the lazy dog and runs into the forest.",
    "We will start at nine, finish by noon, and have lunch together afterwards.",
    "Every morning the old fisherman walked down to the harbour to check his nets.",
)


async def _speak(s: aiohttp.ClientSession, url: str, text: str) -> tuple[float, float]:
    """(seconds to the first audio byte, audio seconds received) of one speech request."""
    t0 = time.perf_counter()
    async with s.post(url + "/v1/audio/speech", json={"input": text, "response_format": "pcm"}) as resp:
        if resp.status != 200:
            raise RuntimeError(f"{url} answered {resp.status}: {await resp.text()}")
        first = await resp.content.readany()
        ttfa = time.perf_counter() - t0
        size = len(first) + len(await resp.read())
    return ttfa, size / (2 * RATE)


async def _throughput(url: str, clients: int, seconds: float) -> float:
    """Audio seconds per wall second that `clients` back-to-back clients get from `url` in `seconds`."""
    texts = itertools.cycle(SENTENCES)
    audio = 0.0
    deadline = time.perf_counter() + seconds

    async def client(s: aiohttp.ClientSession) -> None:
        nonlocal audio
        while time.perf_counter() < deadline:
            audio += (await _speak(s, url, next(texts)))[1]

    t0 = time.perf_counter()
    timeout = aiohttp.ClientTimeout(total=120)
    async with aiohttp.ClientSession(timeout=timeout) as s:
        await asyncio.wait_for(asyncio.gather(*(client(s) for _ in range(clients))), seconds + 120)
    return audio / (time.perf_counter() - t0)


async def run(seconds: float, clients: int, rounds: int, ttfa_pairs: int) -> list[Metric]:
    with tempfile.TemporaryDirectory(prefix="scaleout-") as tmp:
        servers: list[EngineServer] = []
        nginx: Nginx | None = None
        try:
            cores = sorted(os.sched_getaffinity(0))
            pin = len(cores) >= 2  # one core per server, as one GPU each; this process and nginx run anywhere
            servers = list(await asyncio.gather(*(EngineServer.start(Path(tmp) / f"e{i}", cpus={cores[i]} if pin else None)
                                                  for i in range(2))))
            nginx = await Nginx(Path(tmp) / "nginx", servers).start()
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as s:
                for server in servers:  # sessions and caches warm on both
                    for text in SENTENCES:
                        await _speak(s, server.url, text)
            one: list[float] = []
            two: list[float] = []
            for _ in range(rounds):  # alternate, so drift on a shared machine hits both alike
                await nginx.only(0)
                one.append(await _throughput(nginx.url, clients, seconds))
                await nginx.only(None)
                two.append(await _throughput(nginx.url, clients, seconds))
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
    ratio = sum(two) / sum(one)
    d, p = statistics.median(direct), statistics.median(proxied)
    return [
        Metric("scaleout_throughput_two_vs_one", ratio, ">= 1.7", ratio >= 1.7,
               f"{sum(two) / rounds:.2f} vs {sum(one) / rounds:.2f} audio s per s, {clients} clients, {rounds}x{seconds:g} s each"),
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
