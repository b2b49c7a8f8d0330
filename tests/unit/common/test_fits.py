"""Tests of flowlaws.common.fits, against answers known in advance."""

from __future__ import annotations

import numpy as np
import pytest

from flowlaws.common.fits import fit_power_law


def test_fit_recovers_a_known_exponent_from_noisy_data() -> None:
    rng = np.random.default_rng(0)
    x = np.geomspace(1e-3, 1e1, 40)
    y = 3.0 * x**1.7 * np.exp(0.05 * rng.standard_normal(x.size))
    fit = fit_power_law(x, y)
    assert abs(fit.exponent - 1.7) < 3 * fit.stderr and fit.stderr < 0.01
    assert abs(np.log(fit.prefactor / 3.0)) < 3 * fit.intercept_stderr
    low, high = fit.interval(0.99)
    assert low < 1.7 < high and fit.r2 > 0.99 and fit.n == 40
    np.testing.assert_allclose(fit.predict(x), fit.prefactor * x**fit.exponent)
    assert "±" in str(fit)


def test_fit_is_exact_on_exact_data() -> None:
    x = np.array([1.0, 2.0, 4.0, 8.0])
    fit = fit_power_law(x, 0.5 * x**-2)
    assert fit.exponent == pytest.approx(-2.0, abs=1e-12) and fit.stderr < 1e-12
    assert fit.prefactor == pytest.approx(0.5)


@pytest.mark.parametrize(
    ("x", "y"),
    [([1, 2, 3], [1, 0, 2]), ([1, -2, 3], [1, 2, 3]), ([1, 2, 3], [1, np.nan, 2]),
     ([1, 2], [1, 2]), ([1, 2, 3], [1, 2])],
)
def test_fit_refuses_what_has_no_logarithm(x, y) -> None:
    with pytest.raises(ValueError):
        fit_power_law(np.array(x, dtype=float), np.array(y, dtype=float))
