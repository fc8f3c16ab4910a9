"""Kokoro's vocoder windows as a pure function: the spans of a run, and their stitching into one stream."""

from __future__ import annotations

import numpy as np
import pytest

from engine.backends.kokoro.windows import CROSSFADE, HOP, SIDE, WINDOW, Stitcher, rendered, windows

RATE = 24_000


def _signal(frames: int) -> np.ndarray:
    t = np.arange(frames * HOP) / RATE
    return (0.3 * np.sin(2 * np.pi * 180 * t) * (1 + 0.5 * np.sin(2 * np.pi * 1.3 * t))).astype(np.float32)


@pytest.mark.parametrize("n,first", [(10, 64), (100, 64), (558, 64), (1400, 64), (700, WINDOW)])
def test_windows_cover_the_run_in_order_none_short(n: int, first: int) -> None:
    spans = windows(n, first)
    assert spans[0][0] == 0 and spans[-1][1] == n
    assert all(b == a2 for (_, b), (a2, _) in zip(spans, spans[1:]))
    sizes = [b - a for a, b in spans]
    assert sizes[0] == (n if n <= first * 3 // 2 else first)
    assert all(s <= WINDOW * 3 // 2 for s in sizes)
    assert all(s >= first for s in sizes[:-1])


def test_the_first_size_repeats_before_growing() -> None:
    assert [b - a for a, b in windows(400, 40, repeat=2, growth=4 / 3)][:4] == [40, 40, 53, 70]
    assert [b - a for a, b in windows(400, 40)][:3] == [40, 60, 90]


@pytest.mark.parametrize("n", [40, 300, 900])
def test_windows_of_one_signal_stitch_back_to_it(n: int) -> None:
    """Windows that render the same audio where they overlap (a whole run would) join into exactly that audio."""
    whole = _signal(n)
    stitcher = Stitcher(n)
    pieces = []
    for a, b in windows(n, 64):
        lo, hi = rendered(a, b, n)
        pieces.append(stitcher.add(whole[lo * HOP:hi * HOP].copy(), a, b))
    out = np.concatenate(pieces)
    assert len(out) == len(whole)
    assert np.allclose(out, whole, atol=1e-5)


def test_a_window_at_another_level_is_matched_to_the_one_before_and_eased_back() -> None:
    n = 300
    whole = _signal(n)
    stitcher = Stitcher(n)
    (a0, b0), (a1, b1), *_ = windows(n, 64)
    lo0, hi0 = rendered(a0, b0, n)
    lo1, hi1 = rendered(a1, b1, n)
    first = stitcher.add(whole[lo0 * HOP:hi0 * HOP].copy(), a0, b0)
    louder = stitcher.add(2.0 * whole[lo1 * HOP:hi1 * HOP], a1, b1)
    assert a1 * HOP - CROSSFADE // 2 == len(first)  # the second piece starts where the cross-fade does
    level = lambda x: float(np.sqrt(np.mean(np.square(x))))  # noqa: E731
    own = whole[a1 * HOP - CROSSFADE // 2:]
    assert level(louder[:CROSSFADE]) / level(own[:CROSSFADE]) == pytest.approx(1.0, abs=0.06)  # matched at the seam
    assert level(louder[-4 * HOP:]) / level(own[len(louder) - 4 * HOP:len(louder)]) == pytest.approx(2.0, abs=0.01)
    assert SIDE * HOP >= CROSSFADE // 2  # the cross-fade lies within what both windows rendered
