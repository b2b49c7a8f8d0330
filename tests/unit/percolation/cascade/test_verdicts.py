"""A trained ensemble's verdict record against ensembles with a known answer."""

from __future__ import annotations

import numpy as np

from flowlaws.percolation.cascade.surrogates import surrogate_test
from flowlaws.percolation.cascade.variance import relative_variance
from flowlaws.percolation.cascade.verdicts import (
    ensemble_verdict,
    family_line,
    ledger_texts,
    seed_test,
    verdict_lines,
)
from flowlaws.percolation.toys.cascades import planted_ensemble

KW = {"n_null": 19, "n_power": 4, "n_boot": 20, "n_surrogates": 9}


def _staircases(n_runs: int, n_points: int, seed: int) -> np.ndarray:
    """Integer staircases with three jumps at independent uniform times: no cascade."""
    rng = np.random.default_rng(seed)
    at = rng.integers(1, n_points, size=(n_runs, 3))
    return 1.0 + (np.arange(n_points)[None, :, None] >= at[:, None, :]).sum(axis=2)


def test_a_planted_cascade_holds_and_its_record_carries_both_tests():
    p = np.linspace(0.0, 1.0, 512)
    C = planted_ensemble(p, 64, p_c=0.8, lam=2.0, first=0.4, n_levels=4, noise=0.0, seed=1)
    rec = ensemble_verdict(C, p, lam=2.0, power_sizes=(128,), **KW)
    assert rec["verdict"] == "cascade" and rec["p_value"] <= 0.05
    assert abs(rec["lam"] - 2.0) < 0.3
    assert rec["size"] is None  # no size search for a found cascade
    assert ledger_texts(rec)[0] == "holds"
    assert ledger_texts(rec, rejected=False)[0] == "inconclusive at this size"
    assert "surrogate p" in verdict_lines("planted", rec)


def test_seed_test_is_the_surrogate_test_of_R():
    p = np.linspace(0.0, 1.0, 200)
    C = _staircases(16, 200, 0)
    t = surrogate_test(relative_variance(C), p, n_surrogates=9, alpha=0.05, seed=3)
    rec = seed_test(C, p, n_surrogates=9, seed=3)
    assert rec["seed_p"] == t.p_value and rec["raw_rate"] == t.detection_rate
    assert rec["raw_found"] == t.cascade.found


def test_an_inconclusive_verdict_searches_sizes_in_fresh_or_resampled_runs():
    p = np.linspace(0.0, 1.0, 256)
    C = _staircases(8, 256, 0)
    rec = ensemble_verdict(C, p, lam=2.0, power_sizes=(8, 16), **KW)
    assert rec["verdict"] == "inconclusive"  # 4 injections into 8 runs: power far below 0.8
    assert rec["size"]["resampled"] and rec["size"]["sizes"] == [8, 16]
    assert ledger_texts(rec)[0] == "inconclusive at this size"
    asked = []

    def fresh(n: int, seed: int) -> np.ndarray:
        asked.append(n)
        return _staircases(n, 256, seed + 1)

    rec = ensemble_verdict(C, p, lam=2.0, power_sizes=(8, 16), source=fresh, **KW)
    assert not rec["size"]["resampled"] and asked[0] == 8


def test_a_short_grid_has_no_power_and_no_size_search():
    p = np.linspace(0.0, 1.0, 120)
    rec = ensemble_verdict(_staircases(8, 120, 2), p, lam=2.0, power_sizes=(16,), **KW)
    assert not np.isfinite(rec["power"]) and rec["size"] is None
    assert rec["verdict"] != "no cascade"
    assert "power not measured" in ledger_texts(rec)[1]


def test_family_line_counts_the_settings_and_applies_holm():
    recs = {k: {"p_value": pv, "verdict": v, "surrogate_p": 0.5} for k, pv, v in
            (("a", 0.01, "cascade"), ("b", 0.03, "cascade"), ("c", 0.5, "inconclusive"))}
    line, rejected = family_line(recs, 0.05)
    assert line.startswith("3 settings tested")
    assert rejected == {"a": True, "b": False, "c": False}  # 0.03 > 0.05/2
