"""Voice gateway (v8 over TLS), UDP IP discovery and the RTP receiver that decrypts, decodes and records."""
from __future__ import annotations

import asyncio
import json
import secrets
import struct
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

import nacl.secret
from aiohttp import WSMsgType, web

from .capture import OPUS_SILENCE, Capture, Packet

if TYPE_CHECKING:
    from .core import Sandbox

DEFAULT_MODES = ["aead_aes256_gcm_rtpsize", "aead_xchacha20_poly1305_rtpsize"]


@dataclass
class VoiceOp:
    at: float
    direction: str
    guild_id: Optional[int]
    op: int
    d: Any


class VoiceSession:
    """The bot's voice connection in one guild, as the voice server sees it."""

    def __init__(self, guild_id: int, token: str, ssrc: int) -> None:
        self.guild_id = guild_id
        self.token = token
        self.ssrc = ssrc
        self.session_id: Optional[str] = None
        self.secret_key = secrets.token_bytes(32)
        self.mode: Optional[str] = None
        self.client_addr: Optional[tuple] = None
        self.ws: Optional[web.WebSocketResponse] = None
        self.described = False      # SESSION_DESCRIPTION sent on the current socket
        self.seq = 0
        self.decoder = None
        self._lock = asyncio.Lock()

    async def send(self, server: "VoiceServer", op: int, d: Any) -> None:
        async with self._lock:
            if self.ws is None or self.ws.closed:
                return
            self.seq += 1
            frame = {"op": op, "d": d, "seq": self.seq}
            server.log.append(VoiceOp(time.monotonic(), "out", self.guild_id, op, d))
            await self.ws.send_str(json.dumps(frame))

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

    def __init__(self, sb: "Sandbox", modes: Optional[list] = None) -> None:
        self.sb = sb
        self.modes = list(modes or DEFAULT_MODES)
        self.sessions: dict[int, VoiceSession] = {}       # guild id -> session
        self.by_ssrc: dict[int, VoiceSession] = {}
        self.captures: dict[int, Capture] = {}
        self.log: list[VoiceOp] = []
        self.udp: Optional[asyncio.DatagramTransport] = None
        self.udp_port = 0
        self._next_ssrc = 1000
        self._pending: set[asyncio.TimerHandle] = set()

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
        vs = VoiceSession(guild_id, secrets.token_hex(8), self._next_ssrc)
        self.sessions[guild_id] = vs
        self.by_ssrc[vs.ssrc] = vs
        return vs

    def end_session(self, guild_id: int) -> None:
        vs = self.sessions.pop(guild_id, None)
        if vs is not None:
            self.by_ssrc.pop(vs.ssrc, None)

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
                if msg.type != WSMsgType.TEXT:
                    self.log.append(VoiceOp(time.monotonic(), "in", vs and vs.guild_id, -1, "binary"))
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
            await vs.send(self, 8, {"heartbeat_interval": 13750})
            await vs.send(self, 9, None)
            if vs.mode:                 # 2.7.1 waits for secret_key on the resumed socket
                await self._describe(vs)
        return vs

    async def _describe(self, vs: VoiceSession) -> None:
        await vs.send(self, 4, {"mode": vs.mode, "secret_key": list(vs.secret_key), "dave_protocol_version": 0,
                                "audio_codec": "opus", "video_codec": None, "media_session_id": secrets.token_hex(8)})
        vs.described = True
        self.sb._signal.fire()

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
        except Exception:
            cap.decrypt_errors += 1
            return
        if vs.decoder is None:
            from discord.opus import Decoder
            vs.decoder = Decoder()
        silence = payload == OPUS_SILENCE
        try:
            pcm = vs.decoder.decode(payload, fec=False)
        except Exception:
            cap.decrypt_errors += 1
            return
        cap._add(Packet(at, seq, ts, ssrc, pcm, silence))

    def close(self) -> None:
        for h in self._pending:
            h.cancel()
        self._pending.clear()
        if self.udp is not None:
            self.udp.close()


class _UdpProtocol(asyncio.DatagramProtocol):
    def __init__(self, server: VoiceServer) -> None:
        self.server = server

    def datagram_received(self, data: bytes, addr: tuple) -> None:
        self.server.datagram(data, addr)
