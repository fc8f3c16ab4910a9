"""Pitch change that keeps the waveform's own spectrum: TD-PSOLA on pitch marks placed by the F0 track."""

from __future__ import annotations

import numpy as np

UNVOICED_STEP_S = 0.005  # marks in unvoiced audio (copied through unchanged)
SEARCH = 0.25  # a voiced mark is the waveform's peak within this fraction of a period of where the period says


def pitch_marks(x: np.ndarray, sr: int, f0: np.ndarray, frame_s: float) -> tuple[np.ndarray, np.ndarray]:
    """Analysis marks over the whole signal and whether each is voiced: one per period on the waveform's
    peaks through voiced frames, every UNVOICED_STEP_S elsewhere."""
    n = len(x)
    frames = np.minimum((np.arange(n) / (sr * frame_s)).astype(np.int64), len(f0) - 1) if len(f0) else None
    polarity = 1.0 if np.max(x) >= -np.min(x) else -1.0
    y = x * polarity
    marks, voiced = [], []
    t, step_u = 0, max(1, int(sr * UNVOICED_STEP_S))
    while t < n:
        hz = f0[frames[t]] if frames is not None else 0.0
        if hz <= 0:
            marks.append(t)
            voiced.append(False)
            t += step_u
            continue
        period = sr / hz
        if voiced and voiced[-1]:  # the next period's peak near one period on
            lo, hi = int(marks[-1] + period * (1 - SEARCH)), int(marks[-1] + period * (1 + SEARCH)) + 1
        else:  # a voiced run begins: its first peak
            lo, hi = t, int(t + period) + 1
        lo, hi = min(lo, n - 1), min(hi, n)
        peak = lo + int(np.argmax(y[lo:hi])) if hi > lo else lo
        if marks and peak <= marks[-1]:
            peak = marks[-1] + 1
        if peak >= n:
            break
        marks.append(peak)
        voiced.append(True)
        t = peak + 1 if hi <= lo else max(peak + 1, int(marks[-1] + period * (1 - SEARCH)))
    return np.asarray(marks, dtype=np.int64), np.asarray(voiced, dtype=bool)


def shift(x: np.ndarray, sr: int, f0: np.ndarray, new_f0: np.ndarray, frame_s: float) -> np.ndarray:
    """x with voiced frames' F0 moved to new_f0 (same frames, 0 where unvoiced), its length and spectral
    envelope kept: two-period Hann grains from the analysis marks re-spaced at the new periods."""
    x = np.asarray(x, dtype=np.float64)
    n = len(x)
    marks, voiced = pitch_marks(x, sr, f0, frame_s)
    if len(marks) < 2 or not np.any(voiced):
        return x.copy()
    spacing = np.diff(marks, prepend=marks[0] - (marks[1] - marks[0]), append=marks[-1] + (marks[-1] - marks[-2]))
    half = np.maximum(np.maximum(spacing[:-1], spacing[1:]), 2)  # a grain reaches the neighbouring marks
    out = np.zeros(n + 1)
    weight = np.zeros(n + 1)
    frames = len(new_f0)
    ts = float(marks[0])
    j = 0
    while ts < n:
        j = _nearest(marks, ts, j)
        k = min(int(ts / (sr * frame_s)), frames - 1)
        hz = new_f0[k]
        if not voiced[j] or hz <= 0:  # unvoiced: copy the mark through where it is
            ts_i, step = int(marks[j]), None
        else:
            ts_i, step = int(round(ts)), sr / hz
        h = int(half[j])
        win = _window(h)
        a0, a1 = marks[j] - h, marks[j] + h + 1
        s0 = ts_i - h
        lo, hi = max(0, a0, a0 - s0), min(n, a1, n + a0 - s0)  # analysis range whose target stays in 0..n
        if hi > lo:
            w = win[lo - a0: hi - a0]
            out[lo - a0 + s0: hi - a0 + s0] += x[lo:hi] * w
            weight[lo - a0 + s0: hi - a0 + s0] += w
        if step is None:
            if j + 1 >= len(marks):
                break
            ts = float(marks[j + 1])
        else:
            ts += step
    # where grains pile up (a higher pitch) their sum is scaled back to one grain's level; where they leave
    # gaps (a lower pitch) the gaps stay quiet, as between a low voice's pulses
    return out[:n] / np.maximum(weight[:n], 1.0)


def _nearest(marks: np.ndarray, t: float, start: int) -> int:
    j = start
    while j + 1 < len(marks) and abs(marks[j + 1] - t) <= abs(marks[j] - t):
        j += 1
    return j


_windows: dict[int, np.ndarray] = {}


def _window(h: int) -> np.ndarray:
    win = _windows.get(h)
    if win is None:
        win = _windows[h] = np.hanning(2 * h + 3)[1:-1]
    return win
