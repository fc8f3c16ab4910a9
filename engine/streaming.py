"""StreamingEngine: clean, segment, schedule, synthesize off the loop and stream framed PCM."""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import logging
import threading
import time
from collections.abc import AsyncGenerator, Callable, Hashable, Iterator
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.audio import FrameConverter
from engine.backends.pool import WorkerPool
from engine.base import (
    DISCORD_CHANNELS,
    DISCORD_RATE,
    AsyncBackend,
    AudioChunk,
    Backend,
    BackendInfo,
    CancelToken,
    Capacity,
    EngineError,
    EngineStats,
    Progress,
    Stream,
    SynthesisTimeout,
    TextRejected,
    Voice,
)
from engine.catalog import VoiceCatalog
from engine.heap import give_back
from engine.load_changes import LoadChanges
from engine.realtime import ALONE_S, RECENT_KEYS_S, SPEED_WEIGHT, PlayOut, stream_hold_s
from engine.scheduler import Deadline, Grant, Scheduler
from engine.segment import clean_text, split_segments, split_sentences
from engine.settings import EngineSettings

if TYPE_CHECKING:
    from engine.voices.registration import Registration

log = logging.getLogger(__name__)

_END = object()  # a job's queue sentinel: the segment is complete
WARM_UP_KEY = "warm-up"  # whom warm_up's utterance is made for


@dataclass
class EngineCounters:
    """Running totals for metrics, and the engine's speed as it was measured at each load."""

    utterances: int = 0
    segments_done: int = 0
    errors: int = 0
    timeouts: int = 0
    cancelled: int = 0
    synthesis_seconds: float = 0.0  # slots held, from each grant to its work's last chunk
    audio_seconds: float = 0.0  # audio produced by the backend
    abandoned_now: int = 0  # inference calls still finishing after a timeout or skip
    first_chunk_s: float = 0.0  # seconds from a slot to its work's first chunk over the last ones (average)
    # audio seconds per slot-second by how many slots were busy meanwhile (moving averages): one inference may use
    # every core, so a slot alone runs faster than each of two at once, and a capacity priced from a lightly loaded
    # engine would be wrong under load
    speeds: dict[int, float] = field(default_factory=dict)
    # the same of a stepping backend's later steps only (a run's next window: no features to make first): what the
    # pacer prices the next unit of a run under way at
    next_speeds: dict[int, float] = field(default_factory=dict)
    measures: dict[tuple[bool, int], int] = field(default_factory=dict)  # (later steps?, slots busy) -> how many
    by_load: dict[int, list[float]] = field(default_factory=dict)  # slots busy -> [audio seconds, slot seconds]
    seconds_per_char: float = 0.07  # audio seconds per character of text at speed 1, learned from every stream made

    def learn_length(self, chars: float, audio_seconds: float) -> None:
        """A stream of `chars` characters (at speed 1) made `audio_seconds`: folded into seconds_per_char."""
        if chars >= 10 and audio_seconds > 0:
            self.seconds_per_char += SPEED_WEIGHT * (min(0.3, max(0.02, audio_seconds / chars)) - self.seconds_per_char)

    def first_chunk(self, seconds: float) -> None:
        """A segment's first chunk came `seconds` after its slot (a stepping backend's: its first step, features
        included): the moving average of that wait."""
        self.first_chunk_s += SPEED_WEIGHT * (seconds - self.first_chunk_s) if self.first_chunk_s else seconds

    def made(self, slot_seconds: float, audio_seconds: float, busy: float, *, later_step: bool = False) -> None:
        """A slot held `slot_seconds` made `audio_seconds` while `busy` slots (its own included) were busy, on
        average (`later_step`: a stepping backend's step after its run's first)."""
        self.synthesis_seconds += slot_seconds
        self.audio_seconds += audio_seconds
        if slot_seconds > 0 and audio_seconds > 0:
            speed, level = audio_seconds / slot_seconds, max(1, round(busy))
            self._average(self.speeds, False, level, speed)
            if later_step:
                self._average(self.next_speeds, True, level, speed)
            totals = self.by_load.setdefault(level, [0.0, 0.0])
            totals[0] += audio_seconds
            totals[1] += slot_seconds

    def _average(self, table: dict[int, float], later: bool, level: int, speed: float) -> None:
        """Fold `speed` into `table[level]`: the mean of the first measures, then a moving average (a slow first
        measure, a cold cache or a session's arena growing, is not carried for dozens of windows)."""
        n = self.measures[later, level] = self.measures.get((later, level), 0) + 1
        old = table.get(level, speed)
        table[level] = old + max(SPEED_WEIGHT, 1.0 / n) * (speed - old)

    def speed(self, busy: int, *, next_step: bool = False) -> float:
        """Audio seconds per slot-second with `busy` slots busy (`next_step`: of runs' later steps, else of all): as
        measured there, else from the nearest load measured, with its total shared among `busy` slots when that is
        more (never faster than measured); 0 before any measure."""
        table = self.next_speeds if next_step else self.speeds
        if not table:
            return 0.0
        busy = max(1, busy)
        if busy in table:
            return table[busy]
        level = min(table, key=lambda k: (abs(k - busy), -k))
        return table[level] * min(1.0, level / busy)

    def snapshot(self) -> dict[str, float]:
        out = asdict(self)
        del out["first_chunk_s"], out["speeds"], out["next_speeds"], out["measures"], out["by_load"]
        del out["seconds_per_char"]
        return out


class _Job:
    """One segment: its slot, its cancel token, the executor call in flight, and its audio queue."""

    __slots__ = ("index", "text", "queue", "token", "grant", "inflight", "task", "first_at", "last_call")

    def __init__(self, index: int, text: str) -> None:
        self.index = index
        self.text = text
        self.queue: asyncio.Queue[Any] = asyncio.Queue()
        self.token = CancelToken()
        self.grant: Grant | None = None
        self.inflight: concurrent.futures.Future[Any] | None = None
        self.task: asyncio.Task[None] | None = None
        self.first_at: float | None = None  # perf_counter when the backend made its first chunk
        self.last_call: concurrent.futures.Future[Any] | None = None  # a stepping backend's latest step


class _PinnedSegment:
    """Runs a blocking backend generator to its end in one executor call, so it never changes thread.

    Chunks reach the job's queue through the loop; the generator is closed on its own thread when the
    segment is cancelled (the token) or the loop goes away. Returns the samples produced.
    """

    def __init__(
        self, backend: Backend, job: _Job, voice: Voice, kwargs: dict[str, Any], loop: asyncio.AbstractEventLoop
    ) -> None:
        self._open = lambda: iter(backend.synthesize(job.text, voice, **kwargs))
        self._job = job
        self._loop = loop

    def __call__(self) -> int:
        it = self._open()
        produced = 0
        try:
            for item in it:
                if self._job.token.cancelled:
                    break
                arr = np.asarray(item, dtype=np.float32).reshape(-1)
                if not produced:
                    self._job.first_at = time.perf_counter()
                produced += len(arr)
                try:
                    self._loop.call_soon_threadsafe(self._job.queue.put_nowait, arr)
                except RuntimeError:  # the loop is gone
                    break
        finally:
            close = getattr(it, "close", None)
            if close is not None:
                close()
        return produced


class _Stream:
    """Engine.stream's Stream: the chunks as made, and how much to hold before playing (StreamingEngine._hold)."""

    __slots__ = ("_chunks", "_hold")

    def __init__(self, chunks: AsyncGenerator[AudioChunk, None], hold: Callable[[], float]) -> None:
        self._chunks = chunks
        self._hold = hold

    def __aiter__(self) -> _Stream:
        return self

    async def __anext__(self) -> AudioChunk:
        return await self._chunks.__anext__()

    async def aclose(self) -> None:
        await self._chunks.aclose()

    def hold_s(self) -> float:
        return self._hold()


def _is_async(backend: Backend | AsyncBackend) -> bool:
    return isinstance(backend, AsyncBackend) and not isinstance(backend, Backend)


def takes_kwarg(backend: Backend, name: str) -> bool:
    """Whether the backend's synthesize takes `name`= (cancel: a CancelToken; alone: the engine is its stream's)."""
    params = inspect.signature(backend.synthesize).parameters
    return name in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


class StreamingEngine:
    """The Engine of engine/base.py over one backend.

    Each segment of an utterance takes a scheduler slot keyed by `key`; a blocking backend's generator
    runs a whole segment on one thread of a pool of `settings.workers` (engine/backends/pool.py), so it never
    changes thread (its session stays with it); AsyncBackends run on the loop.
    Effective parallelism is min(workers, max_concurrency). Segment N+1 is started (waits for its slot) while segment N
    is streamed, so playback has no gaps. Closing or cancelling the stream cancels its work and
    frees its slots at once.

    Timeouts and skips: a running onnxruntime call cannot be killed, so it is told to stop (the
    CancelToken; Piper sets RunOptions.terminate) and its result is abandoned: its thread is retired
    (it exits when the call returns) and a fresh thread replaces it, so the slot is free at once. Up
    to `settings.max_abandoned` retired threads may be running; past that bound a timed-out segment
    keeps its slot and its thread until the call returns, so there are never more than
    workers + max_abandoned inference threads.
    """

    def __init__(
        self,
        backend: Backend | AsyncBackend,
        settings: EngineSettings | None = None,
        *,
        scheduler: Scheduler | None = None,
        catalog: VoiceCatalog | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.backend = backend
        self.catalog = catalog if catalog is not None else VoiceCatalog(backend)  # every voice, and what it speaks
        self.settings = settings or EngineSettings()
        # the engine's one clock: every deadline is on it (the scheduler's, so a fake one drives both in tests)
        self.scheduler = scheduler or Scheduler(self.settings.max_concurrency, self.settings.per_key_limit,
                                                clock=clock)
        self.counters = EngineCounters()
        self._load = LoadChanges()  # capacity_changed(): the scheduler's waiters, grants and releases, the speed
        self.scheduler.on_change = self._load.notify
        self._recent_keys: dict[Hashable, float] = {}  # key -> loop time it last asked for a slot
        self._playouts: set[PlayOut] = set()  # every stream under way
        self.max_abandoned = max(0, self.settings.max_abandoned)
        self._async = _is_async(backend)
        self._pool = WorkerPool(max(1, self.settings.workers), name="engine")
        self._closed = False
        self._registrar: concurrent.futures.ThreadPoolExecutor | None = None
        # Optional hook for metrics and benchmarks: trace(event, key, segment_index) with event
        # "granted" (slot acquired, synthesis starts) or "synthesized" (last chunk produced).
        self.trace: Callable[[str, Hashable, int], None] | None = None

    @property
    def info(self) -> BackendInfo:
        """What the backend declares (its version changes when stored voice features must be derived again)."""
        return self.backend.info

    def languages(self) -> dict[str, str]:
        """Every language some voice of this engine speaks: base code -> English name."""
        return self.catalog.languages()

    def route(self, voice: Voice, language: str) -> Voice:
        """The voice that speaks `language` (engine/catalog.py: the chosen one, the backend's own, an extra one)."""
        return self.catalog.route(voice, language)

    # -- text -----------------------------------------------------------------------------------

    def prepare(self, text: str) -> str:
        """The text as it will be spoken, or TextRejected with a message for the user."""
        cleaned = clean_text(text if isinstance(text, str) else str(text))
        if not any(ch.isalnum() for ch in cleaned):
            raise TextRejected("There is nothing to say in that text.")
        limit = self.settings.max_text_chars
        if len(cleaned) > limit:
            raise TextRejected(f"That text is too long: {len(cleaned)} characters; the limit is {limit}.")
        return cleaned

    def segments(self, text: str, backend: Backend | AsyncBackend | None = None) -> list[str]:
        """What `text` is synthesized in, one run each: whole sentences for a backend that plans a run's prosody
        (BackendInfo.sentence_chars), else a short first segment and growing ones (engine.first_segment_chars)."""
        cleaned = self.prepare(text)
        sentence_chars = (backend or self.backend).info.sentence_chars
        if sentence_chars:
            return split_sentences(cleaned, sentence_chars)
        return split_segments(cleaned, self.settings.first_segment_chars, self.settings.max_segment_chars)

    # -- streaming ------------------------------------------------------------------------------

    def stream(
        self,
        text: str,
        voice: Voice,
        *,
        key: Hashable,
        rate: int = DISCORD_RATE,
        channels: int = DISCORD_CHANNELS,
        urgent: bool = False,
        heard: Callable[[], float | None] | None = None,
    ) -> Stream:
        playout = PlayOut(self.scheduler.clock, urgent=urgent, heard=heard, making=self._making, key=key,
                          largest=max(self.backend.info.units))
        self._playouts.add(playout)
        chars = len(text) / max(voice.speed, 0.1) if isinstance(text, str) else 0.0  # in characters at speed 1
        return _Stream(self._chunks(text, voice, key, rate, channels, urgent, playout, chars),
                       lambda: self._hold(key, urgent, playout, chars))

    def _hold(self, key: Hashable, urgent: bool, playout: PlayOut, chars: float) -> float:
        """Audio seconds a stream must have in hand to start playing (engine/realtime.py) at this key's share of the
        engine now, the rest estimated from its text at the seconds per character learned."""
        if playout.done:
            return 0.0
        rest = chars * self.counters.seconds_per_char - playout.made_s
        info = self.backend.info
        return stream_hold_s(self.capacity(key, urgent=urgent), playout.next_s, self.counters.first_chunk_s, rest,
                             max(info.units), info.unit_growth)

    async def _chunks(self, text: str, voice: Voice, key: Hashable, rate: int, channels: int, urgent: bool,
                      playout: PlayOut, chars: float) -> AsyncGenerator[AudioChunk, None]:
        if self._closed:
            raise EngineError("The speech engine is shut down.")
        backend, voice = self.catalog.backend_for(voice)
        segments = self.segments(text, backend)
        conv = FrameConverter(
            backend.info.sample_rate,
            rate,
            channels,
            loudness_dbfs=self.settings.loudness_target_dbfs,
            fade_ms=self.settings.fade_ms,
        )
        jobs = [_Job(i, s) for i, s in enumerate(segments)]
        self.counters.utterances += 1
        done = False
        bytes_per_s = rate * channels * 2
        stepped = backend.info.steps and not _is_async(backend)
        steps: asyncio.Task[None] | None = None

        def start(i: int) -> None:
            if i < len(jobs) and jobs[i].task is None:
                jobs[i].task = asyncio.create_task(self._produce(jobs[i], backend, voice, key, urgent,
                                                                 playout.deadline))

        try:
            if stepped:
                steps = asyncio.create_task(self._produce_steps(jobs, backend, voice, key, urgent,  # type: ignore[arg-type]
                                                                playout))
            else:
                start(0)
            for job in jobs:
                if not stepped:
                    start(job.index + 1)  # one ahead: waits for its slot while this one streams
                while True:
                    item = await job.queue.get()
                    if item is _END:
                        break
                    if isinstance(item, BaseException):
                        raise item
                    audio, next_s = item if isinstance(item, tuple) else (item, 0.0)
                    pcm = conv.feed(audio)
                    playout.next_s = next_s
                    if pcm:
                        playout.add(len(pcm) / bytes_per_s)
                        yield AudioChunk(pcm, rate, channels, segment=job.index, next_s=next_s)
            tail = conv.flush()
            if conv.samples_out == 0:
                raise TextRejected("There is nothing to say in that text.")
            done = playout.done = True
            self.counters.learn_length(chars, playout.made_s + len(tail) / bytes_per_s)
            yield AudioChunk(tail, rate, channels, segment=len(jobs) - 1, final=True)
        finally:
            conv.close()
            self._playouts.discard(playout)
            if not done:
                cancelled = False
                for task in [steps, *(job.task for job in jobs)]:
                    if task is not None and not task.done():
                        task.cancel()
                        cancelled = True
                for job in jobs:
                    self._finish(job)
                if cancelled:
                    self.counters.cancelled += 1

    async def _produce(self, job: _Job, backend: Backend | AsyncBackend, voice: Voice, key: Hashable,
                       urgent: bool, deadline: Deadline) -> None:
        """One segment in one slot, by its `deadline`: a blocking backend's on one pool thread (_PinnedSegment), an
        async one's on the loop."""
        loop = asyncio.get_running_loop()
        try:
            self._recent_keys[key] = loop.time()
            job.grant = await self.scheduler.acquire(key, deadline=deadline, urgent=urgent)
            if self.trace is not None:
                self.trace("granted", key, job.index)
            t0, area = time.perf_counter(), self.scheduler.busy_area()
            give_up = loop.time() + self.settings.segment_timeout_s
            produced = 0
            if _is_async(backend):
                produced = await self._run_async(job, backend, voice, give_up)  # type: ignore[arg-type]
            else:
                produced = await self._run_blocking(job, backend, voice, give_up)  # type: ignore[arg-type]
            if self.trace is not None:
                self.trace("synthesized", key, job.index)
            took = time.perf_counter() - t0
            self.counters.made(took, produced / backend.info.sample_rate,
                               (self.scheduler.busy_area() - area) / max(took, 1e-9))
            self.counters.segments_done += 1
            self._load.notify()
            if job.first_at is not None:
                self.counters.first_chunk(job.first_at - t0)
            job.queue.put_nowait(_END)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - reported to the stream's reader
            job.queue.put_nowait(self._failure(exc, backend, job))
        finally:
            self._finish(job)

    async def _produce_steps(self, jobs: list[_Job], backend: Backend, voice: Voice, key: Hashable, urgent: bool,
                             playout: PlayOut) -> None:
        """A stepping backend's segments in turn (BackendInfo.steps), each item of its generator one unit of work in
        a slot of its own, due by the stream's play-out (`playout.deadline`: the first by its listener's TTFA target,
        every later one by when the audio in hand runs out). So a long sentence's later windows let other utterances'
        first ones go first, the engine's speed is measured window by window, and a skipped utterance stops at its
        next window. A step keeps its slot for the next when no other waiter is due before it (Scheduler.keep)."""
        held, next_s = None, 0.0
        cancels, alone = takes_kwarg(backend, "cancel"), takes_kwarg(backend, "alone")

        def deadline() -> float | None:
            return playout.deadline(next_s=next_s)

        try:
            for job in jobs:
                kwargs: dict[str, Any] = {"cancel": job.token} if cancels else {}
                if alone:  # no other key asked for a slot in the last ALONE_S
                    kwargs["alone"] = not self._ages_within(ALONE_S).keys() - {key}
                items = iter(backend.synthesize(job.text, voice, **kwargs))
                try:
                    more, opens = 1.0, True
                    while more:
                        audio, more, grant = await self._step(job, items, key, urgent, deadline, backend, held,
                                                              later=not opens)
                        opens = False
                        job.queue.put_nowait((audio, more))
                        coming_s = len(audio) / backend.info.sample_rate
                        next_s = more
                        follows = more or job is not jobs[-1]
                        keep = follows and self.scheduler.keep(grant, playout.deadline(coming_s, next_s))
                        held = grant if keep else None
                        if held is None:
                            grant.release()  # free before the next step asks again
                    self.counters.segments_done += 1
                    job.queue.put_nowait(_END)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # noqa: BLE001 - reported to the stream's reader; the rest is not made
                    job.queue.put_nowait(self._failure(exc, backend, job))
                    return
                finally:
                    self._finish(job)
                    self._close_later(job, items)
        finally:
            if held is not None:
                held.release()
        self._load.notify()

    async def _step(self, job: _Job, items: Iterator[Any], key: Hashable, urgent: bool, deadline: Deadline,
                    backend: Backend, held: Grant | None, *, later: bool = False) -> tuple[np.ndarray, float, Grant]:
        """The next item of `items` made on a pool thread in a slot of its own (`held`, kept from the step before, or
        one asked for by `deadline`): its audio, the audio seconds the next brings (0: none follows; also when the
        generator ended without saying so) and the slot, still held (the caller frees or keeps it). `later`: not its
        segment's first item (its speed is also a later step's: EngineCounters.next_speeds)."""
        loop = asyncio.get_running_loop()
        self._recent_keys[key] = loop.time()
        job.grant = held or await self.scheduler.acquire(key, deadline=deadline, urgent=urgent)
        if self.trace is not None:
            self.trace("granted", key, job.index)
        t0, area = time.perf_counter(), self.scheduler.busy_area()
        cf = self._pool.submit(lambda: next(items, None))
        job.inflight = job.last_call = cf
        try:
            item = await asyncio.wait_for(asyncio.wrap_future(cf), self.settings.segment_timeout_s)
        except TimeoutError:
            raise self._timeout() from None
        took = time.perf_counter() - t0
        busy = (self.scheduler.busy_area() - area) / max(took, 1e-9)
        job.inflight = None
        grant, job.grant = job.grant, None
        if grant is None:  # its stream ended as the step came back (wait_for kept the result, not the cancel)
            raise asyncio.CancelledError
        audio, more = item if item is not None else (np.zeros(0, np.float32), 0.0)
        audio = np.asarray(audio, dtype=np.float32).reshape(-1)
        if self.trace is not None:
            self.trace("synthesized", key, job.index)
        self.counters.made(took, len(audio) / backend.info.sample_rate, busy, later_step=later)
        if not later:  # a segment's first step: its features too (what a unit of unknown length is priced at)
            self.counters.first_chunk(took)
        self._load.notify()
        return audio, float(more), grant

    @staticmethod
    def _close_later(job: _Job, items: Iterator[Any]) -> None:
        """Close a stepping backend's generator now, or on its thread once the step it is running returns."""
        close = getattr(items, "close", None)
        if close is None:
            return
        cf = job.last_call
        if cf is not None and not cf.done():
            cf.add_done_callback(lambda _: close())
        else:
            close()

    def _failure(self, exc: Exception, backend: Backend | AsyncBackend, job: _Job) -> EngineError:
        """What a failed segment tells the stream's reader (counted; an unexpected error logged)."""
        self.counters.errors += 1
        if isinstance(exc, SynthesisTimeout):
            self.counters.timeouts += 1
        if isinstance(exc, EngineError):
            return exc
        log.error("backend %s failed on segment %d", backend.info.name, job.index, exc_info=exc)
        err = EngineError(f"The speech engine failed ({type(exc).__name__}); please try again.")
        err.__cause__ = exc
        return err

    def _timeout(self) -> SynthesisTimeout:
        return SynthesisTimeout(f"Speech synthesis took longer than {self.settings.segment_timeout_s:g} s.")

    async def _run_blocking(self, job: _Job, backend: Backend, voice: Voice, deadline: float) -> int:
        loop = asyncio.get_running_loop()
        kwargs = {"cancel": job.token} if takes_kwarg(backend, "cancel") else {}
        run = _PinnedSegment(backend, job, voice, kwargs, loop)
        cf = self._pool.submit(run)
        job.inflight = cf
        try:
            produced = await asyncio.wait_for(asyncio.wrap_future(cf), max(0.0, deadline - loop.time()))
        except TimeoutError:
            raise self._timeout() from None
        job.inflight = None
        return int(produced)

    async def _run_async(self, job: _Job, backend: AsyncBackend, voice: Voice, deadline: float) -> int:
        loop = asyncio.get_running_loop()
        agen = backend.astream(job.text, voice).__aiter__()
        produced = 0
        try:
            while True:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    raise self._timeout()
                try:
                    item = await asyncio.wait_for(agen.__anext__(), remaining)
                except StopAsyncIteration:
                    return produced
                except TimeoutError:
                    raise self._timeout() from None
                arr = np.asarray(item, dtype=np.float32).reshape(-1)
                produced += len(arr)
                job.queue.put_nowait(arr)
        finally:
            aclose = getattr(agen, "aclose", None)
            if aclose is not None:
                try:
                    await aclose()
                except Exception:  # noqa: BLE001 - closing a failed stream must not mask its error
                    log.debug("closing the async backend stream failed", exc_info=True)

    def _finish(self, job: _Job) -> None:
        """Stop the job's work and free its slot (idempotent; see the class docstring on bounds)."""
        job.token.cancel()
        grant, job.grant = job.grant, None
        cf, job.inflight = job.inflight, None
        if grant is None:
            return
        if cf is None or cf.done():
            grant.release()
            return
        loop = asyncio.get_running_loop()

        def later(callback: Any) -> None:
            def done(_: object) -> None:
                try:
                    loop.call_soon_threadsafe(callback)
                except RuntimeError:  # the loop is gone
                    pass

            cf.add_done_callback(done)

        if self.counters.abandoned_now < self.max_abandoned and self._pool.retire(cf):
            self.counters.abandoned_now += 1
            later(self._unabandon)
            grant.release()
        else:
            later(grant.release)

    def _unabandon(self) -> None:
        self.counters.abandoned_now -= 1

    async def warm_up(self) -> None:
        """Create every worker's backend session now and run one short utterance through the whole path
        (segmenting, scheduling, resampling, framing), so the first request is not slower than later ones."""
        await self._warm_sessions()
        if not self._async:  # a remote backend's first request would cost its server a synthesis for nothing
            async for _chunk in self.stream("Hello there.", Voice(), key=WARM_UP_KEY):
                pass
            self._recent_keys.pop(WARM_UP_KEY, None)  # no guild: the first one's speech has the engine alone
        else:
            await self.backend.warm_up()  # type: ignore[misc]  # (an AsyncBackend's: a server's languages)
        give_back()  # what warming up allocated and freed (phonemizers, first runs) leaves the heap

    async def _warm_sessions(self) -> None:
        if self._async:
            return
        warm = self.backend.warm_up
        n = max(1, self.settings.workers)
        barrier = threading.Barrier(n)

        def one() -> None:
            try:
                barrier.wait(timeout=30)  # n calls at once land on n distinct threads
            except threading.BrokenBarrierError:
                pass
            warm()

        await asyncio.gather(*(asyncio.wrap_future(self._pool.submit(one)) for _ in range(n)))

    # -- registration and the view of the load ------------------------------------------------------

    async def register(self, data: bytes, transcript: str, *, max_bytes: int,
                       progress: Progress | None = None) -> Registration:
        """Check a reference clip and derive this backend's features from it (Kokoro: a style fitted to it;
        Piper: its voice-matching profile; CosyVoice2: its frontend features; remote: the clip uploaded to the
        engine server). Runs off the loop, one registration at a time (it is CPU-heavy); `progress` is called
        on the loop."""
        from engine.voices.registration import register_clip

        if self._closed:
            raise EngineError("The speech engine is shut down.")
        if self._registrar is None:
            self._registrar = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="engine-register")
        loop = asyncio.get_running_loop()
        on_loop: Progress | None = None
        if progress is not None:
            def on_loop(done: float) -> None:
                loop.call_soon_threadsafe(progress, done)
        return await loop.run_in_executor(
            self._registrar,
            lambda: register_clip(data, transcript, [self.backend], self.settings, max_bytes=max_bytes,  # type: ignore[list-item]
                                  progress=on_loop),
        )

    def _making(self, next_s: float) -> float:
        """Seconds a unit of `next_s` audio seconds takes to make with every slot busy, as measured (0: unknown
        length: the mean time from a slot to a unit's first chunk)."""
        speed = self.counters.speed(self.scheduler.max_concurrency, next_step=True)
        return next_s / speed if next_s > 0 and speed > 0 else self.counters.first_chunk_s

    def capacity(self, key: Hashable, *, urgent: bool = False) -> Capacity:
        stats = self.scheduler.stats()
        c = self.counters
        # urgent work shares the slots with other keys' urgent work only (it is served first); the others with
        # every key that has work now or asked for a slot moments ago (a momentary lull is not a free engine)
        if urgent:
            competing = set(stats.waiting_urgent)
        else:
            competing = set(stats.waiting) | set(stats.running_per_key) | self._recently_asked()
        # a slot's speed as measured with as many slots busy as there will be with this key's work added; with every
        # slot busy while another key used the engine within ALONE_S (it may be back mid-utterance: on a 2-core EPYC
        # a slot made 1.2-1.6 audio s per s alone and 1.0-1.09 beside another, more than the pacer's UNIT_MARGIN)
        slots, per_key = self.scheduler.max_concurrency, self.scheduler.per_key_limit
        alone = not self._ages_within(ALONE_S).keys() - {key}
        busy = min(slots, max(stats.running, len(competing | {key}) * per_key)) if alone else slots
        return Capacity(
            slots=slots,
            running=stats.running,
            waiting_others=sum(n for k, n in stats.waiting.items() if k != key),
            audio_per_second=c.speed(busy),
            next_per_second=c.speed(busy, next_step=True),
            other_keys=len(competing - {key}),
            per_key=per_key,
            heard_others=sum(1 for p in self._playouts if p.playing() and p.key != key),
            key_streams=sum(1 for p in self._playouts if p.key == key and not p.done),
        )

    def _recently_asked(self) -> set[Hashable]:
        """Keys that asked for a slot in the last RECENT_KEYS_S (the load changes when the first of them ages out)."""
        ages = self._ages_within(RECENT_KEYS_S)
        if ages:
            self._load.notify_later(RECENT_KEYS_S - max(ages.values()))
        return set(ages)

    def _ages_within(self, seconds: float) -> dict[Hashable, float]:
        """How long ago each key that asked for a slot in the last `seconds` did (older than ALONE_S: forgotten)."""
        now = asyncio.get_running_loop().time()
        for k in [k for k, t in self._recent_keys.items() if now - t > max(seconds, ALONE_S)]:
            del self._recent_keys[k]
        return {k: now - t for k, t in self._recent_keys.items() if now - t <= seconds}

    async def capacity_changed(self) -> None:
        await self._load.wait()

    def stats(self) -> EngineStats:
        sched = self.scheduler.stats()
        return EngineStats(**self.counters.snapshot(), running=sched.running,  # type: ignore[arg-type]
                           waiting=sum(sched.waiting.values()),
                           sessions=self.catalog.sessions_alive,
                           by_load={k: (a, s) for k, (a, s) in self.counters.by_load.items()})

    async def synthesize_all(self, text: str, voice: Voice, *, key: Hashable = "cli") -> bytes:
        """The whole utterance at 48 kHz stereo (for the CLI and tests)."""
        out = bytearray()
        async for chunk in self.stream(text, voice, key=key):
            out += chunk.pcm
        return bytes(out)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._load.close()
        self._pool.shutdown()
        if self._registrar is not None:
            self._registrar.shutdown(wait=False, cancel_futures=True)
        self.catalog.close()
        if self._async:
            await self.backend.aclose()  # type: ignore[union-attr]
        else:
            self.backend.close()  # type: ignore[union-attr]
