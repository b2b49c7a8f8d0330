"""Tests of flowlaws.percolation.merge_processes, against answers known in advance."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import brentq

from flowlaws.percolation import (
    merge_processes,
)


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
    scaling = merge_processes.jump_scaling([256, 4096], n_runs=12, seed=0)
    assert scaling["er_mean"][1] < 0.6 * scaling["er_mean"][0]
    assert np.all(scaling["block_mean"] > 0.2)
    assert scaling["block_mean"][1] > 3 * scaling["er_mean"][1]


def test_size_weighting_and_bad_input():
    _, order = merge_processes.block_merge_curve(200, weighting="size", seed=0)
    assert order[-1] == 1.0
    with pytest.raises(ValueError, match="block size"):
        merge_processes.block_merge_curve(10, n=1)
    with pytest.raises(ValueError, match="N must be"):
        merge_processes.erdos_renyi_curve(1)
