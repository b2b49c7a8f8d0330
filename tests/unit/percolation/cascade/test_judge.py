"""Tests of flowlaws.percolation.cascade.judge and cascade_stats (the test's calibration and
power on known answers: test_cascade_calibration.py). Each test prints what it measured (run
pytest with ``-s`` to see them).
"""

from __future__ import annotations

import numpy as np
import pytest

from flowlaws.percolation.cascade import judge, statistic, variance
from flowlaws.percolation.toys import cascades

ALPHA = 0.05


def staircases(M: int, n: int, rng: np.random.Generator, timing: str) -> tuple:
    return cascades.random_staircases(M, n, rng, timing)


def test_hierarchical_merging_is_a_cascade_near_lambda_2_and_random_pairs_are_not():
    p = cascades.merged_fraction(256)
    for seed in (0, 1):
        v = judge.judge_cascade(cascades.hierarchical_runs(256, 64, seed=seed), p,
                                       n_null=39, n_power=0, n_boot=100, seed=seed)
        print(f"\nhierarchical N=256: {v}")
        assert v.verdict == "cascade" and abs(v.lam - 2.0) <= 0.3 and len(v.peaks) >= 4
        v = judge.judge_cascade(cascades.asynchronous_runs(256, 64, seed=seed), p,
                                       n_null=39, n_power=0, n_boot=100, seed=seed)
        print(f"random pairs N=256: {v}")
        assert v.verdict != "cascade"


def test_the_verdict_is_three_way_and_always_carries_p_value_and_power():
    rng = np.random.default_rng(3)
    C, p = staircases(64, 256, rng, "uniform")
    C[:3, 50] = np.nan  # three diverged runs
    v = judge.judge_cascade(C, p, n_null=19, n_power=10, n_boot=50, seed=1)
    text = str(v)
    assert v.n_runs == 61 and v.n_dropped == 3 and v.n_points == 256
    assert f"p = {v.p_value:.3f}" in text and f"power {v.power:.2f}" in text
    assert v.verdict == ("no cascade" if v.power >= 0.8 else "inconclusive") or (
        v.verdict == "cascade" and v.p_value <= ALPHA)
    small = judge.judge_cascade(C[3:11], p, n_null=19, n_power=0, n_boot=20)
    assert small.verdict in ("inconclusive", "cascade") and np.isnan(small.power)
    assert "power not measured" in str(small)


def test_delta_method_error_of_R_matches_the_run_bootstrap():
    p = np.linspace(0, 1, 256)
    C = cascades.planted_ensemble(p, 64, p_c=0.8, lam=2.0, first=0.4, n_levels=4, seed=5)
    R, se = statistic.relative_variance_se(C)
    np.testing.assert_allclose(R, variance.relative_variance(C), rtol=1e-10)
    rng = np.random.default_rng(0)
    boot = np.std([variance.relative_variance(C[rng.integers(64, size=64)]) for _ in range(400)],
                  axis=0)
    busy = boot > 0.1 * boot.max()
    assert np.median(se[busy] / boot[busy]) == pytest.approx(1.0, abs=0.15)


def test_dealing_keeps_each_runs_jumps_in_order_and_the_pooled_positions():
    C = np.ones((3, 12))
    for r, (cols, sizes) in enumerate([((2, 7), (1, 2)), ((4,), (3,)), ((1, 5, 9), (1, 1, 5))]):
        for c, size in zip(cols, sizes, strict=True):
            C[r, c + 1:] += size
    rng = np.random.default_rng(0)
    null = statistic.deal_jumps(C, 50, rng)
    np.testing.assert_array_equal(statistic.deal_jumps(C, 1, None)[0], C)
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
        planted, levels, p_c = judge.inject_cascade(C, p, rng, lam=2.0,
                                                           direction=direction)
        assert np.all((levels > 0) & (levels < 1)) and np.all(planted[:, -1 if direction > 0
                                                                    else 0] == 1 + 4)
        est = variance.estimate_lambda(levels)
        assert est.lam == pytest.approx(2.0) and est.p_c == pytest.approx(p_c)
    with pytest.raises(ValueError, match="too coarse"):
        judge.inject_cascade(np.ones((4, 60)), np.linspace(0, 1, 60), rng, lam=2.0)


def test_hierarchical_and_random_pair_runs_are_merge_histories():
    for runs in (cascades.hierarchical_runs(64, 8, seed=0),
                 cascades.asynchronous_runs(64, 8, seed=0)):
        assert runs.shape == (8, 64) and np.all(runs[:, 0] == 1) and np.all(runs[:, -1] == 64)
        assert np.all(np.diff(runs, axis=1) >= 0)
        assert np.all(runs >= np.ceil(64 / (64 - np.arange(64))))  # pigeonhole
    h = cascades.hierarchical_runs(64, 8, seed=0)
    assert set(np.unique(h)) <= {1, 2, 4, 8, 16, 32, 64}
    with pytest.raises(ValueError, match="power of 2"):
        cascades.hierarchical_runs(48, 2)


def test_runs_for_power_tries_sizes_until_the_target_and_says_when_none_reaches_it():
    p = np.linspace(0, 1, 256)

    def model(n_runs: int, seed: int) -> np.ndarray:
        return staircases(n_runs, 256, np.random.default_rng(seed), "uniform")[0]

    kw = {"n_power": 4, "n_null": 19, "n_boot": 20}
    found = judge.runs_for_power(model, p, sizes=(4, 64), target=0.5, **kw)
    assert found.sizes[-1] == (found.n_runs or 64) and len(found.powers) == len(found.sizes)
    assert all(0 <= x <= 1 for x in found.powers)
    never = judge.runs_for_power(model(8, 0), p, sizes=(4,), target=1.01, **kw)
    assert never.n_runs is None and never.sizes == [4]


def test_a_window_too_coarse_for_four_levels_gives_no_power_and_says_why():
    rng = np.random.default_rng(4)
    C, p = staircases(16, 128, rng, "uniform")
    v = judge.judge_cascade(C, p, n_null=19, n_power=3, n_boot=10)
    assert np.isnan(v.power) and "too coarse" in v.note and v.verdict != "no cascade"
    assert "power not measured (the window of 128 points" in str(v)
    assert "needs ≥ 179 points" in v.note


def test_min_points_for_power_is_the_grid_on_which_four_levels_fit():
    need = judge.min_points_for_power(2.0, 4)
    assert need == 179
    rng = np.random.default_rng(5)
    for _ in range(20):  # every draw fits on `need` points
        judge.inject_cascade(np.ones((4, need)), np.linspace(0, 1, need), rng, lam=2.0)
    with pytest.raises(ValueError, match="needs ≥ 179 points"):
        judge.inject_cascade(np.ones((4, need - 1)), np.linspace(0, 1, need - 1), rng,
                                    lam=2.0)


def test_detectable_jump_climbs_the_ladder_until_the_power_target():
    C, p = staircases(32, 256, np.random.default_rng(6), "uniform")
    kw = {"n_power": 4, "n_null": 19, "n_boot": 20, "seed": 0}
    base = judge.typical_jump(C)
    d = np.diff(C, axis=1)
    assert base == np.median(d[d != 0])  # every step of an integer staircase is a jump
    jump, tried = judge.detectable_jump(C, p, ladder=(1.0, 8.0), known={1.0: 0.9}, **kw)
    assert jump == base and tried == [(1.0, 0.9)]  # a known power is not measured again
    jump, tried = judge.detectable_jump(C, p, ladder=(1.0, 2.0), target=1.01, **kw)
    assert np.isinf(jump) and [k for k, _ in tried] == [1.0, 2.0]
    assert all(0 <= pw <= 1 for _, pw in tried)
    v = judge.judge_cascade(C, p, n_null=19, n_power=4, n_boot=20,
                                   jump_ladder=(1.0, 4.0, 16.0))
    if v.verdict != "cascade":
        assert v.ladder and v.ladder[0] == (1.0, v.power) and v.jump == base
        assert ("detectable jump" in str(v)) == np.isfinite(v.detectable)
    plain = judge.judge_cascade(C, p, n_null=19, n_power=4, n_boot=20)
    assert np.isnan(plain.detectable) and "detectable" not in str(plain)
