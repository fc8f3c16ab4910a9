"""The main gateway (v10, JSON text frames): HELLO, IDENTIFY/READY, heartbeats, RESUME with replay, sharding."""
from __future__ import annotations

import asyncio
import json
import secrets
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

from aiohttp import WSMsgType, web

if TYPE_CHECKING:
    from .world import World


@dataclass
class GatewayOp:
    at: float
    direction: str          # "in" (from the bot) or "out"
    shard: Optional[int]
    op: int
    t: Optional[str]
    d: Any


class GatewaySession:
    """One identified bot session: its shard, sequence, and every dispatch sent (kept for RESUME replay)."""

    def __init__(self, session_id: str, shard_id: int, shard_count: int, intents: int) -> None:
        self.session_id = session_id
        self.shard_id = shard_id
        self.shard_count = shard_count
        self.intents = intents
        self.events: list[dict] = []
        self.conn: Optional[GatewayConnection] = None
        self.valid = True           # False after INVALID_SESSION or a normal close
        self.announced: set[int] = set()   # guild ids sent with GUILD_CREATE
        self.wake = asyncio.Event()

    @property
    def seq(self) -> int:
        return len(self.events)

    def owns(self, guild_id: Optional[int]) -> bool:
        if guild_id is None:
            return self.shard_id == 0
        return (guild_id >> 22) % self.shard_count == self.shard_id

    def push(self, t: str, d: Any) -> None:
        self.events.append({"op": 0, "t": t, "s": len(self.events) + 1, "d": d})
        self.wake.set()


class GatewayConnection:
    """One websocket from a bot; sends are serialised, dispatches are pumped from the session buffer."""

    def __init__(self, ws: web.WebSocketResponse, server: "GatewayServer") -> None:
        self.ws = ws
        self.server = server
        self.session: Optional[GatewaySession] = None
        self.pump_task: Optional[asyncio.Task] = None
        self._lock = asyncio.Lock()

    async def send(self, frame: dict) -> None:
        async with self._lock:
            if self.ws.closed:
                return
            self.server.log_op("out", self, frame)
            await self.ws.send_str(json.dumps(frame))

    async def pump(self, start: int) -> None:
        session = self.session
        idx = start
        while not self.ws.closed:
            while idx < len(session.events):
                await self.send(session.events[idx])
                idx += 1
            session.wake.clear()
            await session.wake.wait()

    def start_pump(self, start: int) -> None:
        self.pump_task = asyncio.get_running_loop().create_task(self.pump(start))

    def stop(self) -> None:
        if self.pump_task is not None:
            self.pump_task.cancel()


class GatewayServer:
    """Accepts bot gateway connections and routes guild events to the shard that owns the guild."""

    def __init__(self, sb: "World", heartbeat_interval: int = 41250) -> None:
        self.sb = sb
        self.heartbeat_interval = heartbeat_interval
        self.sessions: dict[str, GatewaySession] = {}
        self.connections: set[GatewayConnection] = set()
        self.log: list[GatewayOp] = []
        self.signal = sb._signal

    def log_op(self, direction: str, conn: GatewayConnection, frame: dict) -> None:
        shard = conn.session.shard_id if conn.session else None
        self.log.append(GatewayOp(time.monotonic(), direction, shard, frame.get("op"), frame.get("t"), frame.get("d")))
        self.signal.fire()

    # ---- routing -------------------------------------------------------------------------------------
    def live_sessions(self) -> list[GatewaySession]:
        return [s for s in self.sessions.values() if s.valid]

    def connected_shards(self) -> set[int]:
        return {s.shard_id for s in self.live_sessions() if s.conn is not None and not s.conn.ws.closed}

    def dispatch(self, t: str, d: Any, guild_id: Optional[int] = None, intent: int = 0,
                 require_announced: bool = True) -> int:
        """Queue a dispatch for every live session owning ``guild_id``; returns how many got it.
        ``d`` may be a function of the session (for per-intent payloads)."""
        n = 0
        for s in self.live_sessions():
            if not s.owns(guild_id):
                continue
            if guild_id is not None and require_announced and guild_id not in s.announced:
                continue
            if intent and not s.intents & intent:
                continue
            s.push(t, d(s) if callable(d) else d)
            n += 1
        return n

    def announce_guild(self, guild) -> None:
        """A guild created after the bot connected: GUILD_CREATE to its shard."""
        for s in self.live_sessions():
            if s.owns(guild.id) and guild.id not in s.announced:
                s.announced.add(guild.id)
                s.push("GUILD_CREATE", guild.to_json())

    # ---- websocket handler ---------------------------------------------------------------------------
    async def handle(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(heartbeat=None, timeout=2.0, max_msg_size=16 * 1024 * 1024)
        await ws.prepare(request)
        conn = GatewayConnection(ws, self)
        self.connections.add(conn)
        try:
            await conn.send({"op": 10, "d": {"heartbeat_interval": self.heartbeat_interval}, "s": None, "t": None})
            async for msg in ws:
                if msg.type != WSMsgType.TEXT:
                    continue
                frame = json.loads(msg.data)
                self.log_op("in", conn, frame)
                await self._on_frame(conn, frame)
        finally:
            conn.stop()
            self.connections.discard(conn)
            session = conn.session
            if session is not None and session.conn is conn:
                session.conn = None
                if ws.close_code == 1000 and not getattr(conn, "server_closed", False):
                    session.valid = False      # the bot closed normally: the session is over
            self.signal.fire()
        return ws

    async def _on_frame(self, conn: GatewayConnection, frame: dict) -> None:
        op, d = frame.get("op"), frame.get("d")
        if op == 1:
            await conn.send({"op": 11, "d": None, "s": None, "t": None})
        elif op == 2:
            await self._identify(conn, d)
        elif op == 6:
            await self._resume(conn, d)
        elif op == 4 and conn.session is not None:
            await self.sb._voice_state_request(conn.session, d)
        elif op == 8 and conn.session is not None:
            self._members_chunk(conn.session, d)

    async def _identify(self, conn: GatewayConnection, d: dict) -> None:
        if d.get("token") != self.sb.token:
            await conn.ws.close(code=4004, message=b"Authentication failed.")
            return
        shard_id, shard_count = d.get("shard") or [0, 1]
        session = GatewaySession(secrets.token_hex(16), shard_id, shard_count, d.get("intents", 0))
        # A new IDENTIFY for a shard replaces older sessions of that shard (a restarted bot).
        for old in self.live_sessions():
            if old.shard_id == shard_id and old.shard_count == shard_count and (old.conn is None or old.conn.ws.closed):
                old.valid = False
        self.sessions[session.session_id] = session
        conn.session = session
        session.conn = conn
        guilds = [g for g in self.sb.guilds if session.owns(g.id)]
        session.push("READY", {
            "v": 10, "user": self.sb.bot_user.to_json(), "session_id": session.session_id,
            "resume_gateway_url": self.sb.gateway_url, "guilds": [{"id": str(g.id),
                                                                   "unavailable": True} for g in guilds],
            "application": {"id": str(self.sb.application_id), "flags": 0}, "shard": [shard_id, shard_count],
            "private_channels": [], "relationships": [], "presences": [], "guild_join_requests": [],
            "geo_ordered_rtc_regions": [], "user_settings": {}})
        for g in guilds:
            session.announced.add(g.id)
            session.push("GUILD_CREATE", g.to_json())
        conn.start_pump(0)

    async def _resume(self, conn: GatewayConnection, d: dict) -> None:
        session = self.sessions.get(d.get("session_id"))
        if session is None or not session.valid or d.get("token") != self.sb.token:
            await conn.send({"op": 9, "d": False, "s": None, "t": None})
            return
        if session.conn is not None and session.conn is not conn:
            session.conn.stop()
            old = session.conn
            old.server_closed = True
            asyncio.get_running_loop().create_task(old.ws.close(code=4000))
        session.conn = conn
        conn.session = session
        start = min(int(d.get("seq") or 0), len(session.events))
        session.push("RESUMED", {})
        conn.start_pump(start)

    def _members_chunk(self, session: GatewaySession, d: dict) -> None:
        guild = self.sb.guild_by_id(int(d["guild_id"]))
        if guild is None:
            return
        session.push("GUILD_MEMBERS_CHUNK", {
            "guild_id": str(guild.id), "members": [m.to_json() for m in guild.members.values()],
            "chunk_index": 0, "chunk_count": 1, "nonce": d.get("nonce"), "not_found": []})

    # ---- faults ----------------------------------------------------------------------------------------
    def _target_conns(self, shard: Optional[int]) -> list[GatewayConnection]:
        return [c for c in list(self.connections)
                if c.session is not None and (shard is None or c.session.shard_id == shard)]

    async def drop(self, shard: Optional[int] = None, code: int = 4000) -> int:
        """Close the bot's gateway socket(s) with a resumable code; the client RESUMEs."""
        conns = self._target_conns(shard)
        for c in conns:
            c.server_closed = True
            c.stop()
            await c.ws.close(code=code, message=b"sandbox drop")
        return len(conns)

    async def send_op(self, op: int, d: Any, shard: Optional[int] = None) -> int:
        conns = self._target_conns(shard)
        for c in conns:
            if op == 9 and d is False:
                c.session.valid = False
            await c.send({"op": op, "d": d, "s": None, "t": None})
        return len(conns)

    async def close_all(self) -> None:
        for c in list(self.connections):
            c.server_closed = True
            c.stop()
            try:
                await asyncio.wait_for(c.ws.close(code=1001, message=b"sandbox closing"), 2.0)
            except (asyncio.TimeoutError, Exception):  # noqa: BLE001 - closing on the way out
                pass
