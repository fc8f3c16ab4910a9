"""A request to speak and its utterance: the value types of the /say path (what is asked, where it is, how it went)."""

from __future__ import annotations

import asyncio
import enum
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from bot.errors import UserError
from bot.speech.playback.play_stats import PlayStats
from bot.speech.playback.source import StreamingSource
from bot.speech.queue.pacing import FRAME_S, Progress
from engine.base import Stream, Voice

log = logging.getLogger(__name__)


class Outcome(enum.Enum):
    PLAYED = "played"
    SILENT = "silent"  # synthesized to no audio at all (e.g. only a pause): nothing was said
    SKIPPED = "skipped"  # by /skip or /stop while playing
    REMOVED = "removed"  # taken out of the queue (/stop, message deleted)
    STALE = "stale"  # could not start within its start_by (readout's max_delay): skipped to catch up
    FAILED = "failed"  # synthesis or playback failed; the author was told


class Stage(enum.Enum):
    """Where an utterance is on its way to the listener; it moves only along TRANSITIONS (Utterance.enter)."""

    QUEUED = "queued"  # waiting its turn (again, after giving way to asked-for speech)
    SYNTHESIZING = "synthesizing"  # its synthesis holds a slot of the guild (lookahead.py)
    HELD = "held"  # its turn: first audio made, held until the rest keeps ahead of the listener (player.py)
    WAITING_E2EE = "waiting for E2EE"  # held back until the call's end-to-end encryption is ready
    PLAYING = "playing"  # handed to the voice driver
    ENDED = "ended"  # with its Outcome (finish)


TRANSITIONS: dict[Stage, frozenset[Stage]] = {
    Stage.QUEUED: frozenset({Stage.SYNTHESIZING, Stage.HELD, Stage.ENDED}),  # HELD: its turn again, audio in hand
    Stage.SYNTHESIZING: frozenset({Stage.HELD, Stage.QUEUED, Stage.ENDED}),  # QUEUED: gave way before a word
    Stage.HELD: frozenset({Stage.WAITING_E2EE, Stage.QUEUED, Stage.ENDED}),
    Stage.WAITING_E2EE: frozenset({Stage.PLAYING, Stage.QUEUED, Stage.ENDED}),
    Stage.PLAYING: frozenset({Stage.QUEUED, Stage.ENDED}),  # QUEUED: gave way at a sentence, the rest to play
    Stage.ENDED: frozenset(),
}


class QueueFull(UserError):
    """The guild's queue is at its bound."""


class Late(Exception):
    """A request that would start past the guild's max_delay, with something ahead of it."""

    def __init__(self, wait: float) -> None:
        super().__init__(f"it would start in about {wait:.0f} s")
        self.wait = wait


Notify = Callable[[str], Awaitable[None]]


@dataclass
class Request:
    """Something to say in a guild, with the voice already resolved."""

    text: str
    voice: Voice = field(default_factory=Voice)
    author_id: int | None = None
    channel_id: int | None = None  # where it came from
    message_id: int | None = None  # readout: lets a deleted message leave the queue
    kind: str = "say"  # say | readout | preview
    notify: Notify | None = None  # tells the author when their request fails
    label: str = ""  # short text for /queue
    created_at: float = field(default_factory=time.monotonic)
    start_by: float | None = None  # monotonic time after which it is not worth starting (readout's max_delay)

    @property
    def urgent(self) -> bool:
        """Asked-for speech (not channel readout): synthesized before readout, in every guild."""
        return self.kind != "readout"
    request_id: str = field(default_factory=lambda: secrets.token_hex(4))


@dataclass
class Utterance:
    request: Request
    source: StreamingSource | None = None
    stream: Stream | None = None  # the engine's stream of its audio (which says how much to hold before playing)
    done: asyncio.Future | None = None
    skipped: bool = False
    error: str = ""
    ttfa: float | None = None
    prerolled: bool = False  # playback was held until the rest would keep ahead of the player
    held_s: float = 0.0  # how long it was held
    synth_started: float | None = None
    synth_seconds: float = 0.0  # from the guild's synthesis slot to the last chunk
    e2ee_wait_s: float = 0.0  # time held back until the call's E2EE (DAVE) was ready
    speed_factor: float = 1.0  # made this much faster than asked to catch up (set when its synthesis starts)
    expected_wait: float = 0.0  # when queued: seconds until it should start playing
    stats: PlayStats = field(default_factory=PlayStats)  # when its frames were sent (the driver's thread counts)
    stage: Stage = Stage.QUEUED
    stage_at: dict[str, float] = field(default_factory=dict)  # when it last entered each stage (monotonic)

    def overdue(self, now: float) -> bool:
        """Stale: readout not heard yet (not a word: one that gave way mid-way goes on) whose start_by has passed."""
        start_by = self.request.start_by
        return start_by is not None and now > start_by and not (self.source is not None and self.source.frames_read)

    def enter(self, stage: Stage) -> None:
        """Move to `stage` (TRANSITIONS); a move the table does not allow is logged as the bug it is, and made."""
        if stage is not self.stage and stage not in TRANSITIONS[self.stage]:
            log.error("request %s: %s -> %s is not a transition of an utterance", self.request.request_id,
                      self.stage.value, stage.value)
        self.stage = stage
        self.stage_at[stage.value] = time.monotonic()

    @property
    def speed(self) -> float:
        """The speed it is (or will be) made at."""
        return self.request.voice.speed * self.speed_factor

    @property
    def audio_seconds(self) -> float:
        return self.source.frames_written * 0.02 if self.source is not None else 0.0

    def progress(self) -> Progress:
        """How far its synthesis and its playing have come (for pacing)."""
        src = self.source
        return Progress(
            chars=len(self.request.text), speed=self.speed,
            produced_s=src.frames_written * FRAME_S if src is not None else 0.0,
            played_s=src.frames_read * FRAME_S if src is not None else 0.0,
            finished=src is not None and src.finished,
        )

    def describe(self, outcome: Outcome) -> str:
        """How it went, for the log."""
        ttfa = f"{self.ttfa:.3f}" if self.ttfa is not None else "-"
        underruns = self.source.underruns if self.source is not None else 0
        return (f"kind={self.request.kind} outcome={outcome.value} ttfa={ttfa} audio_s={self.audio_seconds:.2f} "
                f"synth_s={self.synth_seconds:.2f} chars={len(self.request.text)} underruns={underruns} "
                f"held_s={self.held_s:.2f}")

    @property
    def outcome(self) -> Outcome | None:
        return self.done.result() if self.done is not None and self.done.done() else None


def finish(utt: Utterance, outcome: Outcome) -> None:
    """End `utt`: settle `utt.done` with its outcome (once)."""
    utt.enter(Stage.ENDED)
    if utt.done is not None and not utt.done.done():
        utt.done.set_result(outcome)
