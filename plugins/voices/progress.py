"""A long task's progress in an interaction's message ("Preparing your voice 'Me': 40 %"), edited sparingly."""

from __future__ import annotations

import asyncio
import logging
import time

import discord

log = logging.getLogger(__name__)

STEP = 0.1  # a new figure is shown when it moved this much
EVERY_S = 2.0  # and at most this often (each edit is a Discord API call)


class ProgressMessage:
    """Call it with how far the task is (0.0-1.0, on the event loop), or `show` a text; `settle()` before the final
    edit, so that no progress edit lands after it."""

    def __init__(self, interaction: discord.Interaction, text: str) -> None:
        self.interaction = interaction
        self.text = text  # with a {percent} field
        self._shown = 0.0
        self._at = 0.0
        self._edit: asyncio.Task[None] | None = None

    def __call__(self, done: float) -> None:
        if done - self._shown >= STEP and self.show(self.text.format(percent=f"{done:.0%}")):
            self._shown = done

    def show(self, content: str) -> bool:
        """Edit the message to `content`, unless an edit was made too recently or is still on its way."""
        now = time.monotonic()
        if now - self._at < EVERY_S or (self._edit and not self._edit.done()):
            return False
        self._at = now
        self._edit = asyncio.get_running_loop().create_task(self._show(content))
        return True

    async def _show(self, content: str) -> None:
        try:
            await self.interaction.edit_original_response(content=content)
        except discord.HTTPException as exc:  # the final message still comes; a lost figure is harmless
            log.debug("progress edit failed: %s", exc)

    async def settle(self) -> None:
        if self._edit is not None:
            await self._edit
