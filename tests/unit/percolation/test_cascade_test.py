"""Tests of flowlaws.percolation.cascade_test and cascade_stats: calibration and power measured.

The numbers asserted are those of issue 12 ("Done means"); each test prints what it measured
(run pytest with ``-s`` to see them).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from flowlaws.percolation import (
    cascade_models,
    cascade_stats,
    cascade_test,
    dsi,
)

ALPHA = 0.05


def staircases(M: int, n: int, rng: np.random.Generator, timing: str) -> tuple:
    """Integer staircases without a cascade: each run jumps 1 + Poisson(4) times, by 1 or 2, at
    independent random positions (uniform, skewed late, or half of them clustered at 0.3)."""
    p = np.linspace(0, 1, n)
    C = np.ones((M, n))
    for r, k in enumerate(1 + rng.poisson(4, M)):
        if timing == "uniform":
            t = rng.uniform(0, 1, k)
        elif timing == "late":
            t = rng.beta(5, 1.5, k)
        else:
            t = np.where(rng.uniform(size=k) < 0.5, rng.normal(0.3, 0.03, k), rng.uniform(0, 1, k))
        C[r] += (p[:, None] >= t[None, :]) @ rng.integers(1, 3, k)
    return C, p


# (runs, grid points, timing); 80 ensembles each, 19 deals each: p-values k/20, k = 1 … 20
CALIBRATION = [(8, 256, "uniform"), (16, 1024, "clustered"), (32, 512, "late"),
               (64, 1024, "uniform"), (200, 128, "clustered")]


def test_the_run_level_null_is_calibrated_on_staircases_without_a_cascade():
    rng = np.random.default_rng(12)
    n_null, per_config, ranks, lines = 19, 80, [], []
    for M, n, timing in CALIBRATION:
        grid = cascade_stats.comb_grid(np.linspace(0, 1, n))
        ps = np.array([cascade_stats.permutation_test(staircases(M, n, rng, timing)[0], grid,
                                                      n_null, rng)[0] for _ in range(per_config)])
        lines.append(f"M={M:3d} n={n:4d} {timing:9s} rejection {np.mean(ps <= ALPHA):.3f}")
        ranks.append(np.round(ps * (n_null + 1)).astype(int))
    ranks = np.concatenate(ranks)
    counts = np.bincount(ranks, minlength=n_null + 2)[1:]
    rate, uniform = np.mean(ranks == 1), stats.chisquare(counts).pvalue
    print("\n".join(lines), f"\nall {len(ranks)}: rejection {rate:.3f}, chi-square p {uniform:.3f}")
    assert counts.sum() == len(ranks) and len(counts) == n_null + 1
    assert 0.02 <= rate <= 0.08
    assert uniform > 0.01


def test_planted_lambda_2_cascades_are_found_with_power_and_the_right_lambda():
    """4 levels, λ = 2, jitter 0.1 of the distance to p_c (0.2 of the next spacing), M = 64,
    1,024 points; 39 deals per test (the default 199 only sharpens p)."""
    p = np.linspace(0, 1, 1024)
    found, lams = [], []
    for s in range(16):
        C = cascade_models.planted_ensemble(p, 64, p_c=0.8, lam=2.0, first=0.4, n_levels=4,
                                            noise=0.0, seed=100 + s)
        v = cascade_test.judge_cascade(C, p, n_null=39, n_power=0, n_boot=100, seed=s)
        found.append(v.verdict == "cascade")
        lams.append(v.lam)
    lams = np.array(lams)
    close = np.abs(lams - 2.0) <= 0.15 * 2.0
    print(f"\npower {np.mean(found):.2f}, λ̂ median {np.nanmedian(lams):.3f}, "
          f"within 15 %: {np.mean(close):.2f}, λ̂ = {np.round(lams, 2)}")
    assert np.mean(found) >= 0.8
    assert np.mean(close) >= 0.8 and abs(np.nanmedian(lams) - 2.0) <= 0.15 * 2.0


def test_hierarchical_merging_is_a_cascade_near_lambda_2_and_random_pairs_are_not():
    p = cascade_models.merged_fraction(256)
    for seed in (0, 1):
        v = cascade_test.judge_cascade(cascade_models.hierarchical_runs(256, 64, seed=seed), p,
                                       n_null=39, n_power=0, n_boot=100, seed=seed)
        print(f"\nhierarchical N=256: {v}")
        assert v.verdict == "cascade" and abs(v.lam - 2.0) <= 0.3 and len(v.peaks) >= 4
        v = cascade_test.judge_cascade(cascade_models.asynchronous_runs(256, 64, seed=seed), p,
                                       n_null=39, n_power=0, n_boot=100, seed=seed)
        print(f"random pairs N=256: {v}")
        assert v.verdict != "cascade"


def test_the_verdict_is_three_way_and_always_carries_p_value_and_power():
    rng = np.random.default_rng(3)
    C, p = staircases(64, 256, rng, "uniform")
    C[:3, 50] = np.nan  # three diverged runs
    v = cascade_test.judge_cascade(C, p, n_null=19, n_power=10, n_boot=50, seed=1)
    text = str(v)
    assert v.n_runs == 61 and v.n_dropped == 3 and v.n_points == 256
    assert f"p = {v.p_value:.3f}" in text and f"power {v.power:.2f}" in text
    assert v.verdict == ("no cascade" if v.power >= 0.8 else "inconclusive") or (
        v.verdict == "cascade" and v.p_value <= ALPHA)
    small = cascade_test.judge_cascade(C[3:11], p, n_null=19, n_power=0, n_boot=20)
    assert small.verdict in ("inconclusive", "cascade") and np.isnan(small.power)
    assert "power not measured" in str(small)


def test_delta_method_error_of_R_matches_the_run_bootstrap():
    p = np.linspace(0, 1, 256)
    C = cascade_models.planted_ensemble(p, 64, p_c=0.8, lam=2.0, first=0.4, n_levels=4, seed=5)
    R, se = cascade_stats.relative_variance_se(C)
    np.testing.assert_allclose(R, dsi.relative_variance(C), rtol=1e-10)
    rng = np.random.default_rng(0)
    boot = np.std([dsi.relative_variance(C[rng.integers(64, size=64)]) for _ in range(400)],
                  axis=0)
    busy = boot > 0.1 * boot.max()
    assert np.median(se[busy] / boot[busy]) == pytest.approx(1.0, abs=0.15)


def test_dealing_keeps_each_runs_jumps_in_order_and_the_pooled_positions():
    C = np.ones((3, 12))
    for r, (cols, sizes) in enumerate([((2, 7), (1, 2)), ((4,), (3,)), ((1, 5, 9), (1, 1, 5))]):
        for c, size in zip(cols, sizes, strict=True):
            C[r, c + 1:] += size
    rng = np.random.default_rng(0)
    null = cascade_stats.deal_jumps(C, 50, rng)
    np.testing.assert_array_equal(cascade_stats.deal_jumps(C, 1, None)[0], C)
    d, dn = np.diff(C, axis=1), np.diff(null, axis=2)
    moved = 0
    for k in range(50):
        assert np.array_equal(np.sort(np.nonzero(dn[k])[1]), np.sort(np.nonzero(d)[1]))
        for r in range(3):  # the run's own sizes, in their order, at dealt positions
            assert np.array_equal(dn[k, r][dn[k, r] != 0], d[r][d[r] != 0])
        moved += not np.array_equal(dn[k], d)
    assert moved > 40


def test_injected_cascades_sit_inside_the_window_and_converge_either_way():
    rng = np.random.default_rng(1)
    p = np.linspace(0, 1, 512)
    C = np.ones((20, 512))
    for direction in (1, -1):
        planted, levels, p_c = cascade_test.inject_cascade(C, p, rng, lam=2.0,
                                                           direction=direction)
        assert np.all((levels > 0) & (levels < 1)) and np.all(planted[:, -1 if direction > 0
                                                                    else 0] == 1 + 4)
        est = dsi.estimate_lambda(levels)
        assert est.lam == pytest.approx(2.0) and est.p_c == pytest.approx(p_c)
    with pytest.raises(ValueError, match="too coarse"):
        cascade_test.inject_cascade(np.ones((4, 60)), np.linspace(0, 1, 60), rng, lam=2.0)


def test_hierarchical_and_random_pair_runs_are_merge_histories():
    for runs in (cascade_models.hierarchical_runs(64, 8, seed=0),
                 cascade_models.asynchronous_runs(64, 8, seed=0)):
        assert runs.shape == (8, 64) and np.all(runs[:, 0] == 1) and np.all(runs[:, -1] == 64)
        assert np.all(np.diff(runs, axis=1) >= 0)
        assert np.all(runs >= np.ceil(64 / (64 - np.arange(64))))  # pigeonhole
    h = cascade_models.hierarchical_runs(64, 8, seed=0)
    assert set(np.unique(h)) <= {1, 2, 4, 8, 16, 32, 64}
    with pytest.raises(ValueError, match="power of 2"):
        cascade_models.hierarchical_runs(48, 2)


def test_runs_for_power_tries_sizes_until_the_target_and_says_when_none_reaches_it():
    p = np.linspace(0, 1, 256)

    def model(n_runs: int, seed: int) -> np.ndarray:
        return staircases(n_runs, 256, np.random.default_rng(seed), "uniform")[0]

    kw = {"n_power": 4, "n_null": 19, "n_boot": 20}
    found = cascade_test.runs_for_power(model, p, sizes=(4, 64), target=0.5, **kw)
    assert found.sizes[-1] == (found.n_runs or 64) and len(found.powers) == len(found.sizes)
    assert all(0 <= x <= 1 for x in found.powers)
    never = cascade_test.runs_for_power(model(8, 0), p, sizes=(4,), target=1.01, **kw)
    assert never.n_runs is None and never.sizes == [4]


def test_a_window_too_coarse_for_four_levels_gives_no_power_and_says_why():
    rng = np.random.default_rng(4)
    C, p = staircases(16, 128, rng, "uniform")
    v = cascade_test.judge_cascade(C, p, n_null=19, n_power=3, n_boot=10)
    assert np.isnan(v.power) and "too coarse" in v.note and v.verdict != "no cascade"
    assert "power not measured (the window" in str(v)
