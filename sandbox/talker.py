"""A sandbox member who speaks in the bot's call as a Discord client does: SPEAKING, then its own DAVE-encrypted
Opus frames from a WAV, relayed to the bot as transport-encrypted RTP packets, one every 20 ms."""
from __future__ import annotations

import asyncio
import io
import struct
import time
import wave
from pathlib import Path
from typing import Optional, Union

import numpy as np
from discord.opus import Encoder

from .capture import FRAME_BYTES, FRAME_S, OPUS_SILENCE
from .dave import Human
from .voice import SPEAKING, VoiceServer, VoiceSession

SAMPLES_PER_FRAME = 960
RATE = 48000
PAYLOAD_TYPE = 0x78                 # Opus, as Discord's clients number it
EXTENSION = b"\xbe\xde\x00\x01"     # a one-word header extension (profile 0xBEDE), as Discord's relayed packets carry
END_SILENCE = 5                     # Opus silence frames after speech, as Discord clients send


def wav_frames(wav: Union[str, Path, bytes]) -> list[bytes]:
    """A 16-bit PCM WAV (a path or its bytes; any rate, mono or stereo) as 20 ms frames of 48 kHz stereo s16le,
    the last one padded with silence."""
    with wave.open(io.BytesIO(wav) if isinstance(wav, bytes) else str(wav), "rb") as w:
        if w.getsampwidth() != 2:
            raise ValueError("the sandbox speaks 16-bit PCM WAV only")
        channels, rate = w.getnchannels(), w.getframerate()
        samples = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").reshape(-1, channels).astype(np.float64)
    mono = samples.mean(axis=1)
    if rate != RATE:
        at = np.arange(int(len(mono) * RATE / rate)) * rate / RATE
        mono = np.interp(at, np.arange(len(mono)), mono)
    pcm = np.repeat(np.clip(np.round(mono), -32768, 32767).astype("<i2"), 2).tobytes()
    pcm += bytes(-len(pcm) % FRAME_BYTES)
    return [pcm[i:i + FRAME_BYTES] for i in range(0, len(pcm), FRAME_BYTES)]


class Talk:
    """One member speaking into the bot's call: what it sent and when (``sent_at``: time.monotonic() per packet)."""

    def __init__(self, server: VoiceServer, session: VoiceSession, human: Human, ssrc: int,
                 frames: list[bytes], announce: bool = True) -> None:
        self.server = server
        self.announce = announce    # False: no SPEAKING first (a client whose op 5 was lost), the SSRC unnamed
        self.session = session      # the bot's voice connection: the packets are relayed to it
        self.human = human          # the member's own DAVE client
        self.ssrc = ssrc
        self.frames = frames
        self.sent_at: list[float] = []
        self.encrypted = 0          # frames sent DAVE-encrypted (the others went out before the group was ready)
        self.task: Optional[asyncio.Task] = None

    @property
    def first_at(self) -> Optional[float]:
        return self.sent_at[0] if self.sent_at else None

    @property
    def last_voiced_at(self) -> Optional[float]:
        """When its last frame of speech (before the end-of-speech silence) was sent."""
        voiced = self.sent_at[:len(self.frames)]
        return voiced[-1] if voiced else None

    def start(self) -> "Talk":
        self.task = asyncio.get_running_loop().create_task(self._run())
        return self

    async def wait(self, timeout: Optional[float] = None) -> None:
        """Until every packet, end-of-speech silence included, was sent."""
        assert self.task is not None
        await asyncio.wait_for(asyncio.shield(self.task), timeout)

    def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()

    async def _run(self) -> None:
        encoder = Encoder()
        if self.announce:
            await self.session.send(self.server, SPEAKING, {"user_id": str(self.human.user_id), "ssrc": self.ssrc,
                                                            "speaking": 1})
        start = time.monotonic() + FRAME_S     # a frame is sent once its 20 ms were captured, after SPEAKING
        seq, timestamp = int.from_bytes(self.session.secret_key[:2], "big"), 0
        for n in range(len(self.frames) + END_SILENCE):
            await asyncio.sleep(max(0.0, start + n * FRAME_S - time.monotonic()))
            opus = encoder.encode(self.frames[n], SAMPLES_PER_FRAME) if n < len(self.frames) else OPUS_SILENCE
            self._send(self._packet(opus, (seq + n) & 0xFFFF, (timestamp + n * SAMPLES_PER_FRAME) & 0xFFFFFFFF))

    def _packet(self, opus: bytes, seq: int, timestamp: int) -> bytes:
        """DAVE (the member's davey session, once its group is ready), then RTP and the bot's transport encryption."""
        session = self.human.session
        if session.ready:
            opus = session.encrypt_opus(opus)
            self.encrypted += 1
        header = struct.pack(">BBHII", 0x90, PAYLOAD_TYPE, seq, timestamp, self.ssrc) + EXTENSION
        return self.session.encrypt(header, bytes(4) + opus)     # the extension's body, then the frame

    def _send(self, packet: bytes) -> None:
        if self.server.udp is None or self.session.client_addr is None:
            raise RuntimeError("the bot has no UDP address in this call")
        self.server.udp.sendto(packet, self.session.client_addr)
        self.sent_at.append(time.monotonic())
