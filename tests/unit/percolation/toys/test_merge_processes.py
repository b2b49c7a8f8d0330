"""Tests of flowlaws.percolation.toys.merge_processes, against answers known in advance."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import brentq

from flowlaws.percolation.toys import merge_processes


def test_block_jump_sweep_separates_the_two_regimes():
    er = merge_processes.block_jump_sweep([512], 6, process="er")
    bl = merge_processes.block_jump_sweep([512], 6, process="block")
    assert er["N"] == [512.0] and len(er["max_sem"]) == 1
    assert bl["max_mean"][0] > 2 * er["max_mean"][0]
    assert all(m >= last for m, last in zip(bl["max_mean"], bl["last_mean"], strict=True))
    with pytest.raises(ValueError, match="process"):
        merge_processes.block_jump_sweep([64], 2, process="kingman")


def test_erdos_renyi_giant_component_matches_mean_field():
    p, order = merge_processes.erdos_renyi_curve(20_000, p_max=1.5, seed=0)
    c = 2 * p[-1]  # mean degree
    giant = brentq(lambda s: s - 1 + np.exp(-c * s), 1e-6, 1.0)
    assert order[-1] == pytest.approx(giant, abs=0.01)
    assert order[np.searchsorted(p, 0.25)] < 0.01  # subcritical: no giant component
    assert np.all(np.diff(order) >= 0)


def test_block_merge_bookkeeping():
    p, order = merge_processes.block_merge_curve(100, n=3, seed=1)
    assert p[0] == 0 and p[-1] == 1 and order[-1] == 1.0
    assert len(p) == 1 + int(np.ceil(99 / 2))  # each step removes n - 1 = 2 components
    assert np.allclose(np.diff(p)[:-1], 2 / 99)


def test_block_merge_jumps_stay_order_one_while_er_jumps_shrink():
    er = merge_processes.block_jump_sweep([256, 4096], 12, process="er", seed=0)
    block = merge_processes.block_jump_sweep([256, 4096], 12, process="block", seed=0)
    assert er["max_mean"][1] < 0.6 * er["max_mean"][0]
    assert np.all(np.array(block["max_mean"]) > 0.2)
    assert block["max_mean"][1] > 3 * er["max_mean"][1]


def test_size_weighting_and_bad_input():
    _, order = merge_processes.block_merge_curve(200, weighting="size", seed=0)
    assert order[-1] == 1.0
    with pytest.raises(ValueError, match="block size"):
        merge_processes.block_merge_curve(10, n=1)
    with pytest.raises(ValueError, match="N must be"):
        merge_processes.erdos_renyi_curve(1)


def test_jumps_below_the_critical_point_vanish_for_every_process():
    """Fair comparison: below 0.95 p_c the largest jump shrinks with N for all three kernels,
    and the uniform kernel's O(1) jump sits at p ≈ 1, its own critical point (the last merges)."""
    for kw in ({"process": "er"}, {"process": "block"}, {"process": "block", "weighting": "size"}):
        s = merge_processes.block_jump_sweep([128, 1024], 8, seed=3, **kw)
        assert s["window_mean"][1] < 0.6 * s["window_mean"][0], kw
        assert s["order_at_window"][1] < s["order_at_window"][0], kw
    uniform = merge_processes.block_jump_sweep([1024], 8, process="block", seed=3)
    assert uniform["max_at"][0] > 0.99 and uniform["max_mean"][0] > 0.2
    er = merge_processes.block_jump_sweep([1024], 8, process="er", seed=3)
    assert abs(er["max_at"][0] - merge_processes.critical_point("er")) < 0.2
    size3 = merge_processes.block_jump_sweep([2048], 4, process="block", n=3, weighting="size")
    assert abs(size3["max_at"][0] - merge_processes.critical_point("block", 3, "size")) < 0.1


def test_largest_jump_counts_only_steps_below_p_max():
    p, order = np.array([0.0, 0.2, 0.5, 1.0]), np.array([0.1, 0.2, 0.25, 1.0])
    assert merge_processes.largest_jump(p, order) == (0.75, 1.0)
    assert merge_processes.largest_jump(p, order, 0.6) == pytest.approx((0.1, 0.2))
    assert np.isnan(merge_processes.largest_jump(p, order, -1.0)[1])


def test_erdos_renyi_until_connected_ends_in_one_component():
    p, order = merge_processes.erdos_renyi_curve(500, None, seed=2)
    assert order[-1] == 1.0 and order[-2] < 1.0 and p[-1] > 1.0


def test_jump_summary_reads_a_sweep_at_its_own_critical_point():
    config = {"process": "block", "n": 3, "weighting": "size"}
    sweep = merge_processes.block_jump_sweep([64, 128], 3, seed=1, **config)
    row = merge_processes.jump_summary("size-weighted, n=3", config, sweep)
    assert set(row) == set(merge_processes.JUMP_SUMMARY_COLUMNS)
    assert row["p_c"] == pytest.approx(1 / 3) and row["at"] == sweep["max_at"][-1]
    assert row["window"] == f"{sweep['window_mean'][0]:.4f} → {sweep['window_mean'][-1]:.4f}"


def test_block_percolation_verdicts_read_the_window_only_for_a_jump_at_the_end():
    """A uniform kernel whose largest jump stays O(1) at p → 1 but shrinks below 0.95 p_c fails
    the declared rule and holds under the first one (the whole axis); a size-weighted kernel is
    read at its largest jump under both."""
    uniform = {"max_mean": [0.5, 0.5], "max_at": [0.99, 0.999], "window_mean": [0.08, 0.006]}
    sized = {"max_mean": [0.2, 0.05], "max_at": [0.3, 0.3], "window_mean": [0.2, 0.05]}
    er = {"max_mean": [0.9, 0.9], "max_at": [0.5, 0.5], "window_mean": [0.9, 0.9]}
    sweeps = {"uniform n=2": uniform, "size n=2": sized, "Erdős–Rényi": er}
    verdict, first, jumps = merge_processes.block_percolation_verdicts(sweeps)
    assert (verdict, first) == ("fails", "holds")
    assert jumps == {"uniform n=2": [0.08, 0.006], "size n=2": [0.2, 0.05]}
    still = {"uniform n=2": uniform | {"window_mean": [0.3, 0.4]}}
    assert merge_processes.block_percolation_verdicts(still)[:2] == ("holds", "holds")
    with pytest.raises(ValueError, match="no block"):
        merge_processes.block_percolation_verdicts({"Erdős–Rényi": er})


def test_last_jump_mean_is_the_mean_smaller_part_of_a_uniform_split():
    # N = 4: m in {1, 2, 3}, min(m, 4 - m) = 1, 2, 1 -> 4 / (4 * 3) = 1/3
    assert merge_processes.last_jump_mean(4) == pytest.approx(1 / 3)
    assert merge_processes.last_jump_mean(10_000) == pytest.approx(0.25, abs=1e-3)
    with pytest.raises(ValueError, match="N"):
        merge_processes.last_jump_mean(1)
