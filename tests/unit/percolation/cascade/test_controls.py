"""The DSI chapter's control helpers against independent computations."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from flowlaws.percolation.cascade.controls import (
    cascade_point,
    claim_numbers,
    detectable_text,
    grid_claim,
    holm,
    judged,
    lambda_claim,
    model_runs,
    power_fits,
    synchronised_ratios,
    unselected_maxima,
    verdict_line,
)
from flowlaws.percolation.toys.cascades import hierarchical_runs, merged_fraction


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
    assert not power_fits(178) and power_fits(179)


def test_a_coarse_grid_says_why_its_power_is_not_measured():
    rec = judged(np.cumsum(np.random.default_rng(0).integers(0, 2, (8, 128)), axis=1) + 1.0,
                 np.linspace(0, 1, 128), n_null=9, n_power=5, n_boot=10)
    assert rec["n_power"] == 0 and np.isnan(rec["power"])
    assert "grid of 128 points too coarse for 4 injected levels at λ = 2 (needs ≥ 179)" in (
        verdict_line("coarse", rec))


def test_detectable_text_states_the_jump_or_the_largest_tried():
    rec = {"detectable": 0.4, "jump": 0.1, "n_power": 20, "ladder": [[1, 0.1], [4, 0.85]]}
    assert detectable_text(rec).startswith("detectable jump (power ≥ 0.8): 0.4 = 4 × the median")
    rec |= {"detectable": float("inf"), "ladder": [[1, 0.1], [64, 0.3]]}
    assert "up to 64 × the median jump 0.1" in detectable_text(rec)
    assert detectable_text({"detectable": float("nan")}) == ""


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
    assert set(point.mark_sets()) == {"peaks of the cascade", "other local maxima"}


def test_unselected_maxima_are_the_detectors_peaks_away_from_the_cascade():
    x = np.linspace(0, 1, 201)
    R = sum(np.exp(-((x - c) / 0.03) ** 2) for c in (0.2, 0.5, 0.8))  # wider than 4 steps
    rec = {"x": x.tolist(), "R": R.tolist(), "peaks": [0.5]}
    others = unselected_maxima(rec)
    np.testing.assert_allclose(np.sort(others[:, 0]), [0.2, 0.8])
    np.testing.assert_allclose(others[:, 1], np.interp(others[:, 0], x, R))
    assert len(unselected_maxima(rec | {"peaks": [0.2, 0.5, 0.8]})) == 0


def test_model_runs_refuses_an_unknown_model():
    with pytest.raises(ValueError, match="model"):
        model_runs("ring", 16, 2)


def test_ledger_verdicts_follow_the_three_way_verdict_and_the_lambda_tolerance():
    rec = {"verdict": "cascade", "lam": 1.81, "lam_err": 0.04, "p_value": 0.01, "power": 0.5,
           "n_runs": 64, "n_points": 256}
    assert lambda_claim(rec) == "holds" and lambda_claim(rec | {"lam": 1.69}) == "fails"
    assert lambda_claim(rec | {"lam": float("nan")}) == "inconclusive at this size"
    assert lambda_claim(rec | {"verdict": "no cascade"}) == "fails"
    assert lambda_claim(rec | {"verdict": "inconclusive"}) == "inconclusive at this size"
    numbers = "cascade: λ = 1.81 ± 0.04, p = 0.010, power 0.50, 64 runs × 256 points"
    assert claim_numbers(rec) == numbers
    rows = [rec | {"verdict": v} for v in ("no cascade", "inconclusive", "cascade")]
    assert grid_claim(rows, np.array([False, False, True])) == "holds"
    assert grid_claim(rows, np.array([False, False, False])) == "inconclusive at this size"
    assert grid_claim(rows[:1] * 2, np.array([False, False])) == "fails"
