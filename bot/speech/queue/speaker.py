"""GuildSpeaker: one guild's SpeechQueue, synthesized ahead by its Lookahead (lookahead.py) and played in turn by its
Player (playback/player.py) on its voice connection; the value types are utterance.py's."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from bot.aio import cancel_and_wait
from bot.speech.connection.voice_connection import VoiceConnection
from bot.speech.playback.driver import VoiceDriver
from bot.speech.playback.player import Player
from bot.speech.queue.lookahead import Lookahead
from bot.speech.queue.pacing import Pacer
from bot.speech.queue.queue_policy import SpeechQueue
from bot.speech.queue.utterance import Outcome, Request, Utterance, finish
from engine.base import FRAME_BYTES, Capacity, Engine

log = logging.getLogger(__name__)


class GuildSpeaker:
    """Plays one guild's utterances in order on its voice connection."""

    def __init__(
        self,
        guild_id: int,
        engine: Engine,
        connection: VoiceConnection,
        *,
        queue_max: int = 20,
        per_guild: int = 1,
        lookahead: int = 1,
        buffer_frames: int = 1500,
        idle_leave_s: float = 0.0,
        pacer: Pacer | None = None,
        e2ee_wait_s: float = 10.0,
        on_utterance: Callable[[Utterance, Outcome], None] | None = None,
        driver: VoiceDriver | None = None,
        catch_up: float = 1.0,
    ) -> None:
        self.guild_id = guild_id
        self.engine = engine
        self.connection = connection
        self.idle_leave_s = idle_leave_s
        self.pacer = pacer or Pacer()
        self.on_utterance = on_utterance
        self.driver = driver or VoiceDriver()  # the process's one sender (SpeechService owns it)
        self.player = Player(guild_id, connection, self.driver, self.pacer, capacity=self.capacity,
                             load_changed=engine.capacity_changed, e2ee_wait_s=e2ee_wait_s)
        self._queue = SpeechQueue(queue_max)
        self.ahead = Lookahead(guild_id, engine, self._queue, self.pacer, rate=self.rate, stale=self._stale,
                               depth=lookahead, per_guild=per_guild, buffer_frames=buffer_frames, catch_up=catch_up)
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._closed = False

    # -- public API ----------------------------------------------------------------------------
    def enqueue(self, request: Request, *, limit: int | None = None, max_delay: float = float("inf")) -> Utterance:
        """Queue a request (SpeechQueue.admit: its expected wait, Late past `max_delay`, QueueFull at the bound) and
        start its synthesis; what plays now gives way to it when the queue says so."""
        utt, gives_way = self._queue.admit(request, self.pacer, self.rate(request), limit=limit, max_delay=max_delay)
        if gives_way and self.player.track is not None:
            self.player.track.give_way()  # pauses at its next sentence for this asked-for speech
        self._ensure_running()
        self.ahead.start()
        self._wakeup.set()
        return utt

    @property
    def current(self) -> Utterance | None:
        """What plays now."""
        return self._queue.current

    def pending(self) -> list[Utterance]:
        return list(self._queue)

    def capacity(self, request: Request | None = None) -> Capacity:
        """The engine's load as this guild sees it now for `request`."""
        return self.engine.capacity(self.guild_id, urgent=request is not None and request.urgent)

    def rate(self, request: Request | None = None) -> float:
        """Audio seconds per second of synthesis this guild gets now for `request` (its share of the engine)."""
        return self.capacity(request).share()  # 0: not measured yet

    def position(self, utt: Utterance) -> int:
        """0 while playing, 1.. while waiting, -1 when gone."""
        return self._queue.position(utt)

    def skip(self) -> bool:
        """Stop the current utterance at once and cancel its synthesis."""
        utt = self.current
        if utt is None:
            return False
        utt.skipped = True
        if not self.player.stop_track() and utt.source is not None:  # between its turn's handle and its end
            utt.source.close()
        return True

    def stop(self) -> int:
        """Clear the queue and skip the current utterance; returns how many were removed."""
        removed = 0
        while self._queue:
            self._drop(self._queue.pop())
            removed += 1
        self.skip()
        return removed

    def remove_message(self, message_id: int) -> bool:
        """Take a queued (not yet playing) utterance of this message out of the queue."""
        for utt in list(self._queue):
            if utt.request.message_id == message_id:
                self._queue.remove(utt)
                self._drop(utt)
                return True
        return False

    async def close(self) -> None:
        self._closed = True
        self.stop()
        self._wakeup.set()
        await cancel_and_wait(self._task)

    @property
    def underruns(self) -> int:
        return self.player.underruns

    @property
    def idle(self) -> bool:
        return self.current is None and not self._queue

    # -- internals -----------------------------------------------------------------------------
    def _drop(self, utt: Utterance) -> None:
        if utt.source is not None:
            utt.source.close()
        finish(utt, Outcome.REMOVED)
        self._report(utt, Outcome.REMOVED)

    def _stale(self, utt: Utterance) -> None:
        finish(utt, Outcome.STALE)
        self._report(utt, Outcome.STALE)

    def _report(self, utt: Utterance, outcome: Outcome) -> None:
        if self.on_utterance is not None:
            try:
                self.on_utterance(utt, outcome)
            except Exception:
                log.exception("utterance hook failed")

    def _ensure_running(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name=f"speaker-{self.guild_id}")
            self._task.add_done_callback(self._task_ended)

    def _task_ended(self, task: asyncio.Task[None]) -> None:
        """The speaker task must not die unseen: its failure is logged with the request it was on."""
        if task.cancelled() or task.exception() is None:
            return
        exc = task.exception()
        assert exc is not None
        current = self.current.request.request_id if self.current is not None else "-"
        log.error("guild %s: the speaker stopped on request %s", self.guild_id, current,
                  exc_info=(type(exc), exc, exc.__traceback__))

    async def _next(self) -> Utterance | None:
        idle_since = time.monotonic()
        while not self._queue and not self._closed:
            self._wakeup.clear()
            timeout = None
            if self.idle_leave_s > 0 and self.connection.is_connected():
                timeout = max(0.0, self.idle_leave_s - (time.monotonic() - idle_since))
            try:
                await asyncio.wait_for(self._wakeup.wait(), timeout)
            except asyncio.TimeoutError:
                log.info("guild %s: idle for %.0f s, leaving voice", self.guild_id, self.idle_leave_s)
                await self.connection.leave()
        utt, stale = self._queue.next_due()
        for late in stale:
            if late.source is not None:  # synthesized ahead, but its turn came too late all the same
                late.source.close()
            self._stale(late)
        return utt

    async def _run(self) -> None:
        while not self._closed:
            utt = await self._next()
            if utt is None:
                continue
            self._queue.current = utt
            try:
                self.ahead.start()
                outcome = await self.player.play(utt)
            except asyncio.CancelledError:
                finish(utt, Outcome.REMOVED)
                raise
            except Exception:
                log.exception("guild %s: playback of request %s failed", self.guild_id, utt.request.request_id)
                outcome = await self.player.fail(utt, "Something went wrong while playing that. Please try again.")
            finally:
                self._queue.current = None
            self._queue.played(utt, gave_way=outcome is None)
            if outcome is None:  # gave way: its rest is queued again
                continue
            finish(utt, outcome)
            self._report(utt, outcome)


def frames_of(seconds: float) -> int:
    """How many 20 ms frames hold `seconds` of audio."""
    return max(1, int(seconds * 48_000 * 4 / FRAME_BYTES))
