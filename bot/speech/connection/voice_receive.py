"""VoiceReceive: a call's one receive path: who is speaking (SSRC -> member, from the voice gateway's SPEAKING and
client connect and disconnect ops) and when each member's packets arrive (from the call's UDP socket)."""

from __future__ import annotations

import collections
import logging
import struct
import threading
import time
from collections.abc import Callable
from typing import Any, cast

log = logging.getLogger(__name__)
SPEAKING, CLIENTS_CONNECT, CLIENT_CONNECT, CLIENT_DISCONNECT = 5, 11, 12, 13  # voice gateway ops, server -> client
RTP_VERSION = 2
RTCP_TYPES = range(72, 77)  # RTCP packet types 200-204 with the marker bit folded in (byte 1 & 0x7F)
IP_DISCOVERY_REPLY = b"\x00\x02"  # discord.py's own discovery reads this; it is not audio

AudioListener = Callable[[int, float], None]  # (member's user id, time.monotonic() of arrival)
PacketTaker = Callable[[bytes, float], None]  # (a consenting member's whole packet, its arrival)


class ReceiveCounts:
    """What every call's receive path heard and dropped, for /metrics (shared by the guilds, any thread)."""

    def __init__(self) -> None:
        self.packets = 0  # members' audio packets taken (their arrival reported)
        self.dropped: collections.Counter[str] = collections.Counter()  # reason -> packets or messages dropped
        self._lock = threading.Lock()

    def heard(self) -> None:
        with self._lock:
            self.packets += 1

    def drop(self, reason: str) -> None:
        with self._lock:
            self.dropped[reason] += 1

    def drops(self) -> dict[str, int]:
        """The drops by reason, read at once (another thread may be adding a reason)."""
        with self._lock:
            return dict(self.dropped)


class VoiceReceive:
    """One guild's receive path. The voice websocket's messages come on the event loop (`ws_message`), its UDP
    packets on discord.py's socket-reader thread (`datagram`). Only the RTP header is read: which member sent a
    packet and when it arrived (ducking needs no more); nothing is decrypted or decoded. A packet that is not
    RTP audio, from an SSRC no SPEAKING named, or whose listener fails is dropped and counted, never raised."""

    def __init__(self, counts: ReceiveCounts, is_bot: Callable[[int], bool]) -> None:
        self.counts = counts
        self._is_bot = is_bot  # a user id is a bot (this bot or another): its audio is not listened to
        self._members: dict[int, int] = {}  # SSRC -> user id (replaced whole: the reader thread only reads it)
        self._bots: frozenset[int] = frozenset()  # SSRCs of bots, ignored without counting
        self._listeners: list[AudioListener] = []
        self._takers: dict[int, PacketTaker] = {}  # user id -> who takes their whole packets (a recording)
        self.present: set[int] = set()  # members in the call (besides the bot), as the voice gateway said

    def listen(self, listener: AudioListener) -> None:
        """Call `listener(user_id, at)` for each audio packet of a member who is not a bot (on the reader thread)."""
        self._listeners = [*self._listeners, listener]

    def take(self, user_id: int, taker: PacketTaker) -> None:
        """Hand `user_id`'s whole packets to `taker` as well (they consented to a recording); nobody else's."""
        self._takers = {**self._takers, user_id: taker}

    def release(self, user_id: int) -> None:
        self._takers = {u: t for u, t in self._takers.items() if u != user_id}

    def member_of(self, ssrc: int) -> int | None:
        return self._members.get(ssrc)

    # -- the voice websocket (event loop) ----------------------------------------------------------
    def ws_message(self, msg: dict[str, Any]) -> None:
        """A JSON message of the voice websocket: who is in the call, and the SSRC each member speaks with."""
        op, d = msg.get("op"), cast(Any, msg.get("d"))  # a JSON value, checked by use (a bad one is counted)
        try:
            if op == SPEAKING:
                self._speaking(int(d["ssrc"]), int(d["user_id"]))
            elif op == CLIENT_CONNECT and d.get("audio_ssrc"):  # the older single-client form names the SSRC
                self._speaking(int(d["audio_ssrc"]), int(d["user_id"]))
            elif op == CLIENTS_CONNECT:
                self.present |= {int(u) for u in d["user_ids"]}
            elif op == CLIENT_DISCONNECT:
                self._gone(int(d["user_id"]))
        except (KeyError, TypeError, ValueError, AttributeError):
            self.counts.drop("bad_op")

    def _speaking(self, ssrc: int, user_id: int) -> None:
        self.present.add(user_id)
        members = {s: u for s, u in self._members.items() if u != user_id}  # one SSRC per member: the newest
        members[ssrc] = user_id
        self._members = members
        self._bots = frozenset(s for s, u in members.items() if self._is_bot(u))

    def _gone(self, user_id: int) -> None:
        self.present.discard(user_id)
        self._members = {s: u for s, u in self._members.items() if u != user_id}
        self._bots = frozenset(s for s in self._bots if s in self._members)

    def clear(self) -> None:
        """A new voice session: its SSRCs are announced again."""
        self._members, self._bots, self.present = {}, frozenset(), set()

    # -- the UDP socket (discord.py's socket-reader thread) ---------------------------------------
    def datagram(self, data: bytes) -> None:
        """One packet read from the call's socket: its member's arrival reported, or it is dropped and counted."""
        at = time.monotonic()
        if len(data) < 12 or data[0] >> 6 != RTP_VERSION:
            if not (len(data) == 74 and data[:2] == IP_DISCOVERY_REPLY):
                self.counts.drop("malformed")
            return
        if data[1] & 0x7F in RTCP_TYPES:
            self.counts.drop("rtcp")
            return
        ssrc = struct.unpack_from(">I", data, 8)[0]
        user_id = self._members.get(ssrc)
        if user_id is None:
            self.counts.drop("unknown_ssrc")
            return
        if ssrc in self._bots:
            return
        self.counts.heard()
        for listener in self._listeners:
            self._safely(listener, user_id, at)
        taker = self._takers.get(user_id)
        if taker is not None:
            self._safely(taker, data, at)

    def _safely(self, fn: Callable[..., None], *args: Any) -> None:
        try:
            fn(*args)
        except Exception:  # noqa: BLE001 - a listener's failure never reaches discord.py's reader or the call
            self.counts.drop("failed")
            log.debug("receive listener failed", exc_info=True)

