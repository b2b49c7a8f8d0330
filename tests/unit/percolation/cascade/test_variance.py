"""Tests of flowlaws.percolation.cascade.variance, against answers known in advance."""

from __future__ import annotations

import numpy as np
import pytest

from flowlaws.percolation.cascade import surrogates, variance

LAM, P_C, A = 2.0, 0.8, 0.4


def geometric(n: int, lam: float = LAM, p_c: float = P_C) -> np.ndarray:
    return p_c - A * lam ** -np.arange(n, dtype=float)


def planted_signal(seed: int = 1, n: int = 1024) -> tuple[np.ndarray, np.ndarray]:
    """Three Gaussian bumps at a λ = 2 cascade toward p_c = 0.8, on white noise σ = 0.05."""
    p = np.linspace(0, 1, n)
    y = sum(np.exp(-0.5 * ((p - q) / 0.008) ** 2) for q in geometric(3))
    return p, y + 0.05 * np.random.default_rng(seed).standard_normal(n)


def test_estimate_lambda_exact_three_and_more_peaks():
    est = variance.estimate_lambda(geometric(3))
    lam, p_c = est[:2]
    assert lam == pytest.approx(LAM, rel=1e-12) and p_c == pytest.approx(P_C, rel=1e-12)
    assert est.lam == lam and est.p_c == p_c and est.n_peaks == 3
    for n in (4, 7):
        est = variance.estimate_lambda(geometric(n, lam=1.7))
        assert est.lam == pytest.approx(1.7, rel=1e-6)
        assert est.p_c == pytest.approx(P_C, rel=1e-6)


def test_estimate_lambda_from_noisy_sequences_covers_the_truth():
    rng = np.random.default_rng(0)
    sigma, hits, errors = 2e-3, 0, []
    for _ in range(60):
        est = variance.estimate_lambda(geometric(6) + sigma * rng.standard_normal(6), sigma=sigma)
        errors.append(est.lam - LAM)
        hits += abs(est.lam - LAM) < 2 * est.lam_err and abs(est.p_c - P_C) < 2 * est.p_c_err
    assert abs(np.mean(errors)) < 0.02 and np.std(errors) < 0.06
    assert hits / 60 >= 0.8  # 2σ intervals hold both ~90% of the time


def test_three_peak_errors_propagate():
    est = variance.estimate_lambda(geometric(3), sigma=1e-3)
    rng = np.random.default_rng(1)
    lams = [variance.estimate_lambda(geometric(3) + 1e-3 * rng.standard_normal(3)).lam
            for _ in range(2000)]
    assert est.lam_err == pytest.approx(np.std(lams), rel=0.1)


def test_fewer_than_three_peaks_is_no_cascade():
    with pytest.raises(variance.NoCascadeError, match="no cascade: 2 peak"):
        variance.estimate_lambda([0.4, 0.6])
    p = np.linspace(0, 1, 512)
    y = np.exp(-0.5 * ((p - 0.3) / 0.01) ** 2) + np.exp(-0.5 * ((p - 0.6) / 0.01) ** 2)
    result = variance.detect_cascade(y, p)
    assert not result.found and result.estimate is None and "no cascade" in result.reason


def test_detector_finds_a_planted_three_peak_cascade():
    p, y = planted_signal()
    result = variance.detect_cascade(y, p)
    assert result.found and len(result.peaks) == 3
    assert np.allclose(result.peaks.p, geometric(3), atol=0.005)
    assert abs(result.estimate.lam - LAM) < 2 * result.estimate.lam_err
    assert abs(result.estimate.p_c - P_C) < 0.05
    test = surrogates.surrogate_test(y, p, n_surrogates=200, alpha=0.05)
    assert test.significant and test.p_value == pytest.approx(1 / 201)


def test_detector_rarely_fires_on_white_noise():
    p = np.linspace(0, 1, 1024)
    found = [variance.detect_cascade(np.random.default_rng(s).standard_normal(1024), p).found
             for s in range(200)]
    assert np.mean(found) < 0.1


def test_relative_variance():
    C = np.array([[1.0, 2.0, 0.0], [1.0, 4.0, 0.0]])
    np.testing.assert_allclose(variance.relative_variance(C), [0.0, 1.0 / 9.0, 0.0])


def test_predict_p_c_from_the_early_peaks():
    peaks = geometric(6)
    early = variance.predict_p_c(peaks, n_early=3)
    assert early.p_c == pytest.approx(P_C, rel=1e-12) and early.n_peaks == 3
    assert np.isnan(early.p_c_err)  # no position uncertainties given, none invented


def test_bootstrap_peak_sigma_is_small_for_a_well_defined_peak():
    rng = np.random.default_rng(0)
    p = np.linspace(0, 1, 201)
    centres = 0.5 + 0.02 * rng.standard_normal(300)
    C = 1 + rng.uniform(0, 1, (300, 1)) * np.exp(-0.5 * ((p - centres[:, None]) / 0.05) ** 2)
    R = variance.relative_variance(C)
    peaks = variance.find_variance_peaks(R, p, min_width=1)
    assert len(peaks) == 1 and abs(peaks.p[0] - 0.5) < 0.02
    sigma = variance.bootstrap_peak_sigma(C, p, peaks, n_boot=50, min_width=1)
    assert 0 < sigma[0] < 0.02


def test_noise_scale_of_a_piecewise_constant_signal_is_not_zero():
    steps = np.repeat([0.0, 1.0, 0.0, 2.0, 1.0], 50)  # MAD of the increments is exactly 0
    assert variance.noise_scale(steps) > 0
    assert variance.noise_scale(np.zeros(100)) == 0


@pytest.mark.parametrize("n", [3, 4, 6])
def test_estimate_lambda_in_either_direction(n):
    """Peaks falling toward p_c (a learning rate lowered) give the same λ, not its inverse."""
    up = P_C - A * 1.7 ** -np.arange(n, dtype=float)
    down = 0.3 + A * 1.7 ** -np.arange(n, dtype=float)
    for peaks, p_c in ((up, P_C), (down, 0.3), (down[::-1], 0.3)):
        est = variance.estimate_lambda(peaks, sigma=1e-3)
        assert est.lam == pytest.approx(1.7, rel=1e-6) and est.p_c == pytest.approx(p_c, abs=1e-6)
        assert est.lam_err > 0 and est.p_c_err > 0


def test_estimate_lambda_refuses_spacings_that_do_not_shrink_and_nan_positions():
    with pytest.raises(variance.NoCascadeError, match="do not shrink"):
        variance.estimate_lambda([0.1, 0.2, 0.3, 0.4])
    with pytest.raises(variance.NoCascadeError, match="do not shrink"):
        variance.estimate_lambda([0.1, 0.2, 0.3])
    with pytest.raises(ValueError, match="peaks holds NaN"):
        variance.estimate_lambda([0.1, np.nan, 0.3, 0.35])
    with pytest.raises(ValueError, match="peaks holds NaN"):
        variance.estimate_lambda(np.array([0.1, 0.2, np.inf]))
