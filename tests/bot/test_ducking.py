"""Ducking: the level falls by the setting within a ramp of ~50 ms of a member's packet, holds while they speak,
rises 400 ms after their last packet; never a step; off leaves frames untouched."""

from __future__ import annotations

import numpy as np
import pytest

from bot.speech.playback.ducking import HOLD_S, RAMP_S, Ducking

FRAME = np.full((960, 2), 10_000, dtype="<i2").tobytes()  # a constant level: the gain is read off each sample


def gains(ducking: Ducking, now: float, frames: int) -> np.ndarray:
    """The gain of each sample over `frames` consecutive frames shaped at `now`, 20 ms apart."""
    out = [np.frombuffer(ducking.shape(FRAME, now + 0.02 * i), dtype="<i2")[::2] / 10_000 for i in range(frames)]
    return np.concatenate(out)


def test_the_level_falls_by_the_setting_in_a_ramp_and_rises_after_the_hold():
    d = Ducking(depth_db=10)
    d.heard(1, 100.0)
    fall = gains(d, 100.0, 5)
    floor = 10 ** (-10 / 20)
    ramp = int(RAMP_S * 48_000)
    assert fall[0] < 1.0 and fall[ramp - 2] > floor and abs(fall[ramp] - floor) < 1e-3
    assert abs(fall[-1] - floor) < 1e-3
    held = gains(d, 100.0 + HOLD_S - 0.05, 2)          # the member's last packet is still recent
    assert np.allclose(held, floor, atol=1e-3)
    rise = gains(d, 100.0 + HOLD_S + 0.01, 5)
    assert rise[0] < 0.4 and abs(rise[ramp] - 1.0) < 1e-3 and rise[-1] == 1.0


def test_no_sample_to_sample_step_is_larger_than_the_ramp_allows():
    d = Ducking(depth_db=20)
    d.heard(1, 0.0)
    g = np.concatenate([gains(d, 0.0, 4), gains(d, 1.0, 4)])
    assert np.abs(np.diff(g)).max() <= (1 - 0.1) / (RAMP_S * 48_000) + 2 / 10_000   # rounding to whole samples


@pytest.mark.parametrize("depth", [0, 10])
def test_frames_are_untouched_without_a_member_speaking_or_with_ducking_off(depth):
    d = Ducking(depth_db=depth)
    if depth == 0:
        d.heard(1, 5.0)
    assert d.shape(FRAME, 5.01) is FRAME and d.gain == 1.0
    assert d.active is (depth > 0)


def test_turned_off_while_ducked_it_rises_back():
    d = Ducking(depth_db=10)
    d.heard(1, 0.0)
    gains(d, 0.0, 5)
    d.depth_db = 0
    assert d.active                                       # still below full: the rise is shaped too
    assert gains(d, 0.1, 5)[-1] == 1.0 and not d.active
