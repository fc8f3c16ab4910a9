"""Soak: hours of hostile-but-ordinary traffic in minutes; memory, threads, files and sessions must stay flat."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import socket
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: bench/ comes first, the repository is what it imports from
    sys.path.insert(0, str(ROOT))

from bench.soak_measures import SENTENCES, Goal, Tally, flat_goals, rss_series, sample

KEY = "soak-key"
AUTH = {"Authorization": f"Bearer {KEY}"}
# server settings through the environment, short enough that stalls resolve within a quick run
SERVER_ENV = {
    "VOICEBOT_ENGINE_API_KEY": KEY,
    "VOICEBOT__ENGINE__SERVER__WRITE_TIMEOUT_S": "2",
    "VOICEBOT__ENGINE__SERVER__HEADER_TIMEOUT_S": "3",
    "VOICEBOT__ENGINE__SERVER__BODY_TIMEOUT_S": "5",
    "VOICEBOT__ENGINE__SERVER__MAX_STREAMS": "16",
}


class LogTail:
    """Collects a subprocess's stderr lines as they come (the log is checked for tracebacks)."""

    def __init__(self, stream: asyncio.StreamReader) -> None:
        self.lines: list[str] = []
        self.task = asyncio.create_task(self._read(stream))

    async def _read(self, stream: asyncio.StreamReader) -> None:
        while line := await stream.readline():
            self.lines.append(line.decode(errors="replace").rstrip())

    def tracebacks(self) -> int:
        return sum(line.startswith("Traceback") for line in self.lines)


# -- the engine server ------------------------------------------------------------------------------------


class ServerTraffic:
    """Clients of `python -m engine serve`: each action is one request and knows what answer it expects."""

    def __init__(self, url: str, tally: Tally, rng: random.Random) -> None:
        self.url, self.tally, self.rng = url, tally, rng
        self.clip: bytes | None = None
        self.uploads = 0

    def _text(self) -> str:
        return " ".join(self.rng.sample(SENTENCES, 2))

    async def _post_speech(self, s: aiohttp.ClientSession, body: dict) -> aiohttp.ClientResponse:
        return await s.post(self.url + "/v1/audio/speech", json=body, headers=AUTH)

    async def speak(self, s: aiohttp.ClientSession) -> None:
        async with await self._post_speech(s, {"input": self._text(), "response_format": "pcm"}) as resp:
            data = await resp.read()
            self.tally.record("speak", resp.status == 200 and len(data) > 24_000, f"{resp.status}, {len(data)} bytes")

    async def hang_up(self, s: aiohttp.ClientSession) -> None:
        resp = await self._post_speech(s, {"input": self._text(), "response_format": "wav"})
        self.tally.record("hang-up", resp.status == 200, f"{resp.status}")
        await resp.content.readany()
        resp.close()  # mid-stream: the server cancels the synthesis

    async def stall(self, s: aiohttp.ClientSession) -> None:
        body = json.dumps({"input": " ".join(SENTENCES), "response_format": "pcm", "sample_rate": 48000}).encode()
        head = (f"POST /v1/audio/speech HTTP/1.1\r\nHost: soak\r\nAuthorization: Bearer {KEY}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode()
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.setblocking(False)
        port = int(self.url.rsplit(":", 1)[1])
        await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
        reader, writer = await asyncio.open_connection(sock=sock)
        writer.write(head + body)
        await writer.drain()
        await asyncio.sleep(4.0)  # reads nothing: the server drops it after write_timeout_s (2 s here)
        writer.close()
        self.tally.record("stalled reader", True)

    async def upload(self, s: aiohttp.ClientSession) -> None:
        if self.clip is None:
            async with await self._post_speech(s, {"input": " ".join(SENTENCES[:3]), "response_format": "wav"}) as resp:
                self.clip = await resp.read()
        self.uploads += 1
        form = aiohttp.FormData()
        form.add_field("name", f"soak voice {self.uploads % 3}")
        form.add_field("transcript", " ".join(SENTENCES[:3]))
        form.add_field("file", self.clip, filename="clip.wav", content_type="audio/wav")
        async with s.post(self.url + "/v1/voices", data=form, headers=AUTH) as resp:
            self.tally.record("upload", resp.status == 200, f"{resp.status} {(await resp.text())[:120]}")

    async def hostile(self, s: aiohttp.ClientSession) -> None:
        parts = aiohttp.FormData(default_to_multipart=True)
        for i in range(50):
            parts.add_field(f"p{i}", "x")
        async with s.post(self.url + "/v1/voices", data=parts, headers=AUTH) as resp:
            self.tally.record("part flood", resp.status == 413, f"{resp.status}")
        body = b'{"input": "Hi.", "speed": ' + b"9" * 400 + b"}"
        async with s.post(self.url + "/v1/audio/speech", data=body,
                          headers={**AUTH, "Content-Type": "application/json"}) as resp:
            self.tally.record("400-digit speed", resp.status == 400, f"{resp.status}")
        async with s.get(self.url + "/healthz") as resp:
            self.tally.record("healthz", resp.status == 200 and await resp.json() == {"status": "ok"}, f"{resp.status}")

    async def status(self, s: aiohttp.ClientSession) -> dict:
        async with s.get(self.url + "/v1/status", headers=AUTH) as resp:
            return await resp.json()


async def _client(actions: list[tuple[Callable[[aiohttp.ClientSession], Awaitable[None]], float]], tally: Tally,
                  until: float, rng: random.Random) -> None:
    """One client: weighted random actions until `until` (each bounded by a 60 s timeout)."""
    funcs, weights = zip(*actions)
    timeout = aiohttp.ClientTimeout(total=60)
    async with aiohttp.ClientSession(timeout=timeout) as s:
        while time.monotonic() < until:
            action = rng.choices(funcs, weights)[0]
            try:
                await asyncio.wait_for(action(s), 60)
            except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
                tally.record(action.__name__, False, f"{type(exc).__name__}: {exc}")
            await asyncio.sleep(rng.uniform(0.05, 0.3))


async def soak_server(warmup_s: float, run_s: float, clients: int, seed: int, tmp: Path) -> list[Goal]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "engine", "serve", "--port", "0", "--voices-dir", str(tmp / "voices"),
        cwd=ROOT, env=os.environ | SERVER_ENV, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
    try:
        assert proc.stderr is not None
        first = (await asyncio.wait_for(proc.stderr.readline(), 180)).decode()
        found = re.search(r"engine server on (\S+)", first)
        if not found:
            raise RuntimeError(f"the engine server did not start: {first}")
        log = LogTail(proc.stderr)
        tally, rng = Tally(), random.Random(seed)
        traffic = ServerTraffic(found[1], tally, rng)
        actions = [(traffic.speak, 5), (traffic.hang_up, 4), (traffic.stall, 1), (traffic.upload, 0.3),
                   (traffic.hostile, 1)]
        if os.environ.get("SOAK_ACTIONS"):  # for finding which traffic grows memory: names of ServerTraffic methods
            actions = [(getattr(traffic, name), 1.0) for name in os.environ["SOAK_ACTIONS"].split(",")]
        async with aiohttp.ClientSession() as s:
            start = sample(proc.pid, (await traffic.status(s))["sessions"])
            for action, _ in actions:  # every path once first: models and thread pools load in the warm-up
                await action(s)
            warm_end = time.monotonic() + warmup_s
            await asyncio.gather(*(_client(actions, Tally(), warm_end,
                                           random.Random(seed + i)) for i in range(clients)))
            await asyncio.sleep(5)  # stalls and hang-ups of the warm-up settle
            warm = sample(proc.pid, (await traffic.status(s))["sessions"])
            until = time.monotonic() + run_s
            series, *_ = await asyncio.gather(
                rss_series(proc.pid, until), *(_client(actions, tally, until,
                                                       random.Random(seed + 100 + i)) for i in range(clients)))
            print(f"server: RSS every 10 s after warm-up (MB): {series}")
            await asyncio.sleep(5)
            status = await traffic.status(s)
            end = sample(proc.pid, status["sessions"])
        goals = flat_goals("server", start, warm, end, log.tracebacks(), tally)
        goals.append(Goal("server streams all ended", status["active_streams"] == 0,
                          f"{status['active_streams']} active"))
        return goals
    finally:
        if proc.returncode is None:
            proc.terminate()
            try:
                await asyncio.wait_for(proc.wait(), 30)
            except asyncio.TimeoutError:
                proc.kill()
                await proc.wait()


# -- running it ---------------------------------------------------------------------------------------------


async def run(args: argparse.Namespace) -> list[Goal]:
    import tempfile

    goals: list[Goal] = []
    with tempfile.TemporaryDirectory(prefix="soak-") as tmp:
        if "server" in args.only:
            goals += await soak_server(args.warmup, args.duration, args.clients, args.seed, Path(tmp))
        if "bot" in args.only:
            from bench.soak_bot import soak_bot

            goals += await soak_bot(args.warmup, args.duration, args.seed, Path(tmp))
    return goals


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--quick", action="store_true", help="a 2-minute smoke instead of 30 minutes")
    p.add_argument("--duration", type=float, default=None, help="seconds of traffic after the warm-up")
    p.add_argument("--warmup", type=float, default=None, help="seconds of warm-up traffic before the baseline")
    p.add_argument("--clients", type=int, default=4, help="concurrent clients of the engine server")
    p.add_argument("--only", nargs="+", default=["server", "bot"], choices=["server", "bot"])
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args(argv)
    total = 120.0 if args.quick else 1800.0
    # warm-up: the bot's RSS climbs for ~30 s of traffic (models, allocator pools, caches), then stays flat
    args.warmup = args.warmup if args.warmup is not None else total * (0.5 if args.quick else 0.1)
    args.duration = args.duration if args.duration is not None else total - args.warmup
    if len(args.only) == 2:  # both share the time
        args.warmup, args.duration = args.warmup / 2, args.duration / 2
    goals = asyncio.run(run(args))
    for g in goals:
        print(f"  [{'ok' if g.met else 'MISSED'}] {g.name}: {g.detail}")
    met = sum(g.met for g in goals)
    print(f"soak: {met}/{len(goals)} goals met")
    return 0 if met == len(goals) else 1


if __name__ == "__main__":
    sys.exit(main())
