"""SpeechQueue on its own: where a request goes, what gives way to it, admission by wait and bound, stale turns."""

from __future__ import annotations

import asyncio
import time

import pytest

from bot.speech.queue.pacing import Pacer
from bot.speech.queue.queue_policy import TURN_CHARS, SpeechQueue
from bot.speech.queue.utterance import Late, QueueFull, Request, Utterance

LONG = "A sentence of a long message goes on for a while. " * 4  # over TURN_CHARS


def request(text: str = "Hello there.", kind: str = "say", author: int = 1) -> Request:
    return Request(text=text, kind=kind, author_id=author)


def admit(q: SpeechQueue, req: Request, **kw: float) -> tuple[Utterance, bool]:
    return q.admit(req, Pacer(), 1.0, **kw)  # type: ignore[arg-type]


def texts(q: SpeechQueue) -> list[str]:
    return [u.request.text for u in q]


@pytest.fixture
def loop() -> asyncio.AbstractEventLoop:
    lp = asyncio.new_event_loop()
    asyncio.set_event_loop(lp)
    yield lp
    lp.close()


def run(loop: asyncio.AbstractEventLoop, fn):  # admit needs a running loop (its future)
    async def go():
        return fn()
    return loop.run_until_complete(go())


def test_asked_for_speech_goes_before_queued_readout_and_behind_other_asked_for(loop) -> None:
    q = SpeechQueue()

    def fill():
        admit(q, request("r1", "readout"))
        admit(q, request("r2", "readout"))
        admit(q, request("s1"))
        admit(q, request("p1", "preview"))
        return texts(q)
    assert run(loop, fill) == ["s1", "p1", "r1", "r2"]


def test_readout_playing_gives_way_to_a_say_but_not_to_more_readout(loop) -> None:
    q = SpeechQueue()

    def go():
        cur, _ = admit(q, request("now", "readout"))
        q.pop()
        q.current = cur
        cur.source = object.__new__(_Src)  # a source that has started (heard): gives way at its next boundary
        _, readout_gives = admit(q, request("more", "readout"))
        _, say_gives = admit(q, request("asked"))
        return readout_gives, say_gives
    assert run(loop, go) == (False, True)


def test_a_member_takes_a_turn_in_a_long_say_and_its_rest_plays_right_after(loop) -> None:
    q = SpeechQueue()
    assert len(LONG) > TURN_CHARS

    def go():
        cur, _ = admit(q, request(LONG, author=1))
        q.pop()
        q.current = cur
        cur.source = object.__new__(_Src)
        admit(q, request("own later", author=1))  # the same author: no turn, behind
        _, gives = admit(q, request("turn", author=2))
        order = texts(q)
        q.played(cur, gave_way=True)
        return gives, order, texts(q)
    gives, order, after = run(loop, go)
    assert gives and order == ["turn", "own later"]
    assert after == ["turn", LONG, "own later"]  # its rest right after the turn, before the author's own later /say


def test_admission_refuses_past_max_delay_only_with_something_ahead_and_at_the_bound(loop) -> None:
    q = SpeechQueue(max_len=2)

    def go():
        first, _ = admit(q, request(LONG * 3), max_delay=0.0)  # nothing ahead: admitted whatever the wait
        with pytest.raises(Late):
            admit(q, request("late"), max_delay=0.0)
        admit(q, request("second"))
        with pytest.raises(QueueFull):
            admit(q, request("third"))
        q.pop()
        with pytest.raises(QueueFull):  # a guild's own bound, below the queue's
            q.admit(request("fourth"), Pacer(), 1.0, limit=1)
        return first.expected_wait > 0.0, texts(q)  # its own wait was past max_delay: admitted all the same
    assert run(loop, go) == (True, ["second"])


def test_readout_past_its_start_by_is_stale_when_its_turn_comes_and_a_say_never_is(loop) -> None:
    q = SpeechQueue()

    def go():
        admit(q, request("old", "readout"), max_delay=0.0)
        admit(q, request("fresh", "readout"), max_delay=60.0)
        admit(q, request("asked"))
        time.sleep(0.01)
        got = []
        while True:
            nxt, stale = q.next_due()
            got.append(((nxt.request.text if nxt else None), [u.request.text for u in stale]))
            if nxt is None:
                return got
    assert run(loop, go) == [("asked", []), ("fresh", ["old"]), (None, [])]


def test_position_counts_from_what_plays(loop) -> None:
    q = SpeechQueue()

    def go():
        a, _ = admit(q, request("a"))
        b, _ = admit(q, request("b"))
        q.current = q.pop()
        gone = Utterance(request("gone"))
        return q.position(a), q.position(b), q.position(gone)
    assert run(loop, go) == (0, 1, -1)


class _Src:
    """A source that has played some frames: what the queue asks of what plays now."""

    frames_read = 10
    frames_written = 50
    finished = False
    next_s = 0.0

    def seconds_to_boundary(self) -> float:
        return 0.4
