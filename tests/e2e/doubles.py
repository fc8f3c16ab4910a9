"""Test doubles for fault and overload tests and the load bench: flaky, slowed engine backends over the real Piper."""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Iterator

import numpy as np

from engine.base import BackendDefaults, CancelToken, Voice

HANG_LIMIT_S = 60.0  # a hanging segment is released by the engine's cancel; this only bounds a bug


class _OverPiper(BackendDefaults):
    """What a test double over the real backend passes through unchanged."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.info = inner.info

    def warm_up(self) -> None:
        self.inner.warm_up()

    def voice_languages(self, voice):
        return self.inner.voice_languages(voice)

    def extract_features(self, clip, sample_rate: int, transcript: str, *, reference_embedding=None):
        return self.inner.extract_features(clip, sample_rate, transcript, reference_embedding=reference_embedding)

    def close(self) -> None:
        self.inner.close()


class FlakyBackend(_OverPiper):
    """Test double wrapping the real PiperBackend: raises on a seeded `fail_rate` of segments and hangs
    (until the engine cancels it at its segment timeout) on a seeded `hang_rate`.

    The verdict for a segment depends only on (seed, segment text), so a test can predict it with
    `verdict(text)`; `enabled = False` makes it the plain backend again (the fault cleared)."""

    def __init__(self, inner, *, fail_rate: float = 0.10, hang_rate: float = 0.01, seed: int = 9) -> None:
        super().__init__(inner)
        self.fail_rate = fail_rate
        self.hang_rate = hang_rate
        self.seed = seed
        self.enabled = True
        self._lock = threading.Lock()
        self.raised: list[str] = []
        self.hung: list[str] = []
        self.released: list[str] = []  # hangs ended by the engine's cancel

    def verdict(self, text: str) -> str:
        """"fail", "hang" or "ok" for a segment's text."""
        if not self.enabled:
            return "ok"
        digest = hashlib.sha256(f"{self.seed}:{text}".encode()).digest()
        u = int.from_bytes(digest[:8], "big") / 2**64
        if u < self.hang_rate:
            return "hang"
        if u < self.hang_rate + self.fail_rate:
            return "fail"
        return "ok"

    def synthesize(self, text: str, voice: Voice, *, cancel: CancelToken | None = None) -> Iterator[np.ndarray]:
        verdict = self.verdict(text)
        if verdict == "fail":
            with self._lock:
                self.raised.append(text)
            raise RuntimeError(f"injected backend failure on {text[:40]!r}")
        if verdict == "hang":
            with self._lock:
                self.hung.append(text)
            released = threading.Event()
            if cancel is not None:
                cancel.on_cancel(released.set)
            if released.wait(HANG_LIMIT_S):
                with self._lock:
                    self.released.append(text)
            return
        yield from self.inner.synthesize(text, voice, cancel=cancel)



class SlowBackend(_OverPiper):
    """Test double wrapping the real PiperBackend: hands out each sentence's audio no faster than `speed`
    times real time (0.8: 8 s of audio take 10 s), as an engine slower than the speech it makes would.

    Stands in for a saturated engine: the audio is Piper's own, only its arrival is paced."""

    def __init__(self, inner, *, speed: float) -> None:
        super().__init__(inner)
        self.speed = speed

    def synthesize(self, text: str, voice: Voice, *, cancel: CancelToken | None = None) -> Iterator[np.ndarray]:
        stop = threading.Event()
        if cancel is not None:
            cancel.on_cancel(stop.set)
        start = time.monotonic()
        made = 0.0
        for audio in self.inner.synthesize(text, voice, cancel=cancel):
            made += len(audio) / self.info.sample_rate
            if stop.wait(max(0.0, start + made / self.speed - time.monotonic())):
                return
            yield audio
