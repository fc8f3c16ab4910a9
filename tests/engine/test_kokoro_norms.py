"""The vocoder's statistics pooled per voice and language: runs pool to the frame-weighted mean of their statistics
(each run's own spread, not the spread between runs), and a pool is given only once it has learned enough, then
learns no more."""

from __future__ import annotations

import numpy as np

from engine.backends.kokoro.norms import KEPT, LEARNED, NormPool, NormPools


def computed(window: np.ndarray) -> np.ndarray:
    """What the vocoder's norms output for `window` [C, T]: channel means, then variances."""
    return np.concatenate([window.mean(axis=1), window.var(axis=1)]).reshape(1, -1, 1)


def test_runs_pool_to_the_frame_weighted_mean_of_their_statistics():
    rng = np.random.default_rng(1)
    runs = [rng.normal(loc=rng.normal(size=(6, 1)), scale=rng.uniform(0.5, 2, size=(6, 1)), size=(6, n))
            for n in (300, 200)]
    runs[1] += 1.5  # a louder run: its channels' means unlike the other's, which adds no spread within either
    pool = NormPool(12)
    for run in runs:
        pool.add(computed(run), run.shape[1])
    expected = (300 * computed(runs[0]) + 200 * computed(runs[1])) / 500
    np.testing.assert_allclose(pool.given(), expected, rtol=1e-5, atol=1e-6)
    assert np.all(pool.given()[0, 6:, 0] < computed(np.concatenate(runs, axis=1))[0, 6:, 0])  # not the joined spread


def test_statistics_are_given_once_learned_and_kept_per_voice_and_language():
    pools, stats = NormPools(), computed(np.arange(40, dtype=float).reshape(2, 20))
    pools.learn(("af_heart", "en"), stats, LEARNED - 1)
    assert pools.given(("af_heart", "en")) is None
    pools.learn(("af_heart", "en"), stats, 1)
    np.testing.assert_allclose(pools.given(("af_heart", "en")), stats, rtol=1e-6)
    pools.learn(("af_heart", "en"), 2 * stats, LEARNED)  # learned: it stays as it was
    np.testing.assert_allclose(pools.given(("af_heart", "en")), stats, rtol=1e-6)
    assert pools.given(("af_heart", "ja")) is None and pools.given(("am_adam", "en")) is None
    for k in range(KEPT):  # the least recently used pools are dropped
        pools.learn((f"voice{k}", "en"), stats, LEARNED)
    assert pools.given(("af_heart", "en")) is None and pools.given(("voice1", "en")) is not None
