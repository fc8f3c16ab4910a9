"""A registered voice's or a changed pitch's shaping on Kokoro: the F0 map, and the streamed correction that gives the
whole run's result piece by piece."""

from __future__ import annotations

import math

import numpy as np

from engine.backends.kokoro.shape import VOICED_HZ, Shape, ShapeStream


class PositionGain:
    """Test double for Shape: a correction that depends on where in the run each sample is (as the real one depends
    on the audio around it) and on the audio itself."""

    corrects = True

    def correct(self, audio: np.ndarray, f0: np.ndarray, start: int = 0) -> np.ndarray:
        at = start + np.arange(len(audio))
        return (audio * (1.0 + 0.5 * np.sin(at / 3000.0))).astype(np.float32)


def test_a_run_corrected_piece_by_piece_is_the_run_corrected_whole() -> None:
    rng = np.random.default_rng(3)
    pieces = [rng.normal(size=n).astype(np.float32) for n in (17_000, 28_000, 300, 43_000)]
    whole = PositionGain().correct(np.concatenate(pieces), np.zeros(1))
    stream = ShapeStream(PositionGain(), np.zeros(400))  # type: ignore[arg-type]
    out = [stream.add(p, k == len(pieces) - 1) for k, p in enumerate(pieces)]
    assert len(out[0]) == len(pieces[0]) - ShapeStream.HOLD  # its end waits for what comes after it
    np.testing.assert_allclose(np.concatenate(out), whole, atol=1e-5)


def test_the_f0_is_mapped_in_the_log_domain_and_unvoiced_frames_stay_unvoiced() -> None:
    f0 = np.array([[7.0, 100.0, 200.0, 8.0, 150.0]], dtype=np.float32)
    up = Shape(None, 12.0).f0(f0)
    np.testing.assert_allclose(up[0, [1, 2, 4]], 2 * f0[0, [1, 2, 4]], rtol=1e-5)  # an octave up
    assert list(up[0, [0, 3]]) == [7.0, 8.0]
    down = Shape(None, -36.0).f0(f0)
    assert np.all(down[0, [1, 2, 4]] > VOICED_HZ)  # voiced frames stay voiced, however low the pitch goes
    assert not Shape(None, 3.0).corrects and math.isclose(float(Shape(None, 0.0).f0(f0)[0, 2]), 200.0, rel_tol=1e-6)
