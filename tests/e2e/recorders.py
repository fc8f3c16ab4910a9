"""What the bot said: each finished utterance (guild, text, outcome) as bot.speech reports it."""

from __future__ import annotations

import asyncio


class Heard:
    def __init__(self, bot) -> None:
        self.items: list[tuple[int, str, str]] = []
        self._changed = asyncio.Event()
        bot.speech.listeners.append(self._on)

    def _on(self, guild_id, utt, outcome) -> None:
        self.items.append((guild_id, utt.request.text, outcome.value))
        self._changed.set()

    def texts(self, guild_id: int | None = None) -> list[str]:
        return [t for g, t, _ in self.items if guild_id in (None, g)]

    def of(self, guild) -> list[tuple[str, str]]:
        return [(t, o) for g, t, o in self.items if g == guild.id]

    async def _until(self, done, timeout: float) -> None:
        async def loop():
            while not done():
                self._changed.clear()
                await self._changed.wait()
        await asyncio.wait_for(loop(), timeout)

    async def wait_count(self, n: int, timeout: float = 60.0) -> None:
        """Until `n` utterances have ended, in any guild."""
        await self._until(lambda: len(self.items) >= n, timeout)

    async def wait(self, guild, n: int, timeout: float = 60.0) -> None:
        """Until `n` utterances of `guild` have ended."""
        await self._until(lambda: len(self.of(guild)) >= n, timeout)
