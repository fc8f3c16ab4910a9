"""CatchUp: readout messages skipped because they could not start within max_delay, told once per catch-up (a
timer per guild, moved to the catch-up's end by each skip: nothing polls)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from bot.aio import cancel_and_wait

log = logging.getLogger(__name__)
QUIET_S = 3.0  # a catch-up ends when nothing more was skipped for this long...
LONGEST_S = 60.0  # ...or this long after its first skip (a backlog that lasts is told once a minute)

Send = Callable[[int, str], Awaitable[None]]  # (channel id, text)


@dataclass
class _Episode:
    channel_id: int
    count: int
    first_at: float
    last_at: float


def notice(count: int, max_delay: float) -> str:
    messages = "message" if count == 1 else "messages"
    return (f"Skipped {count} {messages} to catch up: the voice queue was more than {max_delay:.0f} s behind "
            f"(`/settings set max_delay` changes how far).")


class CatchUp:
    """Counts each guild's skipped messages and sends one notice when its catch-up ends."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self._episodes: dict[int, _Episode] = {}
        self._max_delay: dict[int, float] = {}
        self._timers: dict[int, asyncio.TimerHandle] = {}  # per guild: when its catch-up ends, as things stand
        self._telling: set[asyncio.Task] = set()

    def skipped(self, guild_id: int, channel_id: int | None, max_delay: float) -> None:
        """One message of `guild_id` was skipped; its notice goes to the channel of the first one skipped."""
        if channel_id is None:
            return
        now = time.monotonic()
        episode = self._episodes.get(guild_id)
        if episode is None:
            episode = self._episodes[guild_id] = _Episode(channel_id, 1, now, now)
        else:
            episode.count += 1
            episode.last_at = now
        self._max_delay[guild_id] = max_delay
        old = self._timers.pop(guild_id, None)
        if old is not None:
            old.cancel()
        ends = min(episode.last_at + QUIET_S, episode.first_at + LONGEST_S)
        self._timers[guild_id] = asyncio.get_running_loop().call_later(ends - now, self._ended, guild_id)

    def pending(self, guild_id: int) -> int:
        episode = self._episodes.get(guild_id)
        return episode.count if episode is not None else 0

    def _ended(self, guild_id: int) -> None:
        self._timers.pop(guild_id, None)
        ep = self._episodes.pop(guild_id, None)
        if ep is not None:
            task = asyncio.get_running_loop().create_task(self._tell(guild_id, ep), name="readout-catch-up")
            self._telling.add(task)
            task.add_done_callback(self._telling.discard)

    async def _tell(self, guild_id: int, ep: _Episode) -> None:
        try:
            await self._send(ep.channel_id, notice(ep.count, self._max_delay.get(guild_id, 0.0)))
        except Exception as exc:  # noqa: BLE001 - a missing channel or permission: logged, never raised into the loop
            log.warning("guild %s: could not tell the catch-up of %d messages: %s", guild_id, ep.count, exc)

    async def close(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        for task in list(self._telling):
            await cancel_and_wait(task)
