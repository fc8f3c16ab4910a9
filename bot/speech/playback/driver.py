"""VoiceDriver: one thread plays every guild's track, sending each one's next Opus frame on a shared 20 ms tick."""

from __future__ import annotations

import asyncio
import collections
import enum
import logging
import threading
import time
from collections.abc import Callable
from typing import Protocol

from bot.speech.playback import ducking as ducking_
from bot.speech.playback.opus import voice_encoder
from bot.speech.playback.play_stats import PlayStats
from bot.speech.playback.source import SILENCE, StreamingSource

log = logging.getLogger(__name__)
TICK_S = 0.020  # one Opus frame per connection per tick
MAX_LATE_TICKS = 5  # further behind than this (a stalled machine): pace from now rather than send a burst
ENCODE_AHEAD = 25  # frames (0.5 s) each track keeps encoded ahead of what it sends
ENCODE_BUDGET_S = 0.010  # encoding ahead stops for this tick once it took this long (sends come first)
END_SILENCE = 5  # Opus silence frames after speech, as Discord clients send
OPUS_SILENCE = b"\xf8\xff\xfe"


class Sink(Protocol):
    """Where a track's frames go: a guild's voice connection (bot/speech/connection/voice_connection.py)."""

    timeout: float  # how long a (re)connect may take
    ducking: ducking_.Ducking | None  # the call's level while members speak (None: always full)

    def ready_to_send(self) -> bool: ...

    def is_connected(self) -> bool: ...

    def send_opus(self, packet: bytes) -> None: ...

    def set_speaking(self, speaking: bool) -> None: ...


class End(enum.Enum):
    """Why a track stopped playing."""

    FINISHED = "finished"  # every frame was sent
    GAVE_WAY = "gave_way"  # paused at a segment boundary; the rest is still buffered
    STOPPED = "stopped"  # stop(): /skip, /stop, leave
    E2EE_TIMEOUT = "e2ee_timeout"  # connected, but the call's E2EE was not ready within the hold limit
    DROPPED = "dropped"  # the connection was gone for the whole hold limit
    FAILED = "failed"  # sending raised (error holds it)


class Track:
    """A handle on one utterance playing through the driver: stop it, await how it ended. The driver's thread alone
    reads its source and keeps the Opus of the source's next frames, encoded ahead of sending."""

    def __init__(self, source: StreamingSource, sink: Sink, encode: Callable[[bytes], bytes], hold_limit_s: float,
                 loop: asyncio.AbstractEventLoop, stats: PlayStats | None = None) -> None:
        self.source = source
        self.sink = sink
        self.stats = stats if stats is not None else PlayStats()  # when its frames were sent
        self.hold_limit_s = hold_limit_s
        self.held_s = 0.0  # time spent waiting for the connection or its E2EE while playing
        self.end: End | None = None
        self.error: BaseException | None = None
        self.done: asyncio.Future[End] = loop.create_future()
        self._encode = encode
        self._ahead: collections.deque[bytes] = collections.deque()  # Opus of the source's next frames, in order
        self._loop = loop
        self._stop = False
        self._hold_from: float | None = None
        self._speaking = False
        self._ducking = sink.ducking

    def stop(self) -> None:
        """End playback at the next tick (any thread); the end-of-speech silence is still sent."""
        self._stop = True

    # -- the driver's thread ---------------------------------------------------------------------
    def step(self, now: float) -> End | None:
        """Send this tick's frame; the reason when the track ends."""
        if self._stop:
            return End.STOPPED
        if not self.sink.ready_to_send():  # reconnecting, or listeners expect E2EE that is not ready yet
            if self._hold_from is None:
                self._hold_from = now
            connected = self.sink.is_connected()  # else discord.py is reconnecting: give it its connect timeout too
            if now - self._hold_from >= self.hold_limit_s + (0.0 if connected else self.sink.timeout):
                return End.E2EE_TIMEOUT if connected else End.DROPPED
            return None
        if self._hold_from is not None:
            self.held_s += now - self._hold_from
            self._hold_from = None
            self._speaking = False  # a new session after a reconnect: announce again
        packet = self._next_packet()
        if not packet:
            if self.source.yielded:
                self.stats.broke()
                return End.GAVE_WAY
            return End.FINISHED
        if not self._speaking:
            self.sink.set_speaking(True)
            self._speaking = True
        self.sink.send_opus(packet)
        return None

    def _next_packet(self) -> bytes:
        """The source's next frame as Opus: encoded ahead, or now (silence on an underrun); b"" at its end."""
        queued = self.source.buffered_frames  # only this thread takes frames out: at least this many before the read
        frame = self.source.read()
        if not frame:
            self._ahead.clear()  # gave way: the rest is encoded again when it plays (a new stream)
            return b""
        if frame is not SILENCE:  # the source's own silence frame: an underrun, not speech played
            self.stats.played(queued)
        if self._ahead:  # the frame just read is the one encoded first (only this thread takes frames out)
            return self._ahead.popleft()
        return self._encode(self._shaped(frame))

    def _shaped(self, pcm: bytes) -> bytes:
        """The frame at the call's level (ducking.py), just before it is encoded, in sending order."""
        return self._ducking.shape(pcm) if self._ducking is not None else pcm

    def encode_ahead(self, frames: int) -> None:
        """Encode the source's next frames, in order, until `frames` are encoded ahead of sending (an Opus encoder's
        state follows the stream). A ducking call's track encodes only ducking.AHEAD frames ahead: its level changes
        within that many frames of a member's first packet."""
        if self._ducking is not None and self._ducking.active:
            frames = min(frames, ducking_.AHEAD)
        for pcm in self.source.upcoming(len(self._ahead), frames - len(self._ahead)):
            self._ahead.append(self._encode(self._shaped(pcm)))

    def close(self, end: End, error: BaseException | None = None) -> None:
        """Silence after speech, the speaking flag off, the buffer freed (unless it gave way), the waiter told."""
        self.end, self.error = end, error
        try:
            if self._speaking and self.sink.is_connected():
                for _ in range(END_SILENCE):
                    self.sink.send_opus(OPUS_SILENCE)
                self.sink.set_speaking(False)
        except Exception:
            log.debug("end-of-speech silence not sent", exc_info=True)
        self.source.cleanup()
        try:
            self._loop.call_soon_threadsafe(self._resolve)
        except RuntimeError:
            pass  # the loop closed meanwhile

    def _resolve(self) -> None:
        if not self.done.done() and self.end is not None:
            self.done.set_result(self.end)


class VoiceDriver:
    """One real-time thread for all guilds (Songbird's driver as the model): each tick sends every playing track's
    next frame, then encodes ahead what the tracks will send next. Sleeps while nothing plays."""

    def __init__(self, encoder_options: dict | None = None, *, complexity: int = 5) -> None:
        self.encoder_options = dict(encoder_options or {})
        self.complexity = complexity
        self._tracks: list[Track] = []
        self._wake = threading.Condition()
        self._closed = False
        self._thread: threading.Thread | None = None
        self.ticks = 0
        self.late_ticks = 0  # ticks that started more than a tick late
        self.cpu_s = 0.0  # the thread's CPU time while it had tracks

    def play(self, source: StreamingSource, sink: Sink, *, hold_limit_s: float,
             stats: PlayStats | None = None) -> Track:
        """Start sending `source` to `sink` at the next tick (from the event loop); `stats` counts when its frames
        were sent (an utterance's across the tracks it plays in, when it gives way)."""
        encode = voice_encoder(self.encoder_options, self.complexity)
        track = Track(source, sink, encode, hold_limit_s, asyncio.get_running_loop(), stats)
        with self._wake:
            if self._closed:
                raise RuntimeError("the voice driver is closed")
            self._tracks.append(track)
            self._wake.notify()
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="voice-driver", daemon=True)
            self._thread.start()
        return track

    def close(self) -> None:
        with self._wake:
            self._closed = True
            tracks, self._tracks = self._tracks, []
            self._wake.notify()
        for track in tracks:
            track.close(End.STOPPED)
        if self._thread is not None:
            self._thread.join(timeout=2.0)

    # -- the thread ------------------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._tracks and not self._closed:
                    self._wake.wait()
                if self._closed:
                    return
            cpu0 = time.thread_time()
            self._play_while_tracks()
            self.cpu_s += time.thread_time() - cpu0

    def _play_while_tracks(self) -> None:
        start, n = time.perf_counter(), 0
        while self._tracks and not self._closed:
            now = time.perf_counter()
            due = start + n * TICK_S
            if now - due > MAX_LATE_TICKS * TICK_S:  # stalled: no burst of missed frames, pace from now
                start, n, due = now, 0, now
            if now - due > TICK_S:
                self.late_ticks += 1
            self._tick(now)
            n += 1
            delay = start + n * TICK_S - time.perf_counter()
            if delay > 0:
                time.sleep(delay)

    def _tick(self, now: float) -> None:
        self.ticks += 1
        ended: list[tuple[Track, End, BaseException | None]] = []
        at = time.monotonic()  # one clock reading for the whole tick
        for track in list(self._tracks):
            try:
                end = track.step(at)
            except Exception as exc:  # noqa: BLE001 - an Opus or encryption failure ends this track, never the driver
                ended.append((track, End.FAILED, exc))
                continue
            if end is not None:
                ended.append((track, end, None))
        for track, end, error in ended:
            with self._wake:
                if track in self._tracks:
                    self._tracks.remove(track)
            track.close(end, error)
        deadline = now + ENCODE_BUDGET_S
        for track in list(self._tracks):
            if time.perf_counter() >= deadline:
                break
            try:
                track.encode_ahead(ENCODE_AHEAD)
            except Exception:
                log.debug("encoding ahead failed; the frame is encoded when sent", exc_info=True)
