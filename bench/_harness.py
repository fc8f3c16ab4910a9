"""Shared pieces of the end-to-end benches: bench settings, a guild with a listener, utterance waits, RSS.

Run as `python bench/_harness.py child` (with `sandbox.client.env(sb)` in the environment) it is the bot in a
subprocess, for measuring that process's memory alone; it stops when its stdin closes, and then writes
child-stats.json (its event-loop lag samples, its engine's running totals each second and its peak memory) and
utterances.jsonl (one line per finished utterance, as the bot's speech service reports them) into
BENCH_DATA_DIR.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent
if sys.path[:1] != [str(ROOT)]:  # first: run as a script, bench/ comes first and its engine.py would be `engine`
    sys.path.insert(0, str(ROOT))

from bot.config import DEFAULT_CONFIG, Settings, load_settings  # noqa: E402

ENGINE_TOTALS = "engine-totals.jsonl"  # the bot child's engine totals, a line each second


def make_settings(data_dir: Path, **sections: dict) -> Settings:
    """The shipped defaults with a SQLite file in `data_dir`; `sections` replace fields per section."""
    s = load_settings(DEFAULT_CONFIG, environ={})
    s = dataclasses.replace(s, database=dataclasses.replace(s.database, path=str(Path(data_dir) / "bot.db")))
    for section, changes in sections.items():
        s = dataclasses.replace(s, **{section: dataclasses.replace(getattr(s, section), **changes)})
    return s


def bench_settings(data_dir: Path) -> Settings:
    """Shipped defaults, except that the bot never leaves voice for being idle."""
    return make_settings(data_dir, speech={"idle_leave_s": 0.0})


def pct(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..1) of a non-empty list."""
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


def p50(values: list[float]) -> float:
    return statistics.median(values)


def rss_mb(pid: int | str = "self") -> float:
    """Resident memory (VmRSS) of a process, MiB, from /proc."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024.0
    raise RuntimeError(f"no VmRSS for process {pid}")


def cpu_seconds(pid: int | str = "self") -> float:
    """CPU time a process has used (user + system, all its threads), seconds, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wav_of(pcm: bytes, rate: int = 48_000) -> bytes:
    """48 kHz stereo s16le as a mono WAV (what a sandbox member talks into a call: Sandbox.speak)."""
    import io
    import wave

    import numpy as np

    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(np.frombuffer(pcm, dtype="<i2")[::2].tobytes())
    return out.getvalue()


async def wait_until(predicate, timeout: float, what: str, step: float = 0.02) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        await asyncio.sleep(step)


class Finished:
    """Collects (guild_id, utterance, outcome) as the bot's speech service reports each finished utterance."""

    def __init__(self, bot) -> None:
        self.items: list[tuple[int, object, object]] = []
        bot.speech.listeners.append(self._on)

    def _on(self, guild_id, utt, outcome) -> None:
        self.items.append((guild_id, utt, outcome))

    def mark(self) -> int:
        return len(self.items)

    def since(self, mark: int, guild_id: int | None = None) -> list[tuple[int, object, object]]:
        return [it for it in self.items[mark:] if guild_id in (None, it[0])]

    async def wait(self, mark: int, count: int = 1, guild_id: int | None = None, timeout: float = 120.0) -> list:
        await wait_until(lambda: len(self.since(mark, guild_id)) >= count, timeout,
                         f"{count} finished utterance(s) in guild {guild_id}")
        return self.since(mark, guild_id)


@dataclass
class Room:
    """A guild with a text channel, a voice channel and a user already in it."""

    guild: object
    text: object
    voice: object
    user: object


async def new_room(sb, name: str, shard: tuple[int, int] | None = None) -> Room:
    guild = sb.guild(name, shard=shard)
    text = guild.text_channel("general")
    voice = guild.voice_channel("Voice")
    user = sb.user(f"user-{name}")
    guild.add_member(user)
    await sb.user_joins_voice(user, voice)
    return Room(guild, text, voice, user)


async def join(sb, room: Room, bot=None, timeout: float = 30.0) -> None:
    """/join as the room's user and wait for the voice connection (and, given `bot`, its guild cache first)."""
    if bot is not None:
        await wait_until(lambda: bot.get_guild(room.guild.id) is not None, timeout, f"{room.guild.name} cached")
    it = await sb.slash(room.user, room.text, "join")
    answer = await it.wait_text(timeout=timeout)
    if "Joined" not in answer:
        raise RuntimeError(f"/join in {room.guild.name}: {answer}")
    await sb.wait_voice_connected(room.guild, timeout=timeout)


# -- the bot in a subprocess -------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def bot_subprocess(sb, data_dir: Path, max_s: float = 600.0):
    """The bot in its own process (`python bench/_harness.py child`: the production startup, create_bot),
    connected to `sb` in this one; yields the Popen once the bot is ready and its commands are synced."""
    from sandbox.client import env as sandbox_env

    errlog = open(Path(data_dir) / "child.log", "wb")
    child = subprocess.Popen(
        [sys.executable, str(ROOT / "bench" / "_harness.py"), "child"], cwd=ROOT,
        env=os.environ | sandbox_env(sb) | {"BENCH_DATA_DIR": str(data_dir), "BENCH_CHILD_MAX_S": str(max_s)},
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errlog)
    try:
        line = await asyncio.wait_for(asyncio.to_thread(child.stdout.readline), 180)
        if line.strip() != b"ready":
            raise RuntimeError(f"bot subprocess did not start: {child_log(data_dir)}")
        await sb.wait_commands(timeout=30)
        yield child
    finally:
        child.stdin.close()
        try:  # in a thread: the sandbox in this process must keep answering while the bot leaves voice
            await asyncio.to_thread(child.wait, 30)
        except subprocess.TimeoutExpired:
            child.kill()
            await asyncio.to_thread(child.wait, 10)
        errlog.close()


def child_log(data_dir: Path, chars: int = 3000) -> str:
    return (Path(data_dir) / "child.log").read_text(errors="replace")[-chars:]



async def _child_main() -> int:
    from demo.sandbox_bot import sandbox_settings, start_bot
    from sandbox.client import ENV_API, ENV_CA, ENV_GATEWAY, ENV_TOKEN

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    env = os.environ
    # start_bot reads only these four attributes of the sandbox
    sb = SimpleNamespace(api_url=env[ENV_API], gateway_url=env[ENV_GATEWAY], ca_pem_path=env[ENV_CA],
                         token=env[ENV_TOKEN])
    data_dir = Path(env["BENCH_DATA_DIR"])
    settings = sandbox_settings(bench_settings(data_dir), sb)
    running = await start_bot(sb, settings)
    record = open(data_dir / "utterances.jsonl", "w", buffering=1)  # a line at a time
    running.bot.speech.listeners.append(lambda guild_id, utt, outcome: record.write(json.dumps({
        "guild": guild_id, "kind": utt.request.kind, "outcome": outcome.value, "ttfa": utt.ttfa,
        "underruns": utt.source.underruns if utt.source is not None else 0, "audio_s": utt.audio_seconds,
        "held_s": utt.held_s, "message_id": utt.request.message_id, "author": utt.request.author_id,
        "created_at": utt.request.created_at, "catch_up": utt.speed_factor, "speed": utt.speed,
        # when it entered each stage and its synthesis started, in seconds after it was asked for
        "stages": {k: t - utt.request.created_at for k, t in utt.stage_at.items()},
        "synth_started": utt.synth_started - utt.request.created_at if utt.synth_started is not None else None,
        # [start, frames] of each stretch the player played (more than one when it gave way to a /say): a bench
        # finds this audio in the sandbox's capture by when it started, and checks it was all there
        "spans": utt.stats.spans}) + "\n"))
    lags: list[float] = []
    engine_totals: list[tuple] = []
    tickers = [asyncio.create_task(_lag_ticker(lags)),
               asyncio.create_task(_engine_ticker(running.bot.engine, engine_totals, data_dir / ENGINE_TOTALS))]
    print("ready", flush=True)
    closed = asyncio.Event()

    def on_stdin() -> None:
        if not os.read(sys.stdin.fileno(), 4096):
            closed.set()

    loop = asyncio.get_running_loop()
    loop.add_reader(sys.stdin.fileno(), on_stdin)
    try:
        # until the parent closes stdin (bounded: a child never outlives a stuck parent by long)
        await asyncio.wait_for(closed.wait(), float(env.get("BENCH_CHILD_MAX_S", "900")))
    except asyncio.TimeoutError:
        pass
    finally:
        loop.remove_reader(sys.stdin.fileno())
        for ticker in tickers:
            ticker.cancel()
        (data_dir / "child-stats.json").write_text(json.dumps({"lag_s": lags, "peak_rss_mb": peak_rss_mb(),
                                                               "engine": engine_totals}))
        await running.stop()
        record.close()
    return 0


async def _lag_ticker(lags: list[float], step: float = 0.01) -> None:
    """How late the event loop wakes a 10 ms sleep: the loop's lag, sampled all along."""
    loop = asyncio.get_running_loop()
    while True:
        t0 = loop.time()
        await asyncio.sleep(step)
        lags.append(loop.time() - t0 - step)


async def _engine_ticker(engine, totals: list[tuple], path: Path, step: float = 1.0) -> None:
    """(time.monotonic(), audio seconds made, slot seconds spent making it, the same by slots busy) of the engine,
    each `step` s, kept and written a line at a time to `path`: a bench reads how fast the engine synthesized beside
    everything else the bot did, at each load, over any stretch of the run (while it runs, too)."""
    with open(path, "w", buffering=1) as out:
        while True:
            stats = engine.stats()
            totals.append((time.monotonic(), stats.audio_seconds, stats.synthesis_seconds,
                           {str(k): list(v) for k, v in stats.by_load.items()}))
            out.write(json.dumps(totals[-1]) + "\n")
            await asyncio.sleep(step)


def engine_totals(data_dir: Path) -> list[tuple]:
    """The bot child's engine totals written so far (see _engine_ticker)."""
    path = Path(data_dir) / ENGINE_TOTALS
    lines = path.read_text().splitlines() if path.exists() else []
    return [tuple(json.loads(line)) for line in lines if line.endswith("]")]


def peak_rss_mb(pid: int | str = "self") -> float:
    """Peak resident memory (VmHWM) of a process, MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024.0
    raise RuntimeError(f"no VmHWM for process {pid}")


if __name__ == "__main__" and sys.argv[1:] == ["child"]:
    sys.exit(asyncio.run(_child_main()))
