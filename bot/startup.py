"""The one startup path: create_bot() for run_bot.py, the sandbox demo, e2e tests, the crash test and benchmarks.

Order: the database is upgraded, the engine is built and warmed up (every session created and run on a sentence
as long as the longest segment), then the VoiceBot is made; so a bot that reports ready speaks its first word
as fast as its hundredth, and its memory is already at its steady size.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import aiohttp

from bot.app import VoiceBot
from bot.config import Settings
from bot.storage.database import Database, upgrade
from engine import langid
from engine.base import Engine

log = logging.getLogger(__name__)


async def create_bot(
    settings: Settings,
    *,
    engine: Engine | None = None,
    database: Database | None = None,
    connector: Callable[[], aiohttp.BaseConnector] | None = None,
) -> VoiceBot:
    """Upgrade the database, build and warm up the engine (unless given), and make the bot.

    `connector` is a factory called here, inside the running loop (discord.py's aiohttp connector: the
    sandbox passes one that trusts its certificate authority)."""
    from engine.factory import build_engine

    await upgrade(settings.database_url)
    await asyncio.to_thread(langid.load)  # the language identifier's model, read once (about a second)
    engine = engine if engine is not None else build_engine(settings.engine)
    try:
        await engine.warm_up()
    except Exception:
        await engine.close()
        raise
    db = database if database is not None else Database(settings.database_url, echo=settings.database.echo)
    await db.connect()
    extra: dict[str, Any] = {"connector": connector()} if connector is not None else {}
    return VoiceBot(settings, database=db, engine=engine, **extra)


@dataclass
class RunningBot:
    """A bot started in a task of this loop (tests, benchmarks, the demo); `stop()` closes it."""

    bot: VoiceBot
    task: asyncio.Task[None]

    async def stop(self) -> None:
        try:
            await asyncio.wait_for(self.bot.close(), 15)
        finally:
            try:
                await asyncio.wait_for(self.task, 15)
            except (asyncio.CancelledError, Exception):
                log.debug("bot task ended with an error", exc_info=True)


async def start_in_background(bot: VoiceBot, token: str, *, ready_timeout: float = 60.0) -> RunningBot:
    """Log in and connect in a task; return once the bot is ready (its start error, or TimeoutError)."""
    task = asyncio.create_task(bot.start(token), name="voicebot")
    ready = asyncio.create_task(bot.wait_until_ready())
    done, _ = await asyncio.wait({task, ready}, timeout=ready_timeout, return_when=asyncio.FIRST_COMPLETED)
    if ready not in done:
        ready.cancel()
        if task in done:
            task.result()  # raises the bot's start error
        await RunningBot(bot, task).stop()
        raise TimeoutError("the bot did not become ready")
    return RunningBot(bot, task)


async def run(settings: Settings) -> None:
    """Production: create the bot and run it until it is closed."""
    bot = await create_bot(settings)
    async with bot:
        await bot.start(settings.discord.token)
