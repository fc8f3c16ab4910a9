"""What Kokoro's vocoder normalizes by, learned per voice, language and pitch: its instance norms' statistics pooled
over the runs it has vocoded normalized by their own, so that a short window, normalized by them, sounds much as its
whole run would and can be heard sooner."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable

import numpy as np

# Decoder frames (12.5 ms) a voice must have been heard over in a language, normalized by its own statistics, before
# the pooled ones are used (the warm-up's sentences teach the default voice). Which sentences are pooled matters more
# than how many: runs normalized by a pool moved their 4-12 kHz band against their whole runs' by +1.3 dB on average
# (20 sentences of af_heart, AMD EPYC) pooled from the one warm-up sentence in 4 s windows with the spread between
# windows counted as variance; +0.7 dB from six varied sentences' whole runs; +0.5 dB from the same with each run's own
# variance alone (the spread of a channel's mean between runs is not spread a run has). Another voice's statistics are
# unusable (word errors up to 0.73), another language's audibly off (bands up to 3 dB).
LEARNED = 800
KEPT = 64  # pools kept, the least recently used dropped (each 135 kB)


class NormPool:
    """One voice in one language: frame-weighted sums of each channel's mean and of its variance over each run (or
    window) learned, and the statistics they give once LEARNED frames are in (`learned`; then it learns no more)."""

    def __init__(self, size: int) -> None:
        self.frames = 0
        self.means = np.zeros(size // 2)
        self.variances = np.zeros(size // 2)
        self.learned: np.ndarray | None = None

    def add(self, computed: np.ndarray, frames: int) -> None:
        """Learn a window's statistics (NORMS_OUT of a window normalized by its own), unless already learned."""
        if self.learned is not None:
            return
        half = len(self.means)
        stats = computed.reshape(-1).astype(np.float64)
        means, variances = stats[:half], stats[half:]
        self.means += frames * means
        self.variances += frames * variances
        self.frames += frames
        if self.frames >= LEARNED:
            self.learned = self.given()

    def given(self) -> np.ndarray:
        """The pooled statistics as NORMS [1, S, 1]: the means, then the variances (each a frame-weighted mean)."""
        return np.concatenate([self.means, self.variances]).astype(np.float32).reshape(1, -1, 1) / self.frames


class NormPools:
    """The pools by (voice, language), each given once it has learned LEARNED frames; shared by the workers
    (KokoroModel owns them)."""

    def __init__(self) -> None:
        self._pools: OrderedDict[Hashable, NormPool] = OrderedDict()
        self._lock = threading.Lock()

    def given(self, key: Hashable) -> np.ndarray | None:
        """The statistics to vocode `key`'s runs with, or None while its pool is still learning."""
        with self._lock:
            pool = self._pools.get(key)
            if pool is None:
                return None
            self._pools.move_to_end(key)
            return pool.learned

    def learn(self, key: Hashable, computed: np.ndarray, frames: int) -> None:
        """Add a window of `frames` decoder frames of `key` vocoded with its own statistics (NORMS_OUT) until the
        pool has learned LEARNED frames. Windows vocoded with the pool's statistics teach nothing: what their norms
        see follows from the statistics given upstream, and learning it drifts from the model's own."""
        with self._lock:
            pool = self._pools.get(key)
            if pool is None:
                pool = self._pools[key] = NormPool(computed.size)
                while len(self._pools) > KEPT:
                    self._pools.popitem(last=False)
            pool.add(computed, frames)
