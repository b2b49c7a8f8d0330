"""flowlaws.percolation: ER against its giant-component equation; block merges jump."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import brentq

from flowlaws import percolation


def test_erdos_renyi_giant_component_matches_mean_field():
    p, order = percolation.erdos_renyi_curve(20_000, p_max=1.5, seed=0)
    c = 2 * p[-1]  # mean degree
    giant = brentq(lambda s: s - 1 + np.exp(-c * s), 1e-6, 1.0)
    assert order[-1] == pytest.approx(giant, abs=0.01)
    assert order[np.searchsorted(p, 0.25)] < 0.01  # subcritical: no giant component
    assert np.all(np.diff(order) >= 0)


def test_block_merge_bookkeeping():
    p, order = percolation.block_merge_curve(100, n=3, seed=1)
    assert p[0] == 0 and p[-1] == 1 and order[-1] == 1.0
    assert len(p) == 1 + int(np.ceil(99 / 2))  # each step removes n - 1 = 2 components
    assert np.allclose(np.diff(p)[:-1], 2 / 99)


def test_block_merge_jumps_stay_order_one_while_er_jumps_shrink():
    scaling = percolation.jump_scaling([256, 4096], n_runs=12, seed=0)
    assert scaling["er_mean"][1] < 0.6 * scaling["er_mean"][0]
    assert np.all(scaling["block_mean"] > 0.2)
    assert scaling["block_mean"][1] > 3 * scaling["er_mean"][1]


def test_size_weighting_and_bad_input():
    _, order = percolation.block_merge_curve(200, weighting="size", seed=0)
    assert order[-1] == 1.0
    with pytest.raises(ValueError, match="block size"):
        percolation.block_merge_curve(10, n=1)
    with pytest.raises(ValueError, match="N must be"):
        percolation.erdos_renyi_curve(1)
