"""Tests of flowlaws.percolation.cascade.surrogates, against answers known in advance."""

from __future__ import annotations

import numpy as np

from flowlaws.percolation.cascade import surrogates


def test_cascade_caption_never_makes_up_a_lambda():
    p = np.linspace(0, 1, 512)
    two = np.exp(-0.5 * ((p - 0.3) / 0.01) ** 2) + np.exp(-0.5 * ((p - 0.6) / 0.01) ** 2)
    null = surrogates.surrogate_test(two, p, n_surrogates=20)
    caption = surrogates.cascade_caption(null)
    assert caption.startswith("no cascade") and "λ" not in caption
    y = sum(np.exp(-0.5 * ((p - q) / 0.008) ** 2) for q in (0.4, 0.6, 0.7))
    y = y + 0.02 * np.random.default_rng(0).standard_normal(512)
    null = surrogates.surrogate_test(y, p, n_surrogates=20, alpha=0.1)
    caption = surrogates.cascade_caption(null)
    assert caption.startswith("cascade of 3 peaks: λ = ") and "(significant)" in caption


LAM, P_C, A = 2.0, 0.8, 0.4


def test_surrogate_test_false_positive_rate_is_near_nominal():
    """A permissive detector (a score on every signal) makes the rank test exact: ≈ α."""
    p, alpha, n = np.linspace(0, 1, 256), 0.1, 150
    rejections = [
        surrogates.surrogate_test(np.random.default_rng(100 + s).standard_normal(256), p,
                           n_surrogates=99, alpha=alpha, seed=s, prominence_factor=3,
                           min_width=1).significant
        for s in range(n)
    ]
    assert abs(np.mean(rejections) - alpha) < 3 * np.sqrt(alpha * (1 - alpha) / n)


def test_surrogates_keep_the_amplitude_spectrum_and_mean():
    x = np.random.default_rng(0).standard_normal(4096).cumsum()
    s = surrogates.phase_randomized_surrogates(x, 50, seed=3)
    assert s.shape == (50, 4096)
    amplitude = np.broadcast_to(np.abs(np.fft.rfft(x)), (50, 2049))
    np.testing.assert_allclose(np.abs(np.fft.rfft(s, axis=1)), amplitude, rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(s.mean(axis=1), x.mean())
    assert not np.allclose(s[0], x)
    np.testing.assert_array_equal(s, surrogates.phase_randomized_surrogates(x, 50, seed=3))
