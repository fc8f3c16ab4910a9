"""The real-time model in one place: when each unit of a stream's work must start (its deadline, from its play-out on
the engine's clock), and the constants it rests on, each with its reason (docs/pacing.md)."""

from __future__ import annotations

from collections.abc import Callable, Hashable

from engine.base import Capacity

# A stream's first unit is due this long after its listener starts waiting: the goals users are promised for the
# first word of asked-for speech (/say, previews) and of channel readout (bench/load's under plan: 1.0 s and 2.0 s).
SAY_TTFA_S = 1.0
READOUT_TTFA_S = 2.0
# A unit may take this much longer to make than its measured mean, and an utterance be this much longer than its text
# says: a slot's speed with every slot busy varied by about +-12% between load runs on a 2-core EPYC (1.02-1.27 audio
# s per s), a unit's length by its text, and seconds per character by voice and language.
MAKING_MARGIN = 1.25
# Weight of the newest measure in the moving averages of making times and speeds: about the last ten units.
SPEED_WEIGHT = 0.1
# The load a stream is priced at: every slot busy while another key asked for a slot within ALONE_S (it may be back
# mid-utterance: at the load bench's 0.7x the next guild came within seconds, and a run priced alone ran dry when it
# came: 113 underrun frames per 100 utterances on a 2-core EPYC, 2026-12-06-sentences-and-windows.md), and then a
# stepping backend may follow its schedule for an idle engine (Kokoro's smaller first windows) ...
ALONE_S = 30.0
# ... and a key that asked for a slot within RECENT_KEYS_S still competes (a lull between one guild's units is not a
# free engine).
RECENT_KEYS_S = 5.0


class PlayOut:
    """One stream's play-out as the engine sees it: the audio handed out, what its listener heard, and so when its next
    unit must start.

    - Its first unit: when its listener started waiting plus the TTFA target of its class (asked-for speech or
      readout; a readout's never before a /say arriving now: asked-for speech goes first; one late is due now); with
      no listener waiting yet (made ahead of its turn), or held at its turn with its first audio made (what it is held
      for is made in what the deadlines leave: not yet admitted, it must not take slots from speech being heard),
      no deadline.
    - Later unit, heard: when the audio in hand runs out, less its making time and the longest unit's (`largest`: a
      slot may be taken by one that started just before, and units are not preempted), with MAKING_MARGIN; not heard
      now (ahead of its turn, or paused), no deadline.
    `heard` is the listener's (audio seconds heard, None while none waits); without one the stream plays from its
    first chunk on (the CLI, the engine server's clients). `making(next_s)` is the engine's measured time to make a
    unit of `next_s` audio seconds (0: unknown length)."""

    __slots__ = ("clock", "urgent", "heard", "making", "key", "largest", "waiting_since", "first", "made_s",
                 "next_s", "done")

    def __init__(self, clock: Callable[[], float], *, urgent: bool,
                 heard: Callable[[], float | None] | None = None,
                 making: Callable[[float], float] = lambda next_s: 0.0, key: Hashable = None,
                 largest: float = 0.0) -> None:
        self.clock = clock
        self.largest = largest  # the audio seconds of the longest unit (one may hold a slot when this is due)
        self.key = key  # whose (a guild, a client)
        self.urgent = urgent
        self.heard = heard
        self.making = making
        self.waiting_since: float | None = None if heard is not None else clock()
        self.first: float | None = None  # when the first audio was handed out
        self.made_s = 0.0
        self.next_s = 0.0  # audio seconds its next unit brings, as the backend says (0: unknown)
        self.done = False  # all of it made

    def add(self, seconds: float) -> None:
        """`seconds` more audio handed out."""
        if self.first is None:
            self.first = self.clock()
        self.made_s += seconds

    def _heard(self) -> float | None:
        """Audio seconds heard, None while no listener waits (noting when one starts to)."""
        if self.heard is None:
            return 0.0 if self.first is None else max(0.0, self.clock() - self.first)
        heard = self.heard()
        if heard is not None and self.waiting_since is None:
            self.waiting_since = self.clock()
        return heard

    def playing(self) -> bool:
        """Whether its listener is hearing it now and some of it is still to make (it needs its share of the engine)."""
        if self.done or self.first is None:
            return False
        if self.heard is None:
            return True
        heard = self.heard()
        return heard is not None and heard > 0

    def deadline(self, coming_s: float = 0.0, next_s: float = 0.0) -> float | None:
        """When the next unit (of `next_s` audio seconds, 0: unknown) must start, with `coming_s` more audio about to be
        handed out; None: no deadline now."""
        heard = self._heard()
        if heard is None:
            return None
        if self.first is not None and not coming_s and heard == 0 and self.heard is not None:
            return None  # held at its turn: not heard, its first audio made; it takes what deadlines leave
        if not (heard > 0 or (self.heard is None and self.first is not None)):  # its listener waits for it to start
            assert self.waiting_since is not None
            # one late for its target is due now, not before (its listener waits either way): a unit of speech being
            # heard whose deadline passed goes first, or it runs dry
            if self.urgent:
                return max(self.waiting_since + SAY_TTFA_S, self.clock())
            return max(self.waiting_since + READOUT_TTFA_S, self.clock() + SAY_TTFA_S)
        in_hand = max(0.0, self.made_s + coming_s - heard)
        return self.clock() + in_hand - MAKING_MARGIN * (self.making(next_s) + self.making(self.largest))


def upcoming(next_s: float, rest_s: float, largest: float, growth: float) -> list[float]:
    """The audio seconds of each unit still to come of a stream with `rest_s` to come: the next of `next_s`, each after
    up to `growth` times the one before and at most `largest` (BackendInfo.units, unit_growth)."""
    out, unit = [], min(next_s, largest) if next_s > 0 else largest
    while rest_s > 1e-9:
        out.append(min(unit, rest_s))
        rest_s -= out[-1]
        unit = min(largest, unit * growth)
    return out


def hold_s(units: list[float], share: float, next_making_s: float, blocked_s: float = 0.0) -> float:
    """Audio seconds a stream must have in hand before it starts playing, so that it never runs dry: each unit to come
    (`units`, audio seconds each: the next made in `next_making_s`, after up to `blocked_s` behind another stream's
    unit; the others at `share` audio seconds per second, one after another) is made before the audio before it runs
    out, its making with MAKING_MARGIN: in hand >= blocked + T_k + margin t_k - C_k for every unit k (t_k its making,
    T_k and C_k the making and the audio of the units before it). 0 once all of it is made; inf while it gets no share
    of the engine."""
    if not units:
        return 0.0
    if share <= 0:
        return float("inf")
    need, making, before = 0.0, blocked_s, 0.0
    for k, unit in enumerate(units):
        t = next_making_s if k == 0 else unit / share
        need = max(need, making + MAKING_MARGIN * t - before)
        making += t
        before += unit
    return need


def stream_hold_s(cap: Capacity, next_s: float, unit_s: float, rest_s: float, largest: float,
                  growth: float) -> float:
    """hold_s for a stream at the load `cap` (its key's view of the engine), about `rest_s` audio seconds still to come
    (an estimate: with MAKING_MARGIN): its next unit of `next_s` audio seconds (0: unknown, a run's first: a whole
    unit at the speed, at least `unit_s`, the measured mean time to a segment's first audio) at a later step's speed,
    the longest unit's making as blocking while more keys compete than there are slots or this key has another stream
    under way, the others at the share the streams playing leave it, at the speed over all units; 0 before any
    measure."""
    speed = cap.next_per_second or cap.audio_per_second
    if speed <= 0:
        return 0.0
    units = upcoming(next_s, max(next_s, rest_s * MAKING_MARGIN), largest, growth)
    if not units:
        return 0.0
    making = next_s / speed if next_s > 0 else max(unit_s, units[0] / speed)
    # a slot freed by the longest unit (the longest window, or a run's first with its features): while more keys
    # compete than there are slots, or another stream of this key (one made ahead) may hold its key's slot when this
    # one's next unit is due
    contended = cap.other_keys + 1 > cap.slots or cap.key_streams > cap.per_key
    blocked = max(making, largest / speed, unit_s) if contended else 0.0
    # the schedulability test: each stream playing takes a slot 1/blend of the time (its units come first by their
    # deadlines; `blend`: a slot's speed over every unit, a run's first with its features included); this one gets
    # what they leave of the slots (with the margin), at most its key's; none left: it waits for one to end
    blend = cap.audio_per_second or speed
    share = blend * max(0.0, min(float(cap.per_key), cap.slots / MAKING_MARGIN - cap.heard_others / blend))
    return hold_s(units, share, making, blocked)
