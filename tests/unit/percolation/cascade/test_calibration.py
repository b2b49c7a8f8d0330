"""Tests of flowlaws.percolation.cascade.calibration: the cascade test's false-positive rate and
power, measured with enough trials to fail. The numbers asserted are those of issue 12 ("Done
means"); each test prints what it measured (run pytest with ``-s`` to see them).
"""

from __future__ import annotations

import numpy as np

from flowlaws.percolation.cascade import calibration

ALPHA = 0.05


def test_the_run_level_null_is_calibrated_on_staircases_without_a_cascade():
    """80 ensembles at each of the five settings, 19 deals each: p-values k/20, k = 1 … 20."""
    cal = calibration.null_calibration(n_ensembles=80, n_null=19, alpha=ALPHA, seed=12)
    lines = [f"M={r['runs']:3d} n={r['points']:4d} {r['timing']:9s} rejection {r['rate']:.3f}"
             for r in cal["rows"]]
    print("\n".join(lines), f"\nall {cal['n_ensembles']}: rejection {cal['rate']:.3f}, "
          f"chi-square p {cal['chi2_p']:.3f}")
    assert cal["n_ensembles"] == 80 * len(calibration.CALIBRATION)
    assert 0.02 <= cal["rate"] <= 0.08
    assert cal["chi2_p"] > 0.01


def test_planted_lambda_2_cascades_are_found_with_power_and_the_right_lambda():
    """4 levels, λ = 2, jitter 0.1 of the distance to p_c (0.2 of the next spacing), M = 64,
    1,024 points; 39 deals per test (the default 199 only sharpens p)."""
    res = calibration.planted_power(16, n_runs=64, n_points=1024, n_null=39, n_boot=100)
    lams = np.array(res["lams"])
    print(f"\npower {res['power']:.2f}, λ̂ median {res['lam_median']:.3f}, "
          f"within 15 %: {res['within_15']:.2f}, λ̂ = {np.round(lams, 2)}")
    assert res["n_trials"] == len(lams) == 16
    assert res["power"] >= 0.8
    assert res["within_15"] >= 0.8 and abs(res["lam_median"] - 2.0) <= 0.15 * 2.0
