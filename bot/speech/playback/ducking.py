"""Ducking: the bot's level falls by the guild's setting while a member speaks, ramped, and rises after they stop."""

from __future__ import annotations

import math
import time

import numpy as np

RATE = 48_000
RAMP_S = 0.050  # a whole fall or rise takes this long: a ramp, never a step (no click)
HOLD_S = 0.400  # the level rises again this long after a member's last packet
AHEAD = 2  # frames a ducking call's track encodes ahead: a member's first packet is heard within ~40 ms + the ramp


class Ducking:
    """One call's gain for the frames it sends. `heard` is told of each member's packet (the receive path's
    thread); `shape` scales each PCM frame before Opus encoding, in sending order (the voice driver's thread),
    moving the gain toward its target at most a whole fall per RAMP_S. `depth_db` is the guild's setting (0: off)."""

    def __init__(self, depth_db: float = 0.0) -> None:
        self.depth_db = depth_db
        self._last = -math.inf  # time.monotonic() of the last member packet heard
        self._gain = 1.0  # the gain the last frame shaped ended at
        self._span = 0.0  # how far the last fall went (1 - its gain): a rise ramps back at the same slope

    @property
    def active(self) -> bool:
        """The guild ducks: frames are shaped, and few are encoded ahead."""
        return self.depth_db > 0 or self._gain < 1.0

    @property
    def gain(self) -> float:
        return self._gain

    def heard(self, _user_id: int, at: float) -> None:
        """A member's audio packet arrived at `at` (time.monotonic())."""
        self._last = at

    def target(self, now: float) -> float:
        """The gain wanted now: ducked while a member spoke within HOLD_S, else 1."""
        if self.depth_db <= 0 or now - self._last > HOLD_S:
            return 1.0
        return 10.0 ** (-self.depth_db / 20.0)

    def shape(self, pcm: bytes, now: float | None = None) -> bytes:
        """The frame (48 kHz stereo s16le) at the ramped gain; the same bytes while the gain stays 1."""
        target = self.target(time.monotonic() if now is None else now)
        start = self._gain
        if start == target == 1.0:
            return pcm
        samples = np.frombuffer(pcm, dtype="<i2").reshape(-1, 2)
        if target < 1.0:
            self._span = 1.0 - target
        step = max(self._span, 1.0 - start) / (RAMP_S * RATE)  # a whole fall (or rise) in RAMP_S
        n = np.arange(1, len(samples) + 1)
        gains = np.maximum(target, start - step * n) if target < start else np.minimum(target, start + step * n)
        self._gain = float(gains[-1]) if len(gains) else start
        return np.clip(np.rint(samples * gains[:, None]), -32768, 32767).astype("<i2").tobytes()
