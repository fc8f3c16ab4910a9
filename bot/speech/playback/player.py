"""Player: plays one utterance of a guild at a time: waits for its first audio, holds it until the rest keeps ahead
of the listener, waits for the call's E2EE, hands it to the voice driver and says how it ended."""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Awaitable, Callable

from bot.aio import first_of
from bot.speech.connection.voice_connection import VoiceConnection
from bot.speech.playback.driver import End, Track, VoiceDriver
from bot.speech.playback.source import StreamingSource
from bot.speech.playback.track_handle import TrackHandle
from bot.speech.queue.pacing import FRAME_S, Pacer
from bot.speech.queue.utterance import Outcome, Request, Stage, Utterance
from engine.base import Capacity, EngineError

log = logging.getLogger(__name__)
FIRST_AUDIO_TIMEOUT_S = 60.0
E2EE_NOT_READY = ("The voice channel's end-to-end encryption did not get ready within {:.0f} s, so nobody could "
                  "have heard me. Try again, or use /leave and /join.")


class Player:
    """Plays a guild's utterances, one at a time, through its VoiceConnection and the process's voice driver."""

    def __init__(self, guild_id: int, connection: VoiceConnection, driver: VoiceDriver, pacer: Pacer, *,
                 capacity: Callable[[Request], Capacity], load_changed: Callable[[], Awaitable[None]],
                 e2ee_wait_s: float) -> None:
        self.guild_id = guild_id
        self.connection = connection
        self.track: TrackHandle | None = None  # the control of the utterance whose turn it is, from its turn to its end
        self.driver = driver
        self.pacer = pacer  # learns each played utterance's length
        self.capacity = capacity  # the engine's load as this guild sees it for a request, now
        self.load_changed = load_changed  # returns when the engine's load (and so what a stream holds) changes next
        self.e2ee_wait_s = e2ee_wait_s
        self.underruns = 0

    async def fail(self, utt: Utterance, message: str) -> Outcome:
        """`utt` failed: the author is told `message` (when they can be)."""
        utt.error = message
        if utt.request.notify is not None:
            try:
                await utt.request.notify(message)
            except Exception:
                log.warning("guild %s: could not tell the author of %s: %s", self.guild_id,
                            utt.request.request_id, message, exc_info=True)
        return Outcome.FAILED

    def _error_text(self, utt: Utterance, exc: BaseException) -> str:
        if isinstance(exc, EngineError):
            return str(exc)
        log.error("guild %s: synthesis of request %s failed", self.guild_id, utt.request.request_id,
                  exc_info=(type(exc), exc, exc.__traceback__))
        return f"I could not synthesize that (ref {utt.request.request_id}). Please try again."

    @staticmethod
    def _yields(src: StreamingSource) -> bool:
        """Whether an utterance not yet heard steps back for speech it gives way to (one heard goes on to its
        boundary)."""
        return src.giving_way and not src.frames_read

    async def _first_audio(self, utt: Utterance, src: StreamingSource) -> Outcome | None:
        """Wait for `utt`'s first audio (or its end, or a give-way): None; STALE for a readout overdue while other
        guilds wait for the engine (skipping it frees the engine for them; alone, it is read late rather than not at
        all: an engine slower than speech would have every message skipped). TimeoutError past FIRST_AUDIO_TIMEOUT_S."""
        deadline = time.monotonic() + FIRST_AUDIO_TIMEOUT_S
        while not (src.first_frame_ready.is_set() or src.giving_way):
            now = time.monotonic()
            if now >= deadline:
                raise TimeoutError
            if utt.overdue(now):
                if self.capacity(utt.request).other_keys:
                    return Outcome.STALE
                wait = deadline - now  # looked at again when the engine's load changes
            else:
                wait = min(deadline - now, _until_start_by(utt))
            await first_of(src.wait_started(wait), self.load_changed())  # (its TimeoutError ends it, no more)
        return None

    async def _hold(self, utt: Utterance, src: StreamingSource) -> Outcome | None:
        """Hold playback until the engine says the rest of the utterance will keep ahead of the player
        (Stream.hold_s: the audio to have in hand, at this guild's share of the engine now), or all of it is made, or
        the buffer is full: once heard, it never runs dry. None then; STALE for a readout held past its start_by
        while other guilds wait for the engine (what it is held for has no deadline: it would be heard a minute late
        in the over plan; skipping it frees the engine for them). Alone, it is read late rather than not at all (an
        engine slower than speech would have every message skipped)."""
        held = time.monotonic()
        try:
            while not (utt.skipped or src.finished or src.buffered_frames >= src.max_frames - 1 or self._yields(src)):
                need = utt.stream.hold_s() if utt.stream is not None else 0.0
                if src.buffered_frames * FRAME_S >= need:
                    break
                overdue = utt.overdue(time.monotonic())
                if overdue and self.capacity(utt.request).other_keys:
                    return Outcome.STALE
                utt.prerolled = True
                want = src.max_frames if need == float("inf") else math.ceil(need / FRAME_S) + 1
                # looked at again when more audio is made, the engine's load (and so this guild's share) changes, or
                # its start_by passes
                until = None if overdue else _until_start_by(utt)
                await first_of(src.wait_buffered(want, None if until == math.inf else until), self.load_changed())
            return None
        finally:
            utt.held_s = time.monotonic() - held

    async def play(self, utt: Utterance) -> Outcome | None:
        """Play `utt` to its end; None when it gave way at a segment boundary (the rest is still to play). Its
        `track` is the handle meanwhile (stop, give way)."""
        assert utt.source is not None
        handle = self.track = TrackHandle(utt.source)
        try:
            return await self._play(utt, handle)
        finally:
            self.track = None

    def stop_track(self) -> bool:
        """Stop the track whose turn it is; False when there is none."""
        if self.track is None:
            return False
        self.track.stop()
        return True

    async def _play(self, utt: Utterance, handle: TrackHandle) -> Outcome | None:
        src = handle.source
        src.resume()
        try:
            stale = await self._first_audio(utt, src)
        except TimeoutError:
            src.close()
            return await self.fail(utt, "Speech took too long to start; please try again.")
        if stale is not None:
            src.close()
            return stale
        if utt.skipped:
            return Outcome.SKIPPED
        if self._yields(src):  # asked-for speech came before a word of this was made
            return None
        if src.frames_written == 0:
            if src.error is not None and not isinstance(src.error, asyncio.CancelledError):
                return await self.fail(utt, self._error_text(utt, src.error))
            return Outcome.SILENT
        utt.enter(Stage.HELD)
        if (stale := await self._hold(utt, src)) is not None:
            src.close()
            return stale
        if utt.skipped:
            return Outcome.SKIPPED
        if self._yields(src):  # ... or while it was held back to keep ahead of the player
            return None
        if not await self.connection.ensure():
            src.close()
            return await self.fail(utt, "I'm not in a voice channel here. Use /join first.")
        # listeners drop audio sent before the call's E2EE is ready: wait for it (bounded), here and mid-utterance
        utt.enter(Stage.WAITING_E2EE)
        held = time.monotonic()
        if not await self.connection.wait_e2ee(self.e2ee_wait_s):
            src.close()
            log.warning("guild %s: E2EE not ready after %.1f s", self.guild_id, self.e2ee_wait_s)
            return await self.fail(utt, E2EE_NOT_READY.format(self.e2ee_wait_s))
        utt.e2ee_wait_s = time.monotonic() - held
        if utt.skipped:
            return Outcome.SKIPPED
        if self._yields(src):  # asked-for speech came while this was about to start
            return None
        try:
            utt.enter(Stage.PLAYING)
            track = self.driver.play(src, self.connection.sink, hold_limit_s=self.e2ee_wait_s, stats=utt.stats)
        except Exception as exc:  # noqa: BLE001 - the user is told; the speaker goes on
            src.close()
            log.warning("guild %s: could not start playback: %s", self.guild_id, exc)
            return await self.fail(utt, "I could not play in the voice channel right now. Try again.")
        end = await handle.play(track)
        utt.e2ee_wait_s += track.held_s
        if utt.stats.first_read_at is not None:
            utt.ttfa = utt.stats.first_read_at - utt.request.created_at
        return await self._ended(utt, src, track, end)

    async def _ended(self, utt: Utterance, src: StreamingSource, track: Track, end: End) -> Outcome | None:
        """The outcome of a track that stopped; None when it gave way (the rest is still to play)."""
        if end is not End.FINISHED:
            log.info("guild %s: playback of request %s ended: %s after %d of %d frames (held %.1f s)", self.guild_id,
                     utt.request.request_id, end.value, src.frames_read, src.frames_written, track.held_s)
        if end is End.FAILED:  # an Opus or encryption failure in the driver
            src.close()
            err = track.error
            log.error("guild %s: the audio player failed on request %s", self.guild_id, utt.request.request_id,
                      exc_info=(type(err), err, err.__traceback__) if err is not None else None)
            return await self.fail(utt, f"Playback failed (ref {utt.request.request_id}). Please try again.")
        if end is End.GAVE_WAY and not utt.skipped and src.error is None:
            return None
        self.underruns += src.underruns
        if utt.skipped:
            src.close()  # (a track that gave way just as it was skipped keeps its rest buffered: dropped here)
            return Outcome.SKIPPED
        if src.error is not None and not isinstance(src.error, asyncio.CancelledError):
            return await self.fail(utt, self._error_text(utt, src.error))
        if end is End.E2EE_TIMEOUT:
            src.close()
            return await self.fail(utt, E2EE_NOT_READY.format(self.e2ee_wait_s) + " The rest was cut off.")
        # cut off: the connection dropped (or playback was stopped) before every frame written was sent
        if end is not End.FINISHED or not src.finished or src.buffered_frames or src.frames_read < src.frames_written:
            src.close()
            return await self.fail(utt, "The voice connection dropped while speaking; the rest was cut off.")
        self.pacer.learn(len(utt.request.text), utt.speed, utt.audio_seconds)
        return Outcome.PLAYED


def _until_start_by(utt: Utterance) -> float:
    """Seconds until `utt`'s start_by (a little past it, so that it is overdue then); inf without one."""
    start_by = utt.request.start_by
    return float("inf") if start_by is None else max(0.0, start_by - time.monotonic()) + 0.001
