"""Pacer: how long an utterance will be and how long a new request would wait (when playing may start is the
engine's: Stream.hold_s)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from engine.realtime import hold_s, upcoming

FRAME_S = 0.02
SENTENCE_S = 2.0  # a request's audio is taken to come a sentence of about this long at a time (for its wait)
LENGTH_MARGIN = 1.25  # the rest of an utterance is assumed this much longer than estimated
MIN_SECONDS_PER_CHAR = 0.02
MAX_SECONDS_PER_CHAR = 0.3
LEARN_WEIGHT = 0.05  # weight of the newest utterance in the seconds-per-character average
CATCH_UP_FROM_S = 5.0  # speech waiting besides an utterance before it is made faster ...
CATCH_UP_FULL_S = 20.0  # ... and at which it is made as fast as the setting allows


def catch_up_speed(backlog_s: float, most: float) -> float:
    """Speed factor for an utterance made while `backlog_s` seconds of other speech wait in its channel: 1 up to
    CATCH_UP_FROM_S, rising linearly to `most` at CATCH_UP_FULL_S."""
    share = (backlog_s - CATCH_UP_FROM_S) / (CATCH_UP_FULL_S - CATCH_UP_FROM_S)
    return 1.0 + (max(most, 1.0) - 1.0) * min(1.0, max(0.0, share))


@dataclass(frozen=True)
class Progress:
    """One utterance as the speaker sees it: its text length, speed and the audio made and played so far."""

    chars: int
    speed: float = 1.0
    produced_s: float = 0.0
    played_s: float = 0.0
    finished: bool = False


class Pacer:
    """Audio length estimates learned from what was spoken, and a new request's wait at a guild's engine share.

    One per bot (SpeechService owns it); the queue asks it what a wait will be."""

    def __init__(self, seconds_per_char: float = 0.07) -> None:
        self.seconds_per_char = seconds_per_char  # at speed 1, learned from every utterance played

    def learn(self, chars: int, speed: float, audio_s: float) -> None:
        """Fold a finished utterance's real length into the estimate."""
        if chars < 10 or audio_s <= 0:
            return
        spc = min(MAX_SECONDS_PER_CHAR, max(MIN_SECONDS_PER_CHAR, audio_s * max(speed, 0.1) / chars))
        self.seconds_per_char += LEARN_WEIGHT * (spc - self.seconds_per_char)

    def length(self, p: Progress) -> float:
        """Estimated audio seconds of the whole utterance (at least what was already made)."""
        if p.finished:
            return p.produced_s
        return max(p.produced_s, p.chars * self.seconds_per_char / max(p.speed, 0.1))

    def rest(self, p: Progress) -> float:
        """Audio seconds still to be synthesized, with a margin."""
        if p.finished:
            return 0.0
        return max(0.0, self.length(p) * LENGTH_MARGIN - p.produced_s)

    def wait(self, ahead: Iterable[Progress], own: Progress, rate: float,
             synthesized_first: Iterable[Progress] | None = None) -> float:
        """Seconds until `own`, queued behind `ahead` (the one playing first), would start playing.

        The later of: the audio ahead played out, and the rest of `synthesized_first` (default: all of `ahead`)
        plus what `own` must buffer synthesized."""
        ahead = list(ahead)
        play = sum(max(0.0, self.length(p) - p.played_s) for p in ahead)
        if rate <= 0:
            return play
        unmade = sum(self.rest(p) for p in (ahead if synthesized_first is None else synthesized_first))
        units = upcoming(0.0, self.rest(own), SENTENCE_S, 1.0)
        own_first = min(self.length(own), hold_s(units, rate, units[0] / rate if units else 0.0))  # the engine's rule
        return max(play, (unmade + own_first) / rate)
