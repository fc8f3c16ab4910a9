"""SpeechQueue: one guild's utterances in the order they play: asked-for speech before readout, members' turns."""

from __future__ import annotations

import collections
from collections.abc import Iterator
from typing import TYPE_CHECKING

from bot.speech.pacing import Progress

if TYPE_CHECKING:
    from bot.speech.utterance import Request, Utterance

# a /say longer than this (about 10 s of speech) gives another member's /say a turn at its next sentence
TURN_CHARS = 150


class SpeechQueue:
    """What plays now (`current`) and what waits, and where a new request goes; the speaker plays it."""

    def __init__(self) -> None:
        self.current: Utterance | None = None
        self._waiting: collections.deque[Utterance] = collections.deque()
        self._turns: list[Utterance] = []  # members' /say taking their turn in the long /say playing now

    def __len__(self) -> int:
        return len(self._waiting)

    def __iter__(self) -> Iterator[Utterance]:
        return iter(list(self._waiting))

    def add(self, utt: Utterance) -> None:
        """Queue `utt` where it goes; when it takes a member's turn, remember it (it goes before the rest)."""
        self._waiting.insert(self.place_of(utt.request), utt)
        if self.takes_turn(utt.request):
            self._turns.append(utt)

    def place_of(self, request: Request) -> int:
        """Asked-for speech (/say, previews) goes ahead of queued channel readout, behind other asked-for speech;
        a member's /say taking its turn in a long /say goes first (behind others taking theirs)."""
        if self.takes_turn(request):
            return self._after_turns()
        return self._front_of_readout() if request.urgent else len(self._waiting)

    def gives_way_to(self, request: Request) -> bool:
        """Whether what is playing now pauses at its next segment boundary for `request`: channel readout for any
        asked-for speech, a long /say for another member's /say."""
        cur = self.current
        ready = request.urgent and cur is not None and cur.source is not None
        return ready and (not cur.request.urgent or self.takes_turn(request))

    def takes_turn(self, request: Request) -> bool:
        """Members take turns: another member's /say plays at the next sentence of a long /say, then its rest."""
        cur = self.current
        return (cur is not None and cur.request.kind == request.kind == "say"
                and cur.request.author_id != request.author_id and len(cur.request.text) > TURN_CHARS)

    def played(self, utt: Utterance, *, gave_way: bool) -> None:
        """`utt` stopped playing; when it gave way, its rest goes right after the turns it gave (a /say) or
        before other readout (a readout)."""
        turns, self._turns = self._after_turns(), []
        if gave_way:
            self._waiting.insert(turns if utt.request.urgent else self._front_of_readout(), utt)

    def ahead_of(self, request: Request) -> list[Utterance]:
        """What plays before `request` if it were queued now (what plays now first)."""
        now = [self.current] if self.current is not None else []
        return now + list(self._waiting)[: self.place_of(request)]

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

    def pop(self) -> Utterance:
        return self._waiting.popleft()

    def remove(self, utt: Utterance) -> None:
        self._waiting.remove(utt)

    def _after_turns(self) -> int:
        """Just behind the queued /say of members taking their turn in the one playing now (0 when none)."""
        return max((i + 1 for i, u in enumerate(self._waiting) if u in self._turns), default=0)

    def _front_of_readout(self) -> int:
        return next((i for i, u in enumerate(self._waiting) if not u.request.urgent), len(self._waiting))

    def progress_ahead_of(self, request: Request) -> tuple[list[Progress], list[Progress] | None]:
        """How far what would play before `request` has come (for its expected wait), and of that what is
        synthesized in the same slots as it (asked-for speech: only asked-for speech; readout: None, all of it)."""
        utts = self.ahead_of(request)
        ahead = [u.progress() for u in utts]
        to_boundary = None
        if self.gives_way_to(request):  # what plays now gives way (not heard yet: at once)
            src = self.current.source
            to_boundary = src.seconds_to_boundary() if src.frames_read else 0.0
        if to_boundary is not None:  # what plays now gives way there: only that much of it is ahead
            ahead[0] = Progress(chars=0, produced_s=to_boundary, finished=True)
        # asked-for speech is synthesized in its own slots, urgent in the engine: readout ahead does not delay it
        first = [p for u, p in zip(utts, ahead) if u.request.urgent] if request.urgent else None
        return ahead, first
