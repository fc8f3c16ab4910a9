"""Lookahead: one guild's synthesis ahead of playback (what plays now and the next queued utterances), each in its
priority's slots, at the catch-up speed; what the queue finds stale (SpeechQueue.drop_stale) is never started."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import replace

from bot.speech.playback.source import StreamingSource
from bot.speech.queue.pacing import Pacer, catch_up_speed
from bot.speech.queue.queue_policy import SpeechQueue
from bot.speech.queue.utterance import Request, Stage, Utterance
from engine.base import AudioChunk, Engine


class Lookahead:
    """Starts the synthesis of a guild's utterances before their turn, at most `depth` queued ones ahead."""

    def __init__(self, guild_id: int, engine: Engine, queue: SpeechQueue, pacer: Pacer, *,
                 rate: Callable[[Request | None], float], stale: Callable[[Utterance], None], depth: int = 1,
                 per_guild: int = 1, buffer_frames: int = 1500, catch_up: float = 1.0) -> None:
        self.guild_id = guild_id
        self.engine = engine
        self.queue = queue
        self.pacer = pacer
        self.rate = rate  # this guild's share of the engine for a request, now
        self.stale = stale  # told of a queued utterance that left the queue because it could not start in time
        self.depth = depth
        self.buffer_frames = buffer_frames
        self.catch_up = catch_up  # the most speech is sped up while the channel is behind
        self._slots = asyncio.Semaphore(max(1, per_guild))
        # asked-for speech has its own: it must not wait for queued readout synthesized at readout's priority
        self._urgent_slots = asyncio.Semaphore(max(1, per_guild))

    def start(self) -> None:
        """Start synthesis for the current utterance and the next `depth` queued ones; a queued one that can no
        longer start by its start_by leaves the queue first (the queue decides; nothing is synthesized for it)."""
        for utt in self.queue.drop_stale(self.pacer, self.rate(None)):
            self.stale(utt)
        current = self.queue.current
        ahead = [current] if current is not None else []
        ahead += self.queue.first(self.depth)
        for utt in ahead:
            if utt.source is None:
                utt.speed_factor = self._catch_up_factor(utt)
                utt.source = StreamingSource(self.buffer_frames)
                utt.source.start(self._synthesize(utt))

    def _catch_up_factor(self, utt: Utterance) -> float:
        """How much faster `utt` is made: more the more other speech waits in this channel (the rest of what plays
        now and the queue). A preview is heard as the voice really sounds."""
        if self.catch_up <= 1.0 or utt.request.kind == "preview":
            return 1.0
        others = [u for u in (self.queue.current, *self.queue) if u is not None and u is not utt]
        backlog = sum(self.pacer.length(p) - p.played_s for p in (u.progress() for u in others))
        return catch_up_speed(backlog, self.catch_up)

    async def _synthesize(self, utt: Utterance) -> AsyncIterator[AudioChunk]:
        async with self._urgent_slots if utt.request.urgent else self._slots:
            if utt.stage is Stage.QUEUED:  # (not one that ended, or whose turn came, meanwhile)
                utt.enter(Stage.SYNTHESIZING)
            utt.synth_started = time.monotonic()
            voice = utt.request.voice
            if utt.speed_factor != 1.0:
                voice = replace(voice, speed=utt.speed)
            heard = utt.source.heard_s if utt.source is not None else None
            stream = utt.stream = self.engine.stream(utt.request.text, voice, key=self.guild_id,
                                                     urgent=utt.request.urgent, heard=heard)
            try:
                async for chunk in stream:
                    yield chunk
            finally:
                utt.synth_seconds = time.monotonic() - utt.synth_started
                await stream.aclose()
