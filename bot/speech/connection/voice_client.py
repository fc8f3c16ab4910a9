"""ObservedVoiceClient: discord.py's VoiceClient reporting its lifecycle as VoiceEvents (the one hook into it)."""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import discord
from discord.voice_state import ConnectionFlowState, VoiceConnectionState

from bot.speech.connection.discord_internals import voice_ws_close_code
from bot.speech.connection.member_audio import CallKeys
from bot.speech.connection.voice_receive import VoiceReceive

log = logging.getLogger(__name__)


class Kind(enum.Enum):
    FLOW = "flow"          # discord.py's connection flow changed: connected or not (close_code: the voice ws's)
    WS_OP = "ws_op"        # a voice websocket message was handled (op): DAVE transitions, epochs, session descriptions
    CHANNEL = "channel"    # the gateway's voice state for the bot itself: the channel it is in now (None: none)
    REMOVED = "removed"    # discord.py cleaned the VoiceClient up: a real disconnect, not one of its reconnects


@dataclass(frozen=True)
class VoiceEvent:
    kind: Kind
    connected: bool = False
    close_code: int | None = None
    op: int | None = None
    channel_id: int | None = None


Listener = Callable[["ObservedVoiceClient", VoiceEvent], None]


class ObservedVoiceClient(discord.VoiceClient):
    """A VoiceClient that tells `listener` what happens to it (on the event loop, never raising into discord.py).

    discord.py 2.7 has no public event for its voice connection's progress, its voice websocket's close code or its
    DAVE session's readiness. It does let a VoiceClient subclass (``channel.connect(cls=...)``) choose its connection
    state object (``create_connection_state``) and hook every voice websocket message (the ``hook`` of
    ``VoiceConnectionState``, as voice receive extensions do), and the connection state's public
    ``add_socket_listener`` hands the call's UDP packets to its receive path. Only those are used, with
    VoiceProtocol's own ``on_voice_state_update`` and ``cleanup``: nothing is patched. The one internal read, the
    voice websocket's close code, is read through bot/speech/connection/discord_internals.py.
    """

    def __init__(self, client: discord.Client, channel: discord.abc.Connectable, *, listener: Listener,
                 receive: VoiceReceive | None = None) -> None:
        self._listener = listener
        self._receive = receive  # the call's receive path: the voice websocket's messages and the UDP packets
        self._flow: _ObservedConnectionState | None = None
        super().__init__(client, channel)

    def create_connection_state(self) -> VoiceConnectionState:
        self._flow = _ObservedConnectionState(self, hook=self._ws_message)
        if self._receive is not None:  # discord.py's socket reader hands every packet to its listeners
            self._flow.add_socket_listener(self._receive.datagram)
        return self._flow

    # -- facts, public on discord.py's connection state --------------------------------------------
    @property
    def dave_protocol_version(self) -> int:
        """The call's DAVE protocol version (0: no end-to-end encryption)."""
        return self._flow.dave_protocol_version if self._flow is not None else 0

    @property
    def can_encrypt(self) -> bool:
        """discord.py's DAVE session is ready: frames are end-to-end encrypted for the current group."""
        return bool(self._flow is not None and self._flow.can_encrypt)

    def call_keys(self) -> CallKeys | None:
        """The transport key and mode, and the DAVE session of an E2EE call (public on discord.py's VoiceClient and
        connection state): what opening a member's packet takes now. None before the session description."""
        flow = self._flow
        if flow is None or not flow.secret_key or not flow.mode:  # discord.py's MISSING (falsy) until described
            return None
        return CallKeys(self.mode, bytes(self.secret_key), flow.dave_session if flow.dave_protocol_version else None)

    # -- events -----------------------------------------------------------------------------------
    def _emit(self, event: VoiceEvent) -> None:
        try:
            self._listener(self, event)
        except Exception:
            log.exception("voice event listener failed on %s", event)

    async def _ws_message(self, _ws: Any, msg: dict) -> None:
        if self._receive is not None:
            try:
                self._receive.ws_message(msg)
            except Exception:
                log.exception("the receive path failed on a voice websocket message")
        self._emit(VoiceEvent(Kind.WS_OP, op=msg.get("op")))

    async def on_voice_state_update(self, data: Any) -> None:
        channel_id = data.get("channel_id")
        self._emit(VoiceEvent(Kind.CHANNEL, channel_id=int(channel_id) if channel_id is not None else None))
        await super().on_voice_state_update(data)

    def cleanup(self) -> None:
        super().cleanup()
        self._emit(VoiceEvent(Kind.REMOVED))

    def flow_changed(self, connected: bool, close_code: int | None) -> None:
        self._emit(VoiceEvent(Kind.FLOW, connected=connected, close_code=close_code))


class _ObservedConnectionState(VoiceConnectionState):
    """discord.py's connection state, reporting each change of its flow state (connected, disconnected, ...)."""

    voice_client: ObservedVoiceClient

    def _set_state(self, state: ConnectionFlowState) -> None:
        before = self.state
        VoiceConnectionState.state.fset(self, state)  # type: ignore[attr-defined]
        if state is not before:
            self.voice_client.flow_changed(state is ConnectionFlowState.connected, self.close_code)

    state = property(VoiceConnectionState.state.fget, _set_state)  # type: ignore[attr-defined]

    async def _voice_connect(self, *, self_deaf: bool = False, self_mute: bool = False) -> None:
        """discord.py's op 4, with the flow state it waits in set before sending rather than after: discord.py 2.7
        sets it once the send returns, and a send that yields (aiohttp drains its writer every 64 KiB) let a quick
        VOICE_SERVER_UPDATE or VOICE_STATE_UPDATE be handled first, in the disconnected state, where discord.py
        drops it, so the join waited out its timeout (about 1 join in 500 when 50 guilds joined at once)."""
        if self.state is ConnectionFlowState.disconnected:
            self.state = ConnectionFlowState.set_guild_voice_state
        await super()._voice_connect(self_deaf=self_deaf, self_mute=self_mute)

    @property
    def close_code(self) -> int | None:
        """The voice websocket's close code once the voice server (or discord.py) closed it (aiohttp's close_code)."""
        return voice_ws_close_code(self)
