"""SpeechQueue: one guild's utterances in the order they play: asked-for speech before readout, members' turns."""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import Iterator

from bot.speech.queue.pacing import Pacer, Progress
from bot.speech.queue.utterance import Late, QueueFull, Request, Stage, Utterance

# a /say longer than this (about 10 s of speech) gives another member's /say a turn at its next sentence
TURN_CHARS = 150


class SpeechQueue:
    """What plays now (`current`) and what waits: where a new request goes, whether it is admitted, what gives way
    to it; the speaker plays it."""

    def __init__(self, max_len: int = 20) -> None:
        self.max_len = max_len  # the most that wait (a guild may set fewer)
        self.current: Utterance | None = None
        self._waiting: collections.deque[Utterance] = collections.deque()
        self._turns: list[Utterance] = []  # members' /say taking their turn in the long /say playing now

    def __len__(self) -> int:
        return len(self._waiting)

    def __iter__(self) -> Iterator[Utterance]:
        return iter(list(self._waiting))

    def admit(self, request: Request, pacer: Pacer, rate: float, *, limit: int | None = None,
              max_delay: float = float("inf")) -> tuple[Utterance, bool]:
        """Queue `request` where it goes, as an utterance told when it should start (expected_wait: pacing's model of
        what plays before it at this guild's `rate`), and whether what plays now gives way to it (at its next
        sentence). Late if the wait is past `max_delay` with anything queued or playing (later, readout not started by
        then is stale); QueueFull at the bound (ours, or `limit`).

        Where it goes: asked-for speech (/say, previews) ahead of queued channel readout, behind other asked-for
        speech; a member's /say taking its turn in a long /say first (behind others taking theirs). What gives way:
        channel readout to any asked-for speech, a long /say to another member's /say."""
        cur, urgent = self.current, request.urgent
        turn = self._takes_turn(request)
        gives_way = urgent and cur is not None and cur.source is not None and (not cur.request.urgent or turn)
        place = self._after_turns() if turn else self._front_of_readout() if urgent else len(self._waiting)
        before = ([cur] if cur is not None else []) + list(self._waiting)[:place]
        ahead = [u.progress() for u in before]
        to_boundary = None
        if gives_way and cur is not None and cur.source is not None:
            to_boundary = cur.source.seconds_to_boundary() if cur.source.frames_read else 0.0
        if to_boundary is not None:  # what plays now gives way there (not heard yet: at once): only that is ahead
            ahead[0] = Progress(chars=0, produced_s=to_boundary, finished=True)
        # asked-for speech is synthesized in its own slots, urgent in the engine: readout ahead does not delay it
        first = [p for u, p in zip(before, ahead) if u.request.urgent] if urgent else None
        wait = pacer.wait(ahead, Progress(chars=len(request.text), speed=request.voice.speed), rate, first)
        if wait > max_delay and (cur is not None or self._waiting):
            raise Late(wait)
        bound = min(self.max_len, limit) if limit else self.max_len
        if len(self._waiting) >= bound:
            raise QueueFull(f"The queue is full ({bound} waiting). Try again when it has moved on.")
        if not urgent:
            request.start_by = request.created_at + max_delay
        utt = Utterance(request, done=asyncio.get_running_loop().create_future(), expected_wait=wait)
        self._waiting.insert(place, utt)
        if turn:  # it goes before the rest of the turns' queue
            self._turns.append(utt)
        return utt, gives_way

    def _takes_turn(self, request: Request) -> bool:
        """Members take turns: another member's /say plays at the next sentence of a long /say, then its rest."""
        cur = self.current
        return (cur is not None and cur.request.kind == request.kind == "say"
                and cur.request.author_id != request.author_id and len(cur.request.text) > TURN_CHARS)

    def played(self, utt: Utterance, *, gave_way: bool) -> None:
        """`utt` stopped playing; when it gave way, its rest goes right after the turns it gave (a /say) or
        before other readout (a readout)."""
        turns, self._turns = self._after_turns(), []
        if gave_way:
            utt.enter(Stage.QUEUED)
            self._waiting.insert(turns if utt.request.urgent else self._front_of_readout(), utt)

    def position(self, utt: Utterance) -> int:
        """0 while playing, 1.. while waiting, -1 when gone."""
        if utt is self.current:
            return 0
        try:
            return self._waiting.index(utt) + 1
        except ValueError:
            return -1

    def first(self, n: int) -> list[Utterance]:
        return list(self._waiting)[:n]

    def next_due(self) -> tuple[Utterance | None, list[Utterance]]:
        """Take the next utterance whose turn it is, and those passed over on the way: overdue readout (its turn came
        past its start_by; one that gave way mid-way is never stale: the channel heard its start)."""
        stale: list[Utterance] = []
        while self._waiting:
            utt = self._waiting.popleft()
            if not utt.overdue(time.monotonic()):
                return utt, stale
            stale.append(utt)
        return None, stale

    def drop_stale(self, pacer: Pacer, rate: float) -> list[Utterance]:
        """Take out the queued readout not started yet that can no longer start by its start_by, by pacing's model
        of what plays before it at `rate` (with nothing ahead there is nothing to catch up), and return it."""
        now = time.monotonic()
        before: list[Utterance] = [self.current] if self.current is not None else []
        dropped: list[Utterance] = []
        for utt in list(self._waiting):
            start_by = utt.request.start_by
            late = start_by is not None and utt.source is None and before and (
                utt.overdue(now) or now + pacer.wait([u.progress() for u in before], utt.progress(), rate) > start_by)
            if late:
                self._waiting.remove(utt)
                dropped.append(utt)
                continue
            before.append(utt)
        return dropped

    def pop(self) -> Utterance:
        return self._waiting.popleft()

    def remove(self, utt: Utterance) -> None:
        self._waiting.remove(utt)

    def _after_turns(self) -> int:
        """Just behind the queued /say of members taking their turn in the one playing now (0 when none)."""
        return max((i + 1 for i, u in enumerate(self._waiting) if u in self._turns), default=0)

    def _front_of_readout(self) -> int:
        return next((i for i, u in enumerate(self._waiting) if not u.request.urgent), len(self._waiting))
