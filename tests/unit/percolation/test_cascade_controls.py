"""The DSI chapter's control helpers against independent computations."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from flowlaws.percolation.cascade_controls import (
    cascade_point,
    holm,
    judged,
    model_runs,
    power_fits,
    synchronised_ratios,
    verdict_line,
)
from flowlaws.percolation.cascade_models import hierarchical_runs, merged_fraction


def _holm_by_definition(p: np.ndarray, alpha: float) -> np.ndarray:
    """Closed testing with Bonferroni on every intersection: H_i is rejected when every subset
    containing i has min p <= alpha / |subset| (Holm's procedure is its shortcut)."""
    m = len(p)
    out = np.zeros(m, dtype=bool)
    for i in range(m):
        out[i] = all(min(p[list(s)]) <= alpha / len(s)
                     for k in range(1, m + 1) for s in itertools.combinations(range(m), k)
                     if i in s)
    return out


def test_holm_agrees_with_closed_testing():
    rng = np.random.default_rng(0)
    for _ in range(200):
        p = rng.choice([0.001, 0.01, 0.0125, 0.02, 0.03, 0.05, 0.2], size=rng.integers(1, 6))
        assert np.array_equal(holm(p, 0.05), _holm_by_definition(p, 0.05)), p


def test_synchronised_ratios_match_the_model_without_delay_spread():
    N = 64
    C = hierarchical_runs(N, 3, spread=1e-3, seed=1)
    p = merged_fraction(N)
    L = int(np.log2(N))
    jumps = np.array([p[np.argmax(C[0] >= 2**g)] for g in range(1, L + 1)])
    expected = (N - N * 2.0 ** (1 - np.arange(1, L + 1)) + 1) / (N - 1)
    np.testing.assert_allclose(jumps, expected)
    d = N / (N - 1) - jumps
    np.testing.assert_allclose(d[:-1] / d[1:], synchronised_ratios(N))


def test_power_fits_is_the_injection_rule():
    assert not power_fits(128) and power_fits(256)


def test_too_few_finite_runs_give_an_inconclusive_record_without_numbers():
    C = np.full((3, 100), np.nan)
    C[0] = 1.0
    rec = judged(C, np.linspace(0, 1, 100))
    assert rec["verdict"] == "inconclusive" and np.isnan(rec["p_value"]) and rec["n_runs"] == 1
    assert "inconclusive" in verdict_line("empty", rec)


def test_cascade_point_draws_p_c_as_a_vertical_line():
    x = np.linspace(0, 1, 11)
    rec = {"x": x.tolist(), "R": np.sin(x).tolist(), "peaks": [0.2, 0.5], "p_c": 0.55,
           "verdict": "cascade", "lam": 2.0, "lam_err": 0.1, "p_value": 0.01, "power": 0.9,
           "lam_claimed": 2.0, "n_points": 11}
    point = cascade_point(rec)
    line = point.curves["fitted p_c"]
    assert np.isfinite(line).sum() == 2 and np.all(point.x[np.isfinite(line)] == 0.55)
    assert np.all(np.diff(point.x) >= 0) and point.marks.shape == (2, 2)
    assert "λ = 2.00 ± 0.10" in point.caption and "p = 0.010" in point.caption


def test_model_runs_refuses_an_unknown_model():
    with pytest.raises(ValueError, match="model"):
        model_runs("ring", 16, 2)
