"""The bot half of bench/soak.py: /say, /skip right after the first audio, /stop and deleted messages (the sandbox)."""

from __future__ import annotations

import asyncio
import logging
import random
import time
from pathlib import Path

from bench._harness import bot_subprocess, join, new_room
from bench.soak_measures import SENTENCES, Goal, Tally, flat_goals, rss_series, sample

LONG = " ".join(SENTENCES)  # under /say's 500 characters


class BotTraffic:
    """One guild's users: each action is a command (or message) that must be answered."""

    def __init__(self, sb, room, tally: Tally, rng: random.Random) -> None:
        self.sb, self.room, self.tally, self.rng = sb, room, tally, rng

    async def _command(self, kind: str, name: str, **options: object) -> str:
        try:
            it = await self.sb.slash(self.room.user, self.room.text, name, **options)
            answer = await it.wait_text(timeout=30)
        except Exception as exc:  # noqa: BLE001 - an unanswered command is what the soak counts
            self.tally.record(kind, False, f"{type(exc).__name__}: {exc}")
            return ""
        self.tally.record(kind, bool(answer), "empty answer")
        return answer

    async def _first_audio(self, heard_before: int, timeout: float = 30.0) -> bool:
        capture = self.sb.voice.capture(self.room.guild.id)
        deadline = time.monotonic() + timeout
        while len(capture.packets) <= heard_before and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        return len(capture.packets) > heard_before

    async def say_and_skip(self) -> None:
        capture = self.sb.voice.capture(self.room.guild.id)
        capture.clear()
        answer = await self._command("say", "say", text=LONG)
        if not await self._first_audio(0):
            self.tally.record("first audio", False, f"nothing heard within 30 s after /say answered {answer!r}")
            return
        await asyncio.sleep(self.rng.uniform(0.0, 0.2))  # /skip within 200 ms of the first audio
        await self._command("skip", "skip")

    async def say_and_stop(self) -> None:
        await self._command("say", "say", text=" ".join(self.rng.sample(SENTENCES, 2)))
        await asyncio.sleep(self.rng.uniform(0.1, 1.0))
        await self._command("stop", "stop")

    async def say(self) -> None:
        await self._command("say", "say", text=self.rng.choice(SENTENCES))
        await asyncio.sleep(2.0)

    async def deleted_message(self) -> None:
        msg = await self.sb.post(self.room.user, self.room.text, self.rng.choice(SENTENCES))
        await asyncio.sleep(self.rng.uniform(0.0, 0.3))
        self.sb.delete_message(msg)
        self.tally.record("deleted message", True)

    async def round(self) -> None:
        action = self.rng.choices([self.say_and_skip, self.say_and_stop, self.say, self.deleted_message],
                                  [4, 2, 2, 2])[0]
        await action()
        self.sb.voice.capture(self.room.guild.id).clear()  # the sandbox keeps every packet otherwise


async def _traffic(rooms: list[BotTraffic], until: float) -> None:
    async def one(t: BotTraffic) -> None:
        while time.monotonic() < until:
            await t.round()
            await asyncio.sleep(t.rng.uniform(0.1, 0.5))

    await asyncio.gather(*(one(t) for t in rooms))


async def soak_bot(warmup_s: float, run_s: float, seed: int, tmp: Path, guilds: int = 2) -> list[Goal]:
    from sandbox import Sandbox

    logging.getLogger("aiohttp.server").setLevel(logging.CRITICAL)  # the sandbox's noise when the bot closes
    async with Sandbox() as sb, bot_subprocess(sb, tmp, max_s=3600) as child:
        await sb.wait_ready(timeout=60)
        rooms = [await new_room(sb, f"soak-{i}") for i in range(guilds)]
        await asyncio.sleep(0.5)  # GUILD_CREATE reaches the bot
        for room in rooms:
            await join(sb, room)
            owner = getattr(room.guild, "owner", None) or sb.owner
            it = await sb.slash(owner, room.text, "readout channel", channel=room.text)
            await it.wait_text(timeout=30)
        warm_tally, tally = Tally(), Tally()
        start = sample(child.pid)
        await _traffic([BotTraffic(sb, r, warm_tally, random.Random(seed + i)) for i, r in enumerate(rooms)],
                       time.monotonic() + warmup_s)
        await asyncio.sleep(5)
        warm = sample(child.pid)
        until = time.monotonic() + run_s
        series, _ = await asyncio.gather(
            rss_series(child.pid, until),
            _traffic([BotTraffic(sb, r, tally, random.Random(seed + 100 + i)) for i, r in enumerate(rooms)], until))
        print(f"bot: RSS every 10 s after warm-up (MB): {series}")
        await asyncio.sleep(5)
        end = sample(child.pid)
        logged = (tmp / "child.log").read_text(errors="replace").splitlines()
        tracebacks = sum(line.startswith("Traceback") for line in logged)
        return flat_goals("bot", start, warm, end, tracebacks, tally)
