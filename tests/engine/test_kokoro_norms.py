"""The vocoder's statistics pooled per voice and language: windows pool to the statistics of their whole run, and a
pool is given only once it has learned enough, then learns no more."""

from __future__ import annotations

import numpy as np

from engine.backends.kokoro_norms import KEPT, LEARNED, NormPool, NormPools


def computed(window: np.ndarray) -> np.ndarray:
    """What the vocoder's norms output for `window` [C, T]: channel means, then variances."""
    return np.concatenate([window.mean(axis=1), window.var(axis=1)]).reshape(1, -1, 1)


def test_windows_pool_to_the_statistics_of_their_whole_run():
    rng = np.random.default_rng(1)
    run = rng.normal(loc=rng.normal(size=(6, 1)), scale=rng.uniform(0.5, 2, size=(6, 1)), size=(6, 500))
    run[:, 300:] += 1.5  # a louder stretch: windows unlike each other
    pool = NormPool(12)
    pool.add(computed(run[:, :300]), 300)
    pool.add(computed(run[:, 300:]), 200)
    np.testing.assert_allclose(pool.given(), computed(run), rtol=1e-5, atol=1e-6)


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
