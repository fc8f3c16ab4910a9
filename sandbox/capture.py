"""Per-guild recorder of the bot's audio as a listening client hears it: Opus frames (decoded on read), drops."""
from __future__ import annotations

import asyncio
import collections
import statistics
import time
from dataclasses import dataclass
from typing import Iterator, Optional

from .state import Signal

FRAME_BYTES = 3840          # 20 ms of 48 kHz stereo s16le
FRAME_S = 0.020
OPUS_SILENCE = b"\xf8\xff\xfe"


@dataclass
class Packet:
    at: float                # time.monotonic() of arrival (after any injected delay)
    seq: int
    timestamp: int
    ssrc: int
    opus: bytes              # the Opus frame after transport and DAVE decryption (decode with Capture.pcm)
    silence: bool            # one of the OPUS_SILENCE frames sent at the end of a stream


@dataclass
class SpeakingEvent:
    at: float
    speaking: int
    ssrc: int


class Capture:
    """What a listener in the guild's voice channel would have heard from the bot."""

    def __init__(self, guild_id: int) -> None:
        self.guild_id = guild_id
        self.packets: list[Packet] = []
        self.speaking: list[SpeakingEvent] = []
        self.decrypt_errors = 0            # transport decryption failed
        self.dropped = 0                   # frames the listening client dropped (not E2EE, or no key for them)
        self.dropped_total = 0             # the same since the sandbox started (clear() keeps it)
        self.drop_reasons: collections.Counter = collections.Counter()
        self.unheard = 0                   # E2EE frames sent while nobody else was in the channel
        self.decode_errors = 0
        self._signal = Signal()

    def _add(self, packet: Packet) -> None:
        self.packets.append(packet)
        self._signal.fire()

    def _drop(self, reason: str) -> None:
        self.dropped += 1
        self.dropped_total += 1
        self.drop_reasons[reason] += 1
        self._signal.fire()

    def _speaking(self, speaking: int, ssrc: int) -> None:
        self.speaking.append(SpeakingEvent(time.monotonic(), speaking, ssrc))
        self._signal.fire()

    def clear(self) -> None:
        self.packets.clear()
        self.speaking.clear()
        self.decrypt_errors = self.dropped = self.unheard = self.decode_errors = 0
        self.drop_reasons.clear()

    def stats(self) -> dict:
        """Frame counts: heard (voiced + silence), dropped by the listener, unheard, transport decrypt errors."""
        return {"heard": len(self.packets), "voiced": len(self.voiced), "dropped": self.dropped,
                "dropped_total": self.dropped_total, "unheard": self.unheard, "decrypt_errors": self.decrypt_errors,
                "drop_reasons": dict(self.drop_reasons)}

    @property
    def voiced(self) -> list[Packet]:
        return [p for p in self.packets if not p.silence]

    @property
    def voiced_seconds(self) -> float:
        return len(self.voiced) * FRAME_S

    @property
    def first_packet_at(self) -> Optional[float]:
        """Arrival time (time.monotonic) of the first voiced packet, or None."""
        for p in self.packets:
            if not p.silence:
                return p.at
        return None

    @property
    def last_packet_at(self) -> Optional[float]:
        return self.packets[-1].at if self.packets else None

    @property
    def ssrcs(self) -> set[int]:
        return {p.ssrc for p in self.packets}

    def decoded(self, packets: Optional[list[Packet]] = None) -> Iterator[tuple[Packet, bytes]]:
        """(packet, 3840-byte PCM) in arrival order, decoded now with one Opus decoder per SSRC (real libopus)."""
        from discord.opus import Decoder
        decoders: dict[int, Decoder] = {}
        for p in self.packets if packets is None else packets:
            dec = decoders.get(p.ssrc) or decoders.setdefault(p.ssrc, Decoder())
            try:
                pcm = dec.decode(p.opus, fec=False)
            except Exception:  # noqa: BLE001 - a frame the sandbox cannot decode is counted, as a client would drop it
                self.decode_errors += 1
                pcm = bytes(FRAME_BYTES)
            yield p, pcm

    def pcm(self) -> bytes:
        """Concatenated 48 kHz stereo s16le of the voiced frames, in arrival order."""
        return b"".join(pcm for p, pcm in self.decoded() if not p.silence)

    def inter_arrival(self) -> dict:
        """Jitter: percentiles (ms) of (gap between consecutive voiced packets − 20 ms), within talk spurts."""
        gaps: list[float] = []
        prev: Optional[Packet] = None
        for p in self.packets:
            if p.silence:
                prev = None
                continue
            if prev is not None:
                gaps.append((p.at - prev.at - FRAME_S) * 1000.0)
            prev = p
        if not gaps:
            return {"count": 0, "p50": 0.0, "p95": 0.0, "p99": 0.0, "max": 0.0}
        gaps.sort()

        def pct(q: float) -> float:
            return gaps[min(len(gaps) - 1, int(round(q * (len(gaps) - 1))))]
        return {"count": len(gaps), "p50": pct(0.50), "p95": pct(0.95), "p99": pct(0.99), "max": gaps[-1],
                "mean": statistics.fmean(gaps)}

    async def wait_for_audio(self, seconds: float = FRAME_S, timeout: float = 10.0) -> None:
        """Wait until at least ``seconds`` of voiced audio has arrived."""
        await self._signal.wait_for(lambda: self.voiced_seconds + 1e-9 >= seconds, timeout,
                                    f"{seconds:.2f}s of audio in guild {self.guild_id}")

    async def wait_until_silent(self, quiet_s: float = 0.3, timeout: float = 10.0) -> None:
        """Wait until some audio has arrived and then no voiced packet for ``quiet_s``."""
        loop_deadline = time.monotonic() + timeout
        while True:
            voiced = self.voiced
            if voiced and time.monotonic() - voiced[-1].at >= quiet_s:
                return
            if time.monotonic() >= loop_deadline:
                raise asyncio.TimeoutError(f"audio in guild {self.guild_id} did not go quiet within {timeout}s")
            await asyncio.sleep(min(0.05, quiet_s / 4))

    async def wait_for_speaking(self, speaking: int = 1, timeout: float = 10.0) -> SpeakingEvent:
        return await self._signal.wait_for(
            lambda: next((e for e in self.speaking if e.speaking == speaking), None), timeout,
            f"SPEAKING {speaking} in guild {self.guild_id}")
