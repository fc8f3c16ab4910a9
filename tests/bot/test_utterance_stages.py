"""An utterance's stages (utterance.TRANSITIONS) as the real queue, look-ahead and player move it, with a fake engine,
connection and sink (test doubles): the path a /say takes, giving way, and a move the table does not allow."""

from __future__ import annotations

import asyncio
import logging

import pytest

from bot.speech.playback.driver import VoiceDriver
from bot.speech.playback.player import Player
from bot.speech.queue.pacing import Pacer
from bot.speech.queue.queue_policy import SpeechQueue
from bot.speech.queue.utterance import TRANSITIONS, Outcome, Request, Stage, Utterance, finish
from tests.bot.test_lookahead import FakeEngine, lookahead
from tests.bot.test_player import FakeConnection, ample, never_changes


@pytest.fixture
def moves(monkeypatch: pytest.MonkeyPatch) -> list[Stage]:
    """Every stage an utterance enters, in order."""
    seen: list[Stage] = []
    enter = Utterance.enter

    def recording(self: Utterance, stage: Stage) -> None:
        seen.append(stage)
        enter(self, stage)
    monkeypatch.setattr(Utterance, "enter", recording)
    return seen


def test_the_table_ends_everywhere_and_nothing_leaves_the_end() -> None:
    assert set(TRANSITIONS) == set(Stage)
    assert all(Stage.ENDED in TRANSITIONS[s] for s in Stage if s is not Stage.ENDED)
    assert TRANSITIONS[Stage.ENDED] == frozenset()
    assert Stage.PLAYING not in TRANSITIONS[Stage.QUEUED] | TRANSITIONS[Stage.SYNTHESIZING] | TRANSITIONS[Stage.HELD]


def test_a_say_is_queued_synthesized_held_waits_for_e2ee_plays_and_ends(moves, caplog) -> None:
    async def go() -> tuple[Utterance, Outcome | None]:
        q, driver = SpeechQueue(), VoiceDriver()
        utt, _ = q.admit(Request("Hello there."), Pacer(), 1.0)
        q.current = q.pop()
        lookahead(q, FakeEngine(), []).start()
        player = Player(1, FakeConnection(), driver, Pacer(),  # type: ignore[arg-type]
                        capacity=ample, load_changed=never_changes, e2ee_wait_s=0.5)
        try:
            outcome = await asyncio.wait_for(player.play(utt), 10.0)
        finally:
            driver.close()
        assert outcome is not None
        finish(utt, outcome)
        return utt, outcome
    with caplog.at_level(logging.ERROR):
        utt, outcome = asyncio.run(go())
    assert outcome is Outcome.PLAYED and utt.stage is Stage.ENDED
    assert moves == [Stage.SYNTHESIZING, Stage.HELD, Stage.WAITING_E2EE, Stage.PLAYING, Stage.ENDED]
    assert not [r for r in caplog.records if "transition" in r.getMessage()]


def test_what_gave_way_is_queued_again_and_its_turn_holds_it_again(caplog) -> None:
    async def go() -> list[Stage]:
        q = SpeechQueue()
        utt, _ = q.admit(Request("A long readout.", kind="readout"), Pacer(), 1.0)
        q.current = q.pop()
        for stage in (Stage.SYNTHESIZING, Stage.HELD, Stage.WAITING_E2EE, Stage.PLAYING):
            utt.enter(stage)
        q.current = None
        q.played(utt, gave_way=True)
        after = [utt.stage]
        utt.enter(Stage.HELD)  # its turn again: the audio it made is in hand
        return [*after, utt.stage]
    with caplog.at_level(logging.ERROR):
        assert asyncio.run(go()) == [Stage.QUEUED, Stage.HELD]
    assert not caplog.records


def test_a_move_the_table_does_not_allow_is_logged_as_a_bug(caplog) -> None:
    utt = Utterance(Request("Hi."))
    with caplog.at_level(logging.ERROR):
        utt.enter(Stage.PLAYING)  # never without being held and waiting for the call's E2EE
        utt.enter(Stage.ENDED)
        utt.enter(Stage.ENDED)  # ending twice is no move
        utt.enter(Stage.QUEUED)
    errors = [r.getMessage() for r in caplog.records]
    assert len(errors) == 2 and "queued -> playing" in errors[0] and "ended -> queued" in errors[1]
