"""Pacer: when an utterance may start playing without running dry, and how long a new request would wait."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

FRAME_S = 0.02
LENGTH_MARGIN = 1.25  # the rest of an utterance is assumed this much longer than estimated
BURST_S = 2.0  # an engine that does not say how its audio comes: a sentence at a time, about this long
UNIT_MARGIN = 1.25  # a unit takes up to this much longer to make than the guild's share says (the load varies)
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
    next_s: float = 0.0  # audio seconds its next unit brings, as the engine says (0: unknown)


class Pacer:
    """Audio length estimates learned from what was spoken, and start and wait rules at a guild's engine share.

    One per bot (SpeechService owns it); speakers ask it when to start and what a wait will be."""

    def __init__(self, seconds_per_char: float = 0.07, units: tuple[float, ...] = (BURST_S,),
                 alt_units: tuple[tuple[float, ...], ...] = ()) -> None:
        self.seconds_per_char = seconds_per_char  # at speed 1, learned from every utterance played
        # audio seconds each unit of a stream brings at once, in order, the last repeating (BackendInfo.units: Piper
        # a sentence, Kokoro its windows growing)
        self.units = units
        self.alt_units = alt_units  # other schedules, followed from a next unit they hold (BackendInfo.alt_units)

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
        return max(self.length(p) * LENGTH_MARGIN - p.produced_s, min(self.units[0], self.length(p)))

    def buffer_needed(self, p: Progress, rate: float, next_rate: float = 0.0) -> float:
        """Seconds of audio to hold before playing so the rest keeps ahead of the player at `rate` (the unit the engine
        names as next at `next_rate` when given: the next window of a run under way has no features to make first).

        The rest R comes in units (self.units, after those already made), unit j at r_j audio seconds per second: the
        player never runs dry when, for each unit k, what was in hand B plus the units before it last until it is
        made: B >= T_k + m c_k / r_k - C_k (c_k its audio, C_k the audio of the units before it and T_k their making,
        m UNIT_MARGIN). inf: synthesize it all first."""
        rest = self.rest(p)
        if rest <= 0:
            return 0.0
        if rate <= 0:
            return math.inf
        need, before, making = 0.0, 0.0, 0.0
        for k, unit in enumerate(self._units_after(p, rest)):
            r = next_rate if k == 0 and p.next_s > 0 and next_rate > 0 else rate
            need = max(need, making + UNIT_MARGIN * unit / r - before)
            before += unit
            making += unit / r
        return need

    def _units_after(self, p: Progress, rest: float) -> list[float]:
        """The audio of each unit still to come, until `rest` is covered: the next as the engine says and the schedule
        on from there (the first schedule holding that unit, its last place; else `units` from its first unit as
        long), else the schedule after what was made."""
        if p.next_s > 0:
            later = self._after(p.next_s)
            out = [min(rest, p.next_s)]
            rest -= out[0]
            while rest > 1e-9:
                out.append(min(rest, later[min(len(out) - 1, len(later) - 1)]))
                rest -= out[-1]
            return out
        made = p.produced_s
        out, at, k = [], 0.0, 0
        while rest > 1e-9:
            unit = self.units[min(k, len(self.units) - 1)]
            k += 1
            if at + unit <= made + 1e-9:
                at += unit
                continue
            piece = min(rest, unit - max(0.0, made - at))
            at += unit
            out.append(piece)
            rest -= piece
        return out

    def _after(self, next_s: float) -> list[float]:
        """The units a schedule brings after its unit of `next_s` audio seconds."""
        for units in (self.units, *self.alt_units):
            held = [i for i, u in enumerate(units) if abs(u - next_s) < 1e-6]
            if held:
                return [*units[held[-1] + 1:]] or [units[-1]]
        k = next((i for i, u in enumerate(self.units) if u >= next_s - 1e-6), len(self.units) - 1)
        return [*self.units[k + 1:]] or [self.units[-1]]

    def may_start(self, p: Progress, buffered_s: float, rate: float, next_rate: float = 0.0) -> bool:
        """Whether an utterance with `buffered_s` in hand may start playing at `rate` (its next unit at `next_rate`):
        all of it made, or enough."""
        return p.finished or buffered_s >= self.buffer_needed(p, rate, next_rate)

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
        own_first = min(self.length(own), self.buffer_needed(own, rate))
        return max(play, (unmade + own_first) / rate)
