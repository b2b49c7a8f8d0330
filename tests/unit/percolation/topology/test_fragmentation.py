"""Tests of flowlaws.percolation.topology.fragmentation, against answers known in advance."""

from __future__ import annotations

import numpy as np
import torch

from flowlaws.percolation.dynamics import ensemble
from flowlaws.percolation.topology import fragmentation, reeb
from flowlaws.percolation.toys import planted


def test_task_switch_splits_merged_neurons():
    shape = ensemble.TwoLayerShape(4, 6, 1, "tanh")
    half = ensemble.TwoLayerShape(4, 3, 1, "tanh")
    g = torch.Generator().manual_seed(0)
    X = torch.randn(64, 4, generator=g)
    V, U = ensemble.split_params(ensemble.ensemble_init(half, 3, seed=1, dtype=torch.float32), half)
    merged = torch.cat([V.repeat_interleave(2, 1).flatten(1),
                        (U.repeat_interleave(2, 2) / 2).flatten(1)], 1)
    theta0 = merged + 1e-3 * torch.randn(merged.shape, generator=g)
    Y_before = ensemble.ensemble_forward(merged[:1], shape, X)[0]  # a task the merged net solves
    teacher = ensemble.ensemble_init(shape, 1, seed=7, scale=2.0, dtype=torch.float32)
    Y_after = ensemble.ensemble_forward(teacher, shape, X)[0]  # needs six distinct neurons
    res = fragmentation.task_switch(theta0, shape, X, Y_before, Y_after, lr=(0.1, 0.2),
                          batch_size=(4, 64), n_steps=(200, 1500), record_every=50)
    assert np.all(res.n_splits >= 1)
    assert all(e.time > res.switch_time for run in res.splits for e in run)
    for G in res.reeb:  # before the switch the three pairs stayed merged
        before = [e for e in reeb.reeb_events(G) if e.time <= res.switch_time]
        assert before == []
        assert {n[1] for n in G if G.nodes[n]["time"] == res.switch_time} == {0, 1, 2}


def test_split_fraction_is_wilsons_interval():
    f, lo, hi = fragmentation.split_fraction([0, 2, 1, 0, 3, 0, 0, 0, 0, 0])  # 3 of 10
    z = 1.959963984540054
    centre, half = (3 + z**2 / 2) / (10 + z**2), z * np.sqrt(3 * 7 / 10 + z**2 / 4) / (10 + z**2)
    np.testing.assert_allclose([f, lo, hi], [0.3, centre - half, centre + half], rtol=1e-9)


def test_split_difference_matches_newcombes_worked_example():
    # Newcombe (1998), Stat. Med. 17:873, method 10: 56/70 - 48/80 = 0.2, 95% CI 0.0524 to 0.3339
    second = [1] * 56 + [0] * 14
    first = [1] * 48 + [0] * 32
    d, lo, hi = fragmentation.split_difference(first, second)
    np.testing.assert_allclose([d, lo, hi], [0.2, 0.0524, 0.3339], atol=5e-5)


def test_fragmentation_verdict_is_three_way():
    none, every = [0] * 32, [1] * 32
    assert fragmentation.fragmentation_verdict(every, none) == "holds"
    assert fragmentation.fragmentation_verdict(none, none) == "fails"  # [-0.11, 0.11] < 0.2
    assert fragmentation.fragmentation_verdict([1, 0, 0], [0, 0, 0]) == \
        "inconclusive at this size"


def test_median_shift_finds_a_shift_and_not_one_that_is_absent():
    rng = np.random.default_rng(0)
    a = rng.normal(10.0, 1.0, 64)
    d, lo, hi = fragmentation.median_shift([5.0] * 8, [8.0] * 8)
    assert d == lo == hi == 3.0  # constant groups: every resample gives the same shift
    d, lo, hi = fragmentation.median_shift(a, rng.normal(13.0, 1.0, 64))
    assert lo < d < hi and lo > 2.0 and hi < 4.0
    hits = [fragmentation.median_shift(rng.normal(0, 1, 32), rng.normal(0, 1, 32), seed=k)
            for k in range(40)]
    covered = np.mean([lo <= 0 <= hi for _, lo, hi in hits])
    assert covered >= 0.85  # nominal 0.95; 40 trials: below 0.85 has probability < 1%
    assert np.isnan(fragmentation.median_shift([1.0, np.nan], [2.0, 3.0])[0])


def test_cause_verdict_needs_curvature_and_less_noise_and_skips_scales_without_room():
    every, none, half = [1] * 20, [0] * 20, [1] * 10 + [0] * 10
    splits = {(0.5, 4): none, (0.5, 64): half, (4.0, 4): every, (4.0, 64): every}
    verdict, number = fragmentation.cause_verdict(splits, batch_after=4)
    # curvature: 1.00 - 0.00 holds; less noise at x0.5: 0.5 - 0.0 holds; x4 has no room
    assert verdict == "holds" and "x0.5 holds" in number and "x4" not in number.split("noise")[1]
    splits[0.5, 64] = none  # less noise splits nothing more at the one scale with room
    verdict, number = fragmentation.cause_verdict(splits, batch_after=4)
    assert verdict == "fails" and "x0.5 fails" in number
    splits = {(0.5, 4): every, (0.5, 64): every, (4.0, 4): every, (4.0, 64): every}
    verdict, number = fragmentation.cause_verdict(splits, batch_after=4)
    assert verdict == "fails" and "no scale with room" in number  # no curvature effect at all


def test_cause_verdict_under_the_first_rule_judges_less_noise_at_every_scale():
    every, none, half = [1] * 20, [0] * 20, [1] * 10 + [0] * 10
    splits = {(0.5, 4): none, (0.5, 64): half, (4.0, 4): every, (4.0, 64): every}
    assert fragmentation.cause_verdict(splits, batch_after=4)[0] == "holds"
    verdict, number = fragmentation.cause_verdict(splits, batch_after=4, room=False)
    # x4: every run splits at both batches, 1.00 - 1.00 lies below the smallest effect
    assert verdict == "fails" and "x4 fails" in number and "every scale" in number


def test_fraction_text_and_switch_counts_summarise_a_switch():
    _, lo, hi = fragmentation.split_fraction([0, 2, 1, 0])
    assert fragmentation.fraction_text([0, 2, 1, 0]) == f"2/4 runs = 0.50 [{lo:.2f}, {hi:.2f}]"
    half = ensemble.TwoLayerShape(2, 1, 1, "tanh")
    theta0, merged, shape = planted.merged_ensemble(half, 3, perturbation=1e-3, seed=0)
    X = torch.randn(8, 2, generator=torch.Generator().manual_seed(1))
    Y_b = planted.teacher_targets(shape, X, 2.0, seed=3)
    kw = {"lr": (0.05, 0.05), "batch_size": (2, 2), "n_steps": (20, 40), "record_every": 10}
    Y_a = ensemble.ensemble_forward(merged, shape, X)[0]
    counts = fragmentation.switch_counts(theta0, shape, X, Y_a, Y_b, **kw)
    result = fragmentation.task_switch(theta0, shape, X, Y_a, Y_b, **kw)
    assert counts["splits"] == result.n_splits.tolist()
    assert counts["merges"] == [len(m) for m in result.merges]
    np.testing.assert_array_equal(counts["first"], fragmentation.first_split_times(result))
