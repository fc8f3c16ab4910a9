"""Small asyncio helpers shared by the bot's services."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable


async def cancel_and_wait(task: asyncio.Task | None) -> None:
    """Cancel `task` and wait for it to end; whatever it raised on the way out is not our concern here."""
    if task is None:
        return
    task.cancel()
    try:
        await task
    except (asyncio.CancelledError, Exception):  # noqa: BLE001 - awaited only to end it: its outcome was reported where it ran
        pass


async def first_of(*awaitables: Awaitable[object]) -> None:
    """Wait until the first of `awaitables` is done; the others are cancelled."""
    tasks = [asyncio.ensure_future(a) for a in awaitables]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            await cancel_and_wait(task)
