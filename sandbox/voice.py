"""Voice gateway (v8 over TLS, DAVE ops 21-31), UDP IP discovery and the RTP receiver that hears like a client."""
from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import socket
import struct
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

import nacl.secret
from aiohttp import WSMsgType, web

from . import dave
from .capture import OPUS_SILENCE, Capture, Packet

if TYPE_CHECKING:
    from .world import World

DEFAULT_MODES = ["aead_aes256_gcm_rtpsize", "aead_xchacha20_poly1305_rtpsize"]
DAVE_MAGIC = b"\xfa\xfa"              # the last two bytes of every DAVE-encrypted frame
UDP_RECEIVE_BUFFER = 4 << 20  # bytes asked for the voice socket's receive buffer
SPEAKING, CLIENTS_CONNECT, CLIENT_DISCONNECT = 5, 11, 13     # server -> client: who is in the call, who talks


@dataclass
class VoiceOp:
    at: float
    direction: str
    guild_id: Optional[int]
    op: int
    d: Any


class VoiceSession:
    """The bot's voice connection in one guild, as the voice server sees it."""

    local = False           # a DAVE participant reached over its websocket

    def __init__(self, server: "VoiceServer", guild_id: int, token: str, ssrc: int) -> None:
        self.server = server
        self.guild_id = guild_id
        self.user_id = server.sb.bot_user.id
        self.token = token
        self.ssrc = ssrc
        self.session_id: Optional[str] = None
        self.secret_key = secrets.token_bytes(32)
        self.mode: Optional[str] = None
        self.client_addr: Optional[tuple] = None
        self.ws: Optional[web.WebSocketResponse] = None
        self.described = False      # SESSION_DESCRIPTION sent on the current socket
        self.seq = 0
        self.seq_ack: Optional[int] = None        # the last seq_ack the client sent (heartbeat or resume)
        self.dave_version = 0                     # negotiated in SESSION_DESCRIPTION
        self.dave_channel: Optional[int] = None   # the voice channel whose MLS group this connection is in
        self.nonce = 0                            # the transport nonce of packets relayed to this client
        self._lock = asyncio.Lock()

    async def send(self, server: "VoiceServer", op: int, d: Any) -> None:
        async with self._lock:
            if self.ws is None or self.ws.closed:
                return
            self.seq += 1
            frame = {"op": op, "d": d, "seq": self.seq}
            server.log.append(VoiceOp(time.monotonic(), "out", self.guild_id, op, d))
            with contextlib.suppress(ConnectionResetError):  # the client went away mid-send: as if closed
                await self.ws.send_str(json.dumps(frame))

    async def send_binary(self, op: int, payload: bytes) -> None:
        """A server binary frame: [seq u16 BE][op u8][payload], numbered with the JSON frames."""
        async with self._lock:
            if self.ws is None or self.ws.closed:
                return
            self.seq += 1
            self.server.log.append(VoiceOp(time.monotonic(), "out", self.guild_id, op, f"binary {len(payload)} B"))
            with contextlib.suppress(ConnectionResetError):
                await self.ws.send_bytes(struct.pack(">HB", self.seq & 0xFFFF, op) + payload)

    async def dave_json(self, op: int, d: Any) -> None:
        await self.send(self.server, op, d)

    async def dave_binary(self, op: int, payload: bytes) -> None:
        await self.send_binary(op, payload)

    def encrypt(self, header: bytes, payload: bytes) -> bytes:
        """Transport encryption of a packet the server relays to this client, in the mode discord.py 2.7.1 picks
        (aead_xchacha20_poly1305_rtpsize): the header and any extension preamble are the AAD, a 32-bit nonce
        counter follows the ciphertext."""
        if self.mode != "aead_xchacha20_poly1305_rtpsize":
            raise ValueError(f"the sandbox sends in aead_xchacha20_poly1305_rtpsize only, not {self.mode!r}")
        self.nonce = (self.nonce + 1) & 0xFFFFFFFF
        counter = struct.pack(">I", self.nonce)
        return header + nacl.secret.Aead(self.secret_key).encrypt(payload, header, counter + b"\0" * 20).ciphertext \
            + counter

    def decrypt(self, packet: bytes) -> bytes:
        """Transport decryption for the modes discord.py 2.7.1 can pick; returns the Opus payload."""
        cc = packet[0] & 0x0F
        has_ext = bool(packet[0] & 0x10)
        hdr_len = 12 + 4 * cc
        key = self.secret_key
        mode = self.mode
        if mode == "aead_xchacha20_poly1305_rtpsize":
            aad_len = hdr_len + (4 if has_ext else 0)
            plain = nacl.secret.Aead(key).decrypt(packet[aad_len:-4], packet[:aad_len], packet[-4:] + b"\0" * 20)
        elif mode == "xsalsa20_poly1305_lite":
            plain = nacl.secret.SecretBox(key).decrypt(packet[hdr_len:-4], packet[-4:] + b"\0" * 20)
            aad_len = hdr_len
        elif mode == "xsalsa20_poly1305_suffix":
            plain = nacl.secret.SecretBox(key).decrypt(packet[hdr_len:-24], packet[-24:])
            aad_len = hdr_len
        elif mode == "xsalsa20_poly1305":
            plain = nacl.secret.SecretBox(key).decrypt(packet[hdr_len:], packet[:12] + b"\0" * 12)
            aad_len = hdr_len
        else:
            raise ValueError(f"unsupported mode {mode!r}")
        if has_ext:
            if aad_len > hdr_len:     # rtpsize: the preamble is in the clear, the extension body encrypted
                ext_words = struct.unpack_from(">H", packet, hdr_len + 2)[0]
            else:
                ext_words = struct.unpack_from(">H", plain, 2)[0]
                plain = plain[4:]
            plain = plain[4 * ext_words:]
        return plain


class VoiceServer:
    """The voice websocket endpoint plus the UDP media socket, shared by all guilds."""

    def __init__(self, sb: "World", modes: Optional[list] = None, dave_required: bool = True) -> None:
        self.sb = sb
        self.modes = list(modes or DEFAULT_MODES)
        self.dave_required = dave_required      # False: the pre-2026 non-E2EE voice (dave_protocol_version 0)
        self.dave = dave.DaveServer()
        self.dave.on_change = sb._signal.fire
        self.refused_no_dave = 0                # IDENTIFYs closed with 4017
        self.sessions: dict[int, VoiceSession] = {}       # guild id -> session
        self.by_ssrc: dict[int, VoiceSession] = {}
        self.member_ssrcs: dict[int, int] = {}            # user id -> the SSRC it speaks with
        self.captures: dict[int, Capture] = {}
        self.log: list[VoiceOp] = []
        self.udp: Optional[asyncio.DatagramTransport] = None
        self.udp_port = 0
        self._next_ssrc = 1000
        self._pending: set[asyncio.TimerHandle] = set()
        self._tasks: set[asyncio.Task] = set()

    def capture(self, guild_id: int) -> Capture:
        if guild_id not in self.captures:
            self.captures[guild_id] = Capture(guild_id)
        return self.captures[guild_id]

    def new_session(self, guild_id: int) -> VoiceSession:
        """A fresh voice server token for a bot join (sent in VOICE_SERVER_UPDATE)."""
        old = self.sessions.get(guild_id)
        if old is not None:
            self.by_ssrc.pop(old.ssrc, None)
        self._next_ssrc += 1
        vs = VoiceSession(self, guild_id, secrets.token_hex(8), self._next_ssrc)
        self.sessions[guild_id] = vs
        self.by_ssrc[vs.ssrc] = vs
        return vs

    def ssrc_of(self, user_id: int) -> int:
        """The audio SSRC of a member other than the bot (one per member, as Discord assigns it)."""
        if user_id not in self.member_ssrcs:
            self._next_ssrc += 1
            self.member_ssrcs[user_id] = self._next_ssrc
        return self.member_ssrcs[user_id]

    def end_session(self, guild_id: int) -> None:
        vs = self.sessions.pop(guild_id, None)
        if vs is not None:
            self.by_ssrc.pop(vs.ssrc, None)
            self._leave_group(vs)

    def _leave_group(self, vs: VoiceSession) -> None:
        if vs.dave_channel is not None:
            self.dave.member_left(vs.user_id, vs.dave_channel)
            vs.dave_channel = None

    def connected(self, guild_id: int) -> bool:
        vs = self.sessions.get(guild_id)
        return bool(vs and vs.described and vs.ws is not None and not vs.ws.closed)

    # ---- websocket -------------------------------------------------------------------------------------
    async def handle(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(heartbeat=None, timeout=2.0)
        await ws.prepare(request)
        vs: Optional[VoiceSession] = None
        try:
            async for msg in ws:
                if msg.type == WSMsgType.BINARY and msg.data:
                    self.log.append(VoiceOp(time.monotonic(), "in", vs and vs.guild_id, msg.data[0],
                                            f"binary {len(msg.data) - 1} B"))
                    if vs is not None:
                        self._dave_binary(vs, msg.data[0], bytes(msg.data[1:]))
                    continue
                if msg.type != WSMsgType.TEXT:
                    continue
                frame = json.loads(msg.data)
                op, d = frame.get("op"), frame.get("d")
                self.log.append(VoiceOp(time.monotonic(), "in", vs and vs.guild_id, op, d))
                if op in (0, 7):
                    vs = await self._identify_or_resume(ws, op, d)
                    if vs is None:
                        break
                elif vs is None:
                    await ws.close(code=4003, message=b"Not authenticated.")
                    break
                elif op == 3:
                    if isinstance(d, dict) and "seq_ack" in d:
                        vs.seq_ack = d["seq_ack"]
                    await vs.send(self, 6, {"t": (d or {}).get("t") if isinstance(d, dict) else d})
                elif op == 1:
                    data = d["data"]
                    vs.client_addr = (data.get("address"), data.get("port"))
                    vs.mode = data.get("mode")
                    if vs.mode not in self.modes:
                        await ws.close(code=4016, message=b"Unknown encryption mode.")
                        break
                    await self._describe(vs)
                elif op == 5:
                    self.capture(vs.guild_id)._speaking(int(d.get("speaking", 0)), int(d.get("ssrc", vs.ssrc)))
                elif op in (dave.TRANSITION_READY, dave.INVALID_COMMIT_WELCOME) and vs.dave_channel is not None:
                    group = self.dave.group(vs.dave_channel)
                    tid = int((d or {}).get("transition_id", 0))
                    handler = group.transition_ready if op == dave.TRANSITION_READY else group.invalid_commit
                    self.dave.spawn(handler(vs.user_id, tid))
        finally:
            if vs is not None and vs.ws is ws:
                vs.described = False
            self.sb._signal.fire()
        return ws

    async def _identify_or_resume(self, ws: web.WebSocketResponse, op: int, d: dict) -> Optional[VoiceSession]:
        gid = int(d.get("server_id", 0))
        vs = self.sessions.get(gid)
        if vs is None or d.get("token") != vs.token or (vs.session_id and d.get("session_id") != vs.session_id):
            await ws.close(code=4006 if op == 7 else 4004, message=b"Session is no longer valid.")
            return None
        if op == 0 and self.dave_required and int(d.get("max_dave_protocol_version") or 0) < dave.DAVE_VERSION:
            self.refused_no_dave += 1
            await ws.close(code=4017, message=b"E2EE/DAVE protocol required")      # as Discord since 2026-03-01
            self.sb._signal.fire()
            return None
        old = vs.ws
        vs.ws = ws
        vs.described = False
        if old is not None and old is not ws and not old.closed:
            asyncio.get_running_loop().create_task(old.close(code=4014))
        if op == 0:
            vs.session_id = d.get("session_id")
            await vs.send(self, 8, {"heartbeat_interval": 13750})
            await vs.send(self, 2, {"ssrc": vs.ssrc, "ip": "127.0.0.1", "port": self.udp_port,
                                    "modes": self.modes, "experiments": []})
        else:
            vs.seq_ack = d.get("seq_ack")
            await vs.send(self, 8, {"heartbeat_interval": 13750})
            await vs.send(self, 9, None)
            if vs.mode:                 # 2.7.1 waits for secret_key on the resumed socket
                await self._describe(vs)
        return vs

    async def _describe(self, vs: VoiceSession) -> None:
        vs.dave_version = dave.DAVE_VERSION if self.dave_required else 0
        await vs.send(self, 4, {"mode": vs.mode, "secret_key": list(vs.secret_key),
                                "dave_protocol_version": vs.dave_version, "audio_codec": "opus", "video_codec": None,
                                "media_session_id": secrets.token_hex(8)})
        vs.described = True
        self._greet(vs)
        if vs.dave_version:
            self._join_group(vs)
        self.sb._signal.fire()

    def _bot_channel(self, vs: VoiceSession):
        guild = self.sb.guild_by_id(vs.guild_id)
        return (guild, self.sb.bot_voice_channel(guild)) if guild is not None else (None, None)

    def _greet(self, vs: VoiceSession) -> None:
        """CLIENTS_CONNECT (op 11) with the members already in the bot's channel, as Discord sends it on connect."""
        guild, channel = self._bot_channel(vs)
        users = [str(uid) for uid, state in guild.voice_states.items()
                 if state["channel"] is channel and uid != vs.user_id] if channel is not None else []
        if users:
            self._later(vs.send(self, CLIENTS_CONNECT, {"user_ids": users}))

    def member_moved(self, guild_id: int, user_id: int, before: Optional[int], after: Optional[int]) -> None:
        """A member (not the bot) joined or left a channel: the bot's connection there is told (op 11 or 13)."""
        vs = self.sessions.get(guild_id)
        if vs is None or not vs.described or user_id == vs.user_id:
            return
        _, channel = self._bot_channel(vs)
        if channel is None or before == after:
            return
        if after == channel.id:
            self._later(vs.send(self, CLIENTS_CONNECT, {"user_ids": [str(user_id)]}))
        elif before == channel.id:
            self._later(vs.send(self, CLIENT_DISCONNECT, {"user_id": str(user_id)}))

    def _later(self, coro) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _join_group(self, vs: VoiceSession) -> None:
        """After SESSION_DESCRIPTION the client (re)starts its DAVE session: op 25, then it sends a key package."""
        _, channel = self._bot_channel(vs)
        if channel is None:
            return
        if vs.dave_channel is not None and vs.dave_channel != channel.id:
            self._leave_group(vs)                  # moved: leave the old channel's group
        vs.dave_channel = channel.id
        self.dave.spawn(self.dave.group(channel.id).join(vs))

    def _dave_binary(self, vs: VoiceSession, op: int, payload: bytes) -> None:
        if vs.dave_channel is None:
            return
        group = self.dave.group(vs.dave_channel)
        if op == dave.KEY_PACKAGE:
            self.dave.spawn(group.key_package(vs.user_id, payload))
        elif op == dave.COMMIT_WELCOME:
            self.dave.spawn(group.commit(vs.user_id, payload))

    async def close_ws(self, guild_id: int, code: int = 4015) -> bool:
        vs = self.sessions.get(guild_id)
        if vs is None or vs.ws is None or vs.ws.closed:
            return False
        vs.described = False
        await vs.ws.close(code=code, message=b"sandbox close")
        return True

    # ---- UDP -------------------------------------------------------------------------------------------
    async def start_udp(self) -> None:
        loop = asyncio.get_running_loop()
        self.udp, _ = await loop.create_datagram_endpoint(lambda: _UdpProtocol(self), local_addr=("127.0.0.1", 0))
        # one socket takes every guild's voice: the default buffer (~200 KB) holds under 0.1 s of 50 streams, so a
        # pause of this process's loop would drop packets Discord would have had; the kernel caps it at rmem_max
        self.udp.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, UDP_RECEIVE_BUFFER)
        self.udp_port = self.udp.get_extra_info("sockname")[1]

    def datagram(self, data: bytes, addr: tuple) -> None:
        if len(data) == 74 and data[:2] == b"\x00\x01":
            ip = addr[0].encode()
            reply = struct.pack(">HHI", 2, 70, struct.unpack_from(">I", data, 4)[0]) + ip.ljust(64, b"\0")
            self.udp.sendto(reply + struct.pack(">H", addr[1]), addr)
            return
        faults = self.sb.faults
        if faults.udp_should_drop():
            return
        if faults.udp_delay_s > 0:
            handle = asyncio.get_running_loop().call_later(faults.udp_delay_s, self._rtp_later, data)
            self._pending.add(handle)
            return
        self._rtp(data, time.monotonic())

    def _rtp_later(self, data: bytes) -> None:
        self._pending = {h for h in self._pending if not h.cancelled() and h.when() > asyncio.get_running_loop().time()}
        self._rtp(data, time.monotonic())

    def _rtp(self, data: bytes, at: float) -> None:
        if len(data) < 12:
            return
        seq, ts, ssrc = struct.unpack_from(">HII", data, 2)
        vs = self.by_ssrc.get(ssrc)
        if vs is None or vs.mode is None:
            return
        cap = self.capture(vs.guild_id)
        try:
            payload = vs.decrypt(data)
        except Exception:  # noqa: BLE001 - a packet that does not decrypt is counted as dropped
            cap.decrypt_errors += 1
            return
        opus = self._hear(vs, cap, payload)
        if opus is not None:
            cap._add(Packet(at, seq, ts, ssrc, opus, opus == OPUS_SILENCE))

    def _hear(self, vs: VoiceSession, cap: Capture, payload: bytes) -> Optional[bytes]:
        """The Opus frame as a listening client gets it: DAVE-decrypted by a simulated human's own davey session.
        None when that client would drop it (not E2EE while the group is active, no key yet, wrong key)."""
        if not vs.dave_version:
            return payload                              # the legacy non-E2EE call
        group = self.dave.groups.get(vs.dave_channel) if vs.dave_channel is not None else None
        listener = group.listener(vs.user_id) if group is not None else None
        if listener is None:                            # nobody else in the channel: nothing can be dropped,
            if payload.endswith(DAVE_MAGIC):            # and nobody holds the keys to E2EE frames
                cap.unheard += 1
                return None
            return payload
        try:
            return listener.decrypt(vs.user_id, payload)
        except Exception as exc:  # noqa: BLE001 - a packet that does not decrypt is counted as dropped
            cap._drop(str(exc))
            return None

    def close(self) -> None:
        for h in self._pending:
            h.cancel()
        for task in self._tasks:
            task.cancel()
        self._pending.clear()
        if self.udp is not None:
            self.udp.close()


class _UdpProtocol(asyncio.DatagramProtocol):
    def __init__(self, server: VoiceServer) -> None:
        self.server = server

    def datagram_received(self, data: bytes, addr: tuple) -> None:
        self.server.datagram(data, addr)
