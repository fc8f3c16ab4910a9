"""Pacer: wait estimates, learned lengths, the catch-up speed (the start rule is the engine's: test_realtime.py)."""

from __future__ import annotations

import pytest

from bot.speech.queue.pacing import CATCH_UP_FROM_S, CATCH_UP_FULL_S, Pacer, Progress, catch_up_speed
from engine.base import Capacity


def test_length_estimates_are_learned_from_what_was_spoken():
    pacer = Pacer(seconds_per_char=0.07)
    for _ in range(200):
        pacer.learn(chars=100, speed=1.0, audio_s=5.0)
    assert pacer.seconds_per_char == pytest.approx(0.05, rel=0.01)
    assert pacer.length(Progress(chars=100, speed=2.0)) == pytest.approx(2.5, rel=0.02)
    pacer.learn(chars=3, speed=1.0, audio_s=9.0)  # too short to teach anything
    assert pacer.seconds_per_char == pytest.approx(0.05, rel=0.01)


def test_wait_is_the_later_of_playing_out_and_synthesizing_what_is_ahead():
    pacer = Pacer(seconds_per_char=0.1)
    playing = Progress(chars=100, produced_s=10.0, played_s=4.0, finished=True)  # 6 s left to play
    queued = Progress(chars=50)  # 5 s, nothing made
    own = Progress(chars=20)
    fast = pacer.wait([playing, queued], own, rate=100.0)
    assert fast == pytest.approx(6.0 + 5.0)
    slow = pacer.wait([playing, queued], own, rate=0.5)
    assert slow > (5.0 * 1.25) / 0.5  # the queued one's audio must be made first, at half real time
    assert pacer.wait([], own, rate=0.0) == 0.0


def test_share_of_the_engine_follows_the_other_keys():
    alone = Capacity(slots=2, running=0, waiting_others=0, audio_per_second=10.0, other_keys=0, per_key=1)
    crowded = Capacity(slots=2, running=2, waiting_others=9, audio_per_second=10.0, other_keys=9, per_key=1)
    assert alone.share() == 10.0  # one segment at a time for a key
    assert crowded.share() == pytest.approx(2.0)  # two slots shared by ten keys


def test_catch_up_speed_rises_with_the_backlog_within_the_setting():
    assert catch_up_speed(0.0, 1.3) == 1.0 and catch_up_speed(CATCH_UP_FROM_S, 1.3) == 1.0
    middle = catch_up_speed((CATCH_UP_FROM_S + CATCH_UP_FULL_S) / 2, 1.3)
    assert middle == pytest.approx(1.15)
    assert catch_up_speed(CATCH_UP_FULL_S, 1.3) == pytest.approx(1.3) == catch_up_speed(600.0, 1.3)
    assert catch_up_speed(600.0, 1.0) == 1.0 == catch_up_speed(600.0, 0.5)  # off, and never slower
