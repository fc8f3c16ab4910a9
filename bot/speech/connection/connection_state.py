"""ConnectionState (a voice connection's typed state) and StateWatch: the state, waiters woken on each change."""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Callable

log = logging.getLogger(__name__)


class ConnectionState(enum.Enum):
    """Where one guild's voice connection stands (VoiceConnection sets it from gateway and voice events)."""

    DISCONNECTED = "disconnected"  # in no voice channel and wanting none (the start, leave(), a failed join)
    CONNECTING = "connecting"      # our join (connect or move) is under way
    CONNECTED = "connected"        # in the call, but listeners expect E2EE that is not ready yet
    E2EE_READY = "e2ee_ready"      # in the call and every frame sent now is heard (DAVE ready, or nobody needs it)
    RECONNECTING = "reconnecting"  # the voice connection closed; discord.py is reconnecting by itself
    MOVED = "moved"                # Discord or an admin moved the bot; discord.py is connecting to the new channel
    DROPPED = "dropped"            # disconnected by someone else (a kick, the channel deleted) or given up for good


LIVE = frozenset({ConnectionState.CONNECTED, ConnectionState.E2EE_READY})  # a voice connection to send on


class StateWatch:
    """The current ConnectionState; `wait_for` wakes on each change (no polling). Changed on the event loop only."""

    def __init__(self, on_change: Callable[[ConnectionState, ConnectionState], None] | None = None) -> None:
        self._state = ConnectionState.DISCONNECTED
        self._changed = asyncio.Event()  # set, then replaced, at each change: every waiter sees it
        self._on_change = on_change

    @property
    def state(self) -> ConnectionState:
        return self._state

    def set(self, state: ConnectionState) -> bool:
        """Move to `state`; False (nobody woken) when it already is."""
        before = self._state
        if state is before:
            return False
        self._state = state
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()
        if self._on_change is not None:
            try:
                self._on_change(before, state)
            except Exception:
                log.exception("connection state listener failed")
        return True

    async def wait_for(self, *states: ConnectionState, timeout: float) -> bool:
        """Wait (at most `timeout` s) until the state is one of `states`; False on timeout."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self._state not in states:
            left = deadline - loop.time()
            if left <= 0:
                return False
            try:
                await asyncio.wait_for(self._changed.wait(), left)
            except TimeoutError:
                return self._state in states
        return True
