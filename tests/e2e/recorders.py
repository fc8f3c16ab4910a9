"""What the bot said (each finished utterance as bot.speech reports it) and what a /say sounded like in the channel."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from tests.audio_util import mono


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


async def heard_say(sb, demo, text: str):
    """/say as the demo user; the channel's audio (mono float) once it is quiet again."""
    async def say() -> None:
        it = await sb.slash(demo.alice, demo.general, "say", text=text)
        assert await it.wait_text(timeout=30) == "Speaking."

    return await heard_after(sb, demo, say)


async def heard_post(sb, demo, user, text: str):
    """`text` posted by `user` in the demo's readout channel; the channel's audio (mono float) once quiet again."""
    async def post() -> None:
        await sb.post(user, demo.general, text)

    return await heard_after(sb, demo, post)


async def heard_after(sb, demo, act: Callable[[], Awaitable[None]], least_s: float = 1.0):
    """What the demo guild's voice channel heard (mono float) from `act` (at least `least_s` of audio) until it went
    quiet."""
    capture = sb.capture(demo.guild)
    capture.clear()
    await act()
    await capture.wait_for_audio(least_s, timeout=60)
    await capture.wait_until_silent(0.8, timeout=60)
    return mono(capture.pcm())
