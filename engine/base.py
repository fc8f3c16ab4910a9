"""The Engine protocol and its value types: what a backend offers and what callers get back."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Callable, Hashable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

if TYPE_CHECKING:
    from engine.voices.registration import Registration

DISCORD_RATE = 48_000
DISCORD_CHANNELS = 2
FRAME_SAMPLES = 960  # 20 ms at 48 kHz
FRAME_BYTES = FRAME_SAMPLES * DISCORD_CHANNELS * 2  # 3840: one 20 ms s16le stereo frame


class EngineError(Exception):
    """A request failed in the engine; the message is safe to show a user."""


class TextRejected(EngineError):
    """The text cannot be spoken (empty after cleaning, or over a limit)."""


class SynthesisTimeout(EngineError):
    """A segment took longer than the configured timeout."""


class BackendUnavailable(EngineError):
    """A backend cannot start: a package, device or model folder is missing."""


@dataclass(frozen=True)
class VoiceProfile:
    """A registered voice as one backend sees it: its id and that backend's feature blob."""

    voice_id: str
    backend: str
    backend_version: str
    features: bytes
    transcript: str = ""


@dataclass(frozen=True)
class Voice:
    """What a request asks for: a built-in voice name or a registered profile, plus speed and pitch."""

    name: str = "default"
    speed: float = 1.0  # >1 is faster
    pitch: float = 0.0  # semitones
    speaker_id: int | None = None  # for multi-speaker models
    profile: VoiceProfile | None = None
    language: str = ""  # what the text is in (a base code such as "fr"); "": the voice's own


@dataclass(frozen=True)
class AudioChunk:
    """PCM produced for one piece of one segment: s16le, interleaved when stereo."""

    pcm: bytes
    sample_rate: int
    channels: int
    segment: int = 0
    final: bool = False
    # audio seconds the stream's next unit of work brings, as far as the engine knows (0: unknown, or a new sentence)
    next_s: float = 0.0

    @property
    def duration(self) -> float:
        return len(self.pcm) / (2 * self.channels * self.sample_rate)


@runtime_checkable
class Stream(Protocol):
    """One utterance's audio as it is made (an async iterator of AudioChunk), and when it may start playing."""

    def __aiter__(self) -> Stream: ...

    async def __anext__(self) -> AudioChunk: ...

    async def aclose(self) -> None: ...

    def hold_s(self) -> float:
        """Audio seconds to have in hand before playing starts so that it never runs dry, at the engine's load now
        (0: play at once; inf: make all of it first); its listener asks again when the load changes."""
        ...


@dataclass(frozen=True)
class StockVoice:
    """A voice that ships with the engine, as users choose it (/voice list, /voice use)."""

    name: str  # Voice.name, e.g. "af_heart"
    label: str  # how it is called, e.g. "Heart"
    language: str  # the base code it speaks, e.g. "en"
    accent: str  # e.g. "American English"
    gender: str  # "woman" or "man"

    def describe(self) -> str:
        return f"{self.label} ({self.name}) — {self.accent}, {self.gender}"


@dataclass(frozen=True)
class BackendInfo:
    """What a backend declares about itself."""

    name: str
    version: str  # changes when features must be extracted again
    sample_rate: int
    clones: bool  # True when it speaks a registered voice from its own features
    voices: tuple[str, ...] = field(default_factory=tuple)
    languages: tuple[str, ...] = ("en",)  # base language codes its voices speak, the first its own
    stock: tuple[StockVoice, ...] = ()  # the voices users may choose by name (Kokoro's packs)
    # 0: the engine cuts text into short first segments growing (engine.first_segment_chars, Piper); else whole
    # sentences up to this many characters' worth (a model that plans a run's prosody as if the run ended there)
    sentence_chars: int = 0
    # True: each item `synthesize` yields is one unit of work (Kokoro: a vocoder window) as (audio, the audio seconds
    # the next one brings, about; 0: none follows), and its generator may resume on any thread, so the engine asks the
    # scheduler for a slot before each; False: it yields audio, and a segment runs whole on one thread
    steps: bool = False
    # audio seconds each unit of a run arrives in under load, in order, the last repeating (the load simulator's
    # schedule, bench/load/simulate.py): Piper's are sentences (about 2 s), Kokoro's its vocoder windows growing
    units: tuple[float, ...] = (2.0,)
    unit_growth: float = 1.0  # each unit of a run is at most this many times the one before (to max(units))
    # other backends whose stored features this one reads (a voice registered under them speaks until it is fitted
    # again for this one): a voice whose blob is of a kind not in `features` is spoken by the first of them that
    # speaks it (engine/catalog.py)
    reads: tuple[str, ...] = ()
    # the kinds of registered voices' feature blobs it speaks (engine/voices/features.py); () : whatever it is given
    features: tuple[str, ...] = ()
    # English names of its languages, as (base code, name) pairs: what the engine's languages() shows (a language no
    # backend names shows as its code)
    language_names: tuple[tuple[str, str], ...] = ()


class CancelToken:
    """Set by the engine when a segment is skipped or times out.

    A blocking backend whose `synthesize` accepts `cancel=` may poll `cancelled` between steps or
    register a hook with `on_cancel` (called once, from the cancelling thread) to stop work in flight,
    e.g. onnxruntime's RunOptions.terminate.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cancelled = False
        self._hooks: list[Callable[[], None]] = []

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    def on_cancel(self, hook: Callable[[], None]) -> Callable[[], None]:
        """Call `hook` on cancel (at once if already cancelled); returns a function removing it."""
        with self._lock:
            if not self._cancelled:
                self._hooks.append(hook)
                return lambda: self._remove(hook)
        hook()
        return lambda: None

    def _remove(self, hook: Callable[[], None]) -> None:
        with self._lock:
            if hook in self._hooks:
                self._hooks.remove(hook)

    def cancel(self) -> None:
        with self._lock:
            if self._cancelled:
                return
            self._cancelled = True
            hooks, self._hooks = self._hooks, []
        for hook in hooks:
            hook()


Progress = Callable[[float], None]  # how far a long task is, 0.0 to 1.0


@runtime_checkable
class Backend(Protocol):
    """A synthesizer. `synthesize` is blocking and runs in a worker thread; it yields float32 mono
    at `info.sample_rate`. It may take a keyword `cancel: CancelToken` (see CancelToken)."""

    info: BackendInfo

    def synthesize(self, text: str, voice: Voice) -> Iterator[np.ndarray]: ...

    def extract_features(self, clip: np.ndarray, sample_rate: int, transcript: str, *,
                         reference_embedding: np.ndarray | None = None,
                         progress: Progress | None = None) -> bytes | None:
        """Features a registered voice keeps for this backend, derived by the backend from the clip (16 kHz
        mono speech) and, where it helps, the clip's speaker embedding; None when it needs none. Blocking; a
        backend whose fit is long calls `progress` now and then."""
        ...

    def warm_up(self) -> None:
        """Make what the first request would wait for (sessions, learned state): called on each worker thread."""
        ...

    def voice_languages(self, voice: Voice) -> tuple[str, ...]:
        """The languages `voice` speaks (a backend whose voices each speak their own says so per voice)."""
        ...

    @property
    def sessions_alive(self) -> int | None:
        """Inference sessions in existence, where the backend counts them (soaks); None where it does not."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class AsyncBackend(Protocol):
    """A backend that streams natively on the event loop (for example over HTTP)."""

    info: BackendInfo

    def astream(self, text: str, voice: Voice) -> AsyncIterator[np.ndarray]: ...

    async def warm_up(self) -> None:
        """Learn what the engine needs before the first request (a server's languages), on the loop."""
        ...

    def voice_languages(self, voice: Voice) -> tuple[str, ...]: ...

    async def aclose(self) -> None: ...


class BackendDefaults:
    """What a backend need not write when it has nothing more to say: nothing to warm up, every voice speaking the
    backend's languages, no sessions counted."""

    info: BackendInfo

    def warm_up(self) -> None:
        """Nothing to make ahead."""

    def voice_languages(self, voice: Voice) -> tuple[str, ...]:
        return self.info.languages

    @property
    def sessions_alive(self) -> int | None:
        return None


@dataclass(frozen=True)
class Capacity:
    """What the speech side needs to know of the engine's load, as seen by one key (a guild)."""

    slots: int  # segments that may synthesize at once, across all keys
    running: int  # segments synthesizing now
    waiting_others: int  # segments of other keys waiting for a slot
    # audio seconds one slot produces per second with as many slots busy as this key's work makes (the engine's
    # measure at that load, recent average; 0: not measured yet)
    audio_per_second: float
    other_keys: int = 0  # other keys with segments running or waiting
    per_key: int = 1  # segments of one key that may synthesize at once
    # the same of a stepping backend's steps after a run's first (its next window: no features to make first); 0:
    # not measured (audio_per_second stands for it)
    next_per_second: float = 0.0
    heard_others: int = 0  # other streams playing now with audio still to make (each needs a slot 1/speed of the time)
    # this key's streams under way (one made ahead of its turn holds the key's slot a unit at a time, unpreempted)
    key_streams: int = 0

    def share(self) -> float:
        """Audio seconds per second this key can expect while the others stay busy (fair round-robin, at the speed
        over all units: a new request's first units included)."""
        return self.audio_per_second * min(float(self.per_key), self.slots / (self.other_keys + 1))


@dataclass(frozen=True)
class EngineStats:
    """Running totals for metrics."""

    utterances: int
    segments_done: int
    errors: int
    timeouts: int
    cancelled: int
    synthesis_seconds: float
    audio_seconds: float
    abandoned_now: int
    running: int  # segments synthesizing now (the scheduler's)
    waiting: int  # segments waiting for a slot
    sessions: int | None = None  # backend sessions in existence, where the backend counts them (Piper)
    # slots busy -> (audio seconds, slot seconds) made at that load: its speed there (capacity at full load)
    by_load: dict[int, tuple[float, float]] = field(default_factory=dict)


class Engine(Protocol):
    """Text + voice -> streamed PCM, and registration of voices. Knows nothing of Discord.

    The one API of the engine for the bot, the engine server, the CLI, tests and benchmarks
    (engine.factory.build_engine makes one): nobody else touches a backend, a scheduler or counters.
    """

    @property
    def info(self) -> BackendInfo:
        """What the backend declares (its version changes when stored voice features must be derived again)."""
        ...

    # a hook for metrics and benchmarks: trace(event, key, segment_index), event "granted" (a unit of work got its
    # slot) or "synthesized" (its audio was made); None: not traced
    trace: Callable[[str, Hashable, int], None] | None

    async def warm_up(self) -> None:
        """Load the model and run a tiny synthesis, so the first request is as fast as later ones."""
        ...

    async def register(self, data: bytes, transcript: str, *, max_bytes: int,
                       progress: Progress | None = None) -> Registration:
        """Check a reference clip and derive this backend's features of it (the backend decides what);
        `progress` is called on the event loop as the fit goes (by backends whose fit is long)."""
        ...

    def capacity(self, key: Hashable, *, urgent: bool = False) -> Capacity:
        """This key's view of the engine's load (as an urgent request's, served before the others)."""
        ...

    async def capacity_changed(self) -> None:
        """Return at the next change of the load `capacity` sees (a slot asked for, granted or freed, a new
        speed, a competing key aged out): the speech side waits on it instead of polling."""
        ...

    def languages(self) -> dict[str, str]:
        """Every language some voice of this engine speaks: base code -> English name."""
        ...

    def route(self, voice: Voice, language: str) -> Voice:
        """The voice to speak text in `language` with: `voice` when it speaks it, else the configured backend's
        own voice or another voice of the engine that does (engine/catalog.py)."""
        ...

    def stats(self) -> EngineStats: ...

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
        """Yield audio segment by segment as it is synthesized, converted to `rate`/`channels`.

        At 48 kHz stereo every chunk is a whole number of 20 ms frames (FRAME_BYTES). Every unit of work has a
        deadline (engine/realtime.py): the first by the TTFA target of its class (`urgent`: asked-for speech, else
        readout), later ones by when the audio in hand runs out. `heard`: the audio seconds of it the listener has
        heard, None while no listener waits for it (made ahead of its turn, or paused): its units have no deadline
        then. Without it the stream is taken to play from its first chunk on. The stream says how much audio to hold
        before playing (`Stream.hold_s`).
        """
        ...

    async def synthesize_all(self, text: str, voice: Voice, *, key: Hashable = "cli") -> bytes:
        """The whole utterance at 48 kHz stereo (`stream` collected: the CLI, tests, references)."""
        ...

    async def close(self) -> None: ...
