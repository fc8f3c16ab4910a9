"""Kokoro's vocoder windows: which frames each window of a run contributes, and the pure stitching of their audio
(level matched to the window before, cross-faded) into one stream, as a whole run would sound."""

from __future__ import annotations

import numpy as np

HOP = 300  # samples of 24 kHz audio per decoder frame
# frames (2 s) per window at most (the last up to 1.5x, so none is short): a window holds a slot while it is made (at
# most ~1.7 s on 2 AVX2 cores busy), so a window of speech running dry waits at most that for one; 4 s windows (320)
# held slots for up to 3.5 s there, longer than speech running low has in hand (underruns in the load bench's plans)
WINDOW = 160
# frames a window renders beyond each end (the convolutions' reach): with learned statistics 8 joined as well as 16
# (worst seam 1.10 vs 1.09 of the whole run's flux) at 1.10x the whole runs' vocoding time instead of 1.23x
SIDE = 8
CROSSFADE = 2400  # samples (0.1 s) over which two windows are cross-faded (20 ms left a jump: 1.25x the whole run's)
RAMP = 12_000  # samples (0.5 s) over which a window's level eases from the one before's back to its own


def windows(n: int, first: int = WINDOW, most: int = WINDOW, repeat: int = 1,
            growth: float = 1.5) -> list[tuple[int, int]]:
    """The frames [a, b) each vocoder window of an n-frame run contributes: `repeat` windows of `first` frames, each
    next `growth` times the one before up to `most`, the last up to 1.5x its size (so none is short); the whole run
    when it is at most 1.5x `first`. They bound the vocoder's memory and let a sentence play while it is made."""
    cuts, size = [0], first
    while n - cuts[-1] > size * 3 // 2:
        cuts.append(cuts[-1] + size)
        if len(cuts) > repeat:
            size = min(most, int(size * growth))
    return list(zip(cuts, [*cuts[1:], n]))


def rendered(a: int, b: int, n: int) -> tuple[int, int]:
    """The frames [lo, hi) a window contributing [a, b) of an n-frame run renders: SIDE more on each side."""
    return max(0, a - SIDE), min(n, b + SIDE)


def rms(a: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(a, dtype=np.float64)))) if len(a) else 0.0


class Stitcher:
    """One run's windows joined in order: `add` takes a window's rendered audio and gives the part of the stream it
    completes. Each window's level is matched to the one before over the frames both rendered (eased back to its own
    over RAMP) and the two are cross-faded over CROSSFADE around their seam. A pure function of what it is given."""

    def __init__(self, n: int) -> None:
        self.n = n
        self._before: tuple[np.ndarray, int] | None = None  # the last window's audio and its first frame

    def add(self, audio: np.ndarray, a: int, b: int) -> np.ndarray:
        """The stream's audio from where the last call's ended up to the window's own end (up to the run's end for
        the last window), given the window's audio rendered over `rendered(a, b, n)`."""
        lo, _ = rendered(a, b, self.n)
        last = b >= self.n
        start = (a - lo) * HOP  # where this window's own part begins in `audio`
        half = CROSSFADE // 2
        if self._before is not None:
            prev, prev_lo = self._before
            shared = slice((lo - prev_lo) * HOP, len(prev))  # frames both windows rendered, in `prev`
            gain = float(np.clip(rms(prev[shared]) / max(rms(audio[:len(prev) - shared.start]), 1e-6), 0.5, 2.0))
            audio = audio * np.interp(np.arange(len(audio)) - start, [0, RAMP], [gain, 1.0]).astype(np.float32)
            fade = np.linspace(0.0, 1.0, CROSSFADE, dtype=np.float32)
            seam = (a - prev_lo) * HOP
            mixed = prev[seam - half:seam + half] * (1 - fade)
            mixed += audio[start - half:start + half] * fade
            audio[start - half:start + half] = mixed
            start -= half
        end = (self.n - lo) * HOP if last else (b - lo) * HOP - half
        self._before = (audio, lo)
        return audio[start:end]
