"""CallEvents: where a guild's call stands (its ConnectionState), from ObservedVoiceClient's events, the guild's voice
states and discord.py's facts; the one place voice events become states (VoiceConnection acts on them)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from bot.speech.connection.connection_state import LIVE, ConnectionState, StateWatch
from bot.speech.connection.e2ee import DAVE_REQUIRED_CLOSE, may_speak
from bot.speech.connection.voice_client import Kind, ObservedVoiceClient, VoiceEvent

log = logging.getLogger(__name__)
S = ConnectionState


class CallEvents:
    """The state of one guild's call, and what it was told: the VoiceClient now, the channel wanted."""

    def __init__(self, guild_id: int, on_state: Callable[[ConnectionState, ConnectionState], None] | None) -> None:
        self.guild_id = guild_id
        self.channel_id: int | None = None  # where we want to be; None after leave() or a drop
        self.vc: ObservedVoiceClient | None = None  # the VoiceClient we made; None once discord.py removed it
        self.refused: asyncio.Future[int] | None = None  # a 4017 close while our connect is under way
        self._on_state = on_state
        self.watch = StateWatch(self._state_changed)

    @property
    def state(self) -> ConnectionState:
        return self.watch.state

    def is_connected(self) -> bool:
        vc = self.vc
        return vc is not None and vc.is_connected()

    def on_voice_event(self, vc: ObservedVoiceClient, event: VoiceEvent) -> None:
        """The one place voice events become states (called on the event loop by ObservedVoiceClient)."""
        if vc is not self.vc:
            return  # a VoiceClient we already replaced
        if event.kind is Kind.FLOW:
            self._on_flow(event)
        elif event.kind is Kind.WS_OP:
            self.settle()  # DAVE: session description, transition executed, new epoch
        elif event.kind is Kind.CHANNEL:
            self._on_channel(event.channel_id)
        elif event.kind is Kind.REMOVED:
            self._on_removed()

    def _on_flow(self, event: VoiceEvent) -> None:
        state = self.state
        if event.connected:
            if state in (S.RECONNECTING, S.MOVED):
                log.info("guild %s: voice connection back (%s)", self.guild_id, state.value)
                self.watch.set(self.from_facts())
            return
        if state is S.CONNECTING and event.close_code == DAVE_REQUIRED_CLOSE:
            if self.refused is not None and not self.refused.done():
                self.refused.set_result(event.close_code)
        elif state in LIVE:
            log.info("guild %s: voice connection closed (code %s); discord.py is reconnecting", self.guild_id,
                     event.close_code)
            self.watch.set(S.RECONNECTING)

    def _on_channel(self, channel_id: int | None) -> None:
        """The bot's own voice state: a channel other than the wanted one, outside our join, is a move to follow.
        No channel while the call is up is a disconnect by someone else (discord.py's own reconnects take the
        call down before they leave the channel, and a leave of ours is DISCONNECTED already)."""
        if channel_id is None:
            if self.state in LIVE and self.is_connected():
                self._dropped()
            return
        if self.channel_id in (None, channel_id) or self.state is S.CONNECTING:
            return
        log.info("guild %s: moved to channel %s; following", self.guild_id, channel_id)
        self.channel_id = channel_id
        self.watch.set(S.MOVED)

    def _on_removed(self) -> None:
        self.vc = None
        if self.state not in (S.DISCONNECTED, S.CONNECTING, S.DROPPED):  # not our leave(), our join or known
            self._dropped()

    def _dropped(self) -> None:
        log.info("guild %s: disconnected from voice by Discord or an admin (or discord.py gave up)", self.guild_id)
        self.channel_id = None
        self.watch.set(S.DROPPED)

    def _state_changed(self, before: ConnectionState, now: ConnectionState) -> None:
        log.debug("guild %s: voice connection %s -> %s", self.guild_id, before.value, now.value)
        if self._on_state is not None:
            self._on_state(before, now)

    def settle(self, *, force: bool = False) -> None:
        """CONNECTED or E2EE_READY by discord.py's facts, while in the call (and, unless `force`, while no
        reconnect, move or join is under way: those end with their own events)."""
        if force or self.state in LIVE:
            state = self.from_facts()
            if state in LIVE:
                self.watch.set(state)

    def from_facts(self) -> ConnectionState:
        vc = self.vc
        if vc is None:
            return S.DISCONNECTED if self.channel_id is None else S.DROPPED
        if not vc.is_connected():
            return S.RECONNECTING
        return S.E2EE_READY if may_speak(vc) else S.CONNECTED
