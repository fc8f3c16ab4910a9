"""Pacer: the start rule keeps a simulated player fed at any engine share, wait estimates, learned lengths."""

from __future__ import annotations

import math

import pytest

from bot.speech.queue.pacing import (
    BURST_S,
    CATCH_UP_FROM_S,
    CATCH_UP_FULL_S,
    UNIT_MARGIN,
    Pacer,
    Progress,
    catch_up_speed,
)
from engine.base import Capacity


def simulate(pacer: Pacer, audio_s: float, chars: int, rate: float) -> tuple[float, int]:
    """An utterance of `audio_s` arriving a unit at a time (the pacer's units) at `rate` audio s per s, played when
    the pacer allows: (seconds until playback started, 20 ms frames the player found empty afterwards)."""
    sentences, left = [], audio_s
    while left > 1e-9:
        sentences.append(min(left, pacer.units[min(len(sentences), len(pacer.units) - 1)]))
        left -= sentences[-1]
    arrivals, t, made = [], 0.0, 0.0
    for s in sentences:  # a sentence's audio appears at once, when all of it is made
        t += s / rate
        made += s
        arrivals.append((t, made))
    start = None
    for at, made in arrivals:  # the speaker looks again whenever audio arrives
        done = made >= audio_s - 1e-9
        if pacer.may_start(Progress(chars, produced_s=made, finished=done), made, rate):
            start = at
            break
    assert start is not None
    dry = 0
    for frame in range(int(round(audio_s / 0.02))):
        needed_at = start + frame * 0.02
        available = max((m for at, m in arrivals if at <= needed_at + 1e-9), default=0.0)
        dry += available < (frame + 1) * 0.02 - 1e-9
    return start, dry


KOKORO_WINDOWS = (0.8, 1.2, 1.8, 2.0)  # what kokoro/backend.py declares (BackendInfo.units) ...
KOKORO_ALONE = ((0.5, 0.5, 0.6625, 0.875, 1.1625, 1.55, 2.0),)  # ... and for a run started alone (alt_units)


@pytest.mark.parametrize("units", [(BURST_S,), KOKORO_WINDOWS], ids=["sentences", "windows"])
@pytest.mark.parametrize("rate", [0.3, 0.6, 0.9, 1.1, 1.5, 2.2, 10.0])
@pytest.mark.parametrize("audio_s", [1.5, 6.0, 20.0])
def test_playback_that_starts_never_runs_dry(rate, audio_s, units):
    pacer = Pacer(seconds_per_char=0.07, units=units)
    chars = int(audio_s / 0.07)
    start, dry = simulate(pacer, audio_s, chars, rate)
    assert dry == 0, (start, dry)


def test_a_fast_engine_starts_at_the_first_sentence_and_a_slow_one_waits():
    pacer = Pacer(seconds_per_char=0.07)
    fast, _ = simulate(pacer, 20.0, int(20 / 0.07), rate=10.0)
    slow, _ = simulate(pacer, 20.0, int(20 / 0.07), rate=0.5)
    assert fast == pytest.approx(2.0 / 10.0)  # the first sentence
    assert slow > 20.0  # at half real time most of it is made first
    windows = Pacer(seconds_per_char=0.07, units=KOKORO_WINDOWS)
    assert simulate(windows, 20.0, int(20 / 0.07), rate=2.2)[0] == pytest.approx(0.8 / 2.2)  # the first window


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
    assert pacer.buffer_needed(own, 0.0) == math.inf


def test_share_of_the_engine_follows_the_other_keys():
    alone = Capacity(slots=2, running=0, waiting_others=0, audio_per_second=10.0, other_keys=0, per_key=1)
    crowded = Capacity(slots=2, running=2, waiting_others=9, audio_per_second=10.0, other_keys=9, per_key=1)
    assert alone.share() == 10.0  # one segment at a time for a key
    assert crowded.share() == pytest.approx(2.0)  # two slots shared by ten keys
    assert BURST_S > 0


def test_catch_up_speed_rises_with_the_backlog_within_the_setting():
    assert catch_up_speed(0.0, 1.3) == 1.0 and catch_up_speed(CATCH_UP_FROM_S, 1.3) == 1.0
    middle = catch_up_speed((CATCH_UP_FROM_S + CATCH_UP_FULL_S) / 2, 1.3)
    assert middle == pytest.approx(1.15)
    assert catch_up_speed(CATCH_UP_FULL_S, 1.3) == pytest.approx(1.3) == catch_up_speed(600.0, 1.3)
    assert catch_up_speed(600.0, 1.0) == 1.0 == catch_up_speed(600.0, 0.5)  # off, and never slower


def test_the_next_unit_the_engine_names_is_what_the_hold_covers_and_its_schedule_goes_on():
    pacer = Pacer(seconds_per_char=0.07, units=KOKORO_WINDOWS, alt_units=KOKORO_ALONE)
    first = Progress(chars=50, produced_s=0.5, next_s=0.75)  # (a next unit no schedule holds: `units` on)
    assert pacer.buffer_needed(first, rate=1.9) == pytest.approx(UNIT_MARGIN * 0.75 / 1.9)
    assert pacer.may_start(first, 0.5, rate=1.9)  # the first window covers making the second: play it now
    unknown = Progress(chars=50, produced_s=0.5)  # without it, the schedule's second unit (1.2 s) is assumed
    assert not pacer.may_start(unknown, 0.5, rate=1.9)
    # a run started alone names its second 40 frames: the alone schedule goes on from there (53, 70 ... frames), not
    # the loaded one's 1.2 s windows
    alone = Progress(chars=50, produced_s=0.36, next_s=0.5)
    assert pacer._after(0.5)[:2] == [0.6625, 0.875] and pacer._after(1.2)[:2] == [1.8, 2.0]
    assert pacer.may_start(alone, 0.36, rate=2.0)
    assert not Pacer(seconds_per_char=0.07, units=KOKORO_WINDOWS).may_start(alone, 0.36, rate=2.0)


def test_the_next_window_of_a_run_under_way_is_priced_at_a_later_steps_speed():
    pacer = Pacer(seconds_per_char=0.07, units=KOKORO_WINDOWS, alt_units=KOKORO_ALONE)
    first = Progress(chars=60, produced_s=0.36, next_s=0.5)  # a first window made (its lead cut), 40 frames next
    # at the blend of all steps (a run's first makes its features too) the hold waits for the next window ...
    assert not pacer.may_start(first, 0.36, rate=1.5)
    # ... which, a later step, is made faster: the first window covers it
    assert pacer.may_start(first, 0.36, rate=1.5, next_rate=2.3)
    need = pacer.buffer_needed(first, rate=1.5, next_rate=2.3)
    assert need == pytest.approx(max(UNIT_MARGIN * 0.5 / 2.3, 0.5 / 2.3 + UNIT_MARGIN * 0.6625 / 1.5 - 0.5,
                                     0.5 / 2.3 + 0.6625 / 1.5 + UNIT_MARGIN * 0.875 / 1.5 - 1.1625), rel=1e-6)
    ended = Progress(chars=60, produced_s=0.36)  # no next unit named: all of it at the blend
    assert pacer.buffer_needed(ended, 1.5, 2.3) == pacer.buffer_needed(ended, 1.5)
