"""Fixtures for the sandbox's own tests: a sandbox, a demo guild and a minimal discord.py bot."""
from __future__ import annotations

import asyncio

import pytest
from sandbox_minibot import MiniBot

from sandbox import Sandbox, point_discord_at, restore_discord
from sandbox.demo import create_demo


@pytest.fixture
async def sb():
    async with Sandbox() as box:
        yield box


async def start_bot(sb: Sandbox, **kwargs) -> tuple[MiniBot, asyncio.Task]:
    make_connector = point_discord_at(sb)
    bot = MiniBot(connector=make_connector(), **kwargs)
    task = asyncio.create_task(bot.start(sb.token))
    ready = asyncio.create_task(bot.wait_until_ready())
    done, _ = await asyncio.wait({task, ready}, timeout=20, return_when=asyncio.FIRST_COMPLETED)
    if ready not in done:
        ready.cancel()
        if task in done:
            task.result()
        raise TimeoutError("bot did not become ready")
    return bot, task


async def stop_bot(bot: MiniBot, task: asyncio.Task) -> None:
    await asyncio.wait_for(bot.close(), 10)
    try:
        await asyncio.wait_for(task, 10)
    finally:
        restore_discord()


@pytest.fixture
async def demo(sb):
    return await create_demo(sb)


@pytest.fixture
async def bot(sb, demo):
    bot, task = await start_bot(sb)
    yield bot
    await stop_bot(bot, task)
