"""Tests of flowlaws.percolation.toys.cascades, against answers known in advance."""

from __future__ import annotations

import numpy as np
import pytest

from flowlaws.percolation.cascade import variance
from flowlaws.percolation.toys import cascades


def test_planted_ensemble_recovers_its_cascade():
    p = np.linspace(0, 1, 1024)
    C = cascades.planted_ensemble(p, 200, p_c=0.8, lam=2.0, first=0.4, n_levels=4, seed=3)
    assert C.shape == (200, 1024)
    np.testing.assert_allclose(C[:, -1].mean(), 5.0, atol=0.01)  # base 1 + four jumps
    found = variance.detect_cascade(variance.relative_variance(C), p)
    assert found.found and len(found.peaks) >= 3
    assert abs(found.estimate.p_c - 0.8) < 0.03 and abs(found.estimate.lam - 2.0) < 0.5


def test_kinematic_runs_conserve_mass_and_finish():
    model = cascades.KinematicModel(N=16)
    C = cascades.kinematic_runs(model, 20, seed=0)
    assert not np.isnan(C).any() and np.all(C[:, 0] == 16) and np.all(C[:, -1] == 1)
    assert np.all(np.diff(C, axis=1) <= 0)  # fewer components, larger C_max
    K = np.arange(1, 17)
    assert np.all(C >= np.ceil(16 / K))  # pigeonhole: the largest of K holds >= N/K


# issue 16: KinematicModel(D=0, kappa=0) ran 200,000 idle steps


@pytest.mark.parametrize(("kwargs", "error", "pattern"), [
    ({"D": 0, "kappa": 0}, ValueError, "kappa and D are both 0"),
    ({"D": 0.0, "kappa": 0.0}, ValueError, "kappa and D are both 0"),
    ({"D": float("nan")}, ValueError, "D must be a non-negative finite number"),
    ({"kappa": -1.0}, ValueError, "kappa must be a non-negative"),
    ({"merge": 0.0}, ValueError, "merge must be a positive"),
    ({"capture": float("inf")}, ValueError, "capture must be"),
    ({"N": 1}, ValueError, "N must be an integer >= 2, got 1"),
    ({"N": 64.0}, TypeError, "N must be an integer, got 64.0"),
])
def test_a_kinematic_model_that_cannot_move_or_merge_is_refused(kwargs, error, pattern):
    with pytest.raises(error, match=pattern):
        cascades.KinematicModel(**kwargs)


def test_a_kinematic_model_with_numpy_sizes_works():
    model = cascades.KinematicModel(N=np.int64(8), D=np.float32(0.05), kappa=0)
    assert type(model.N) is int
    C = cascades.kinematic_runs(model, 2, max_steps=50_000)
    assert C.shape == (2, 8) and np.all(C[:, -1] == 1)
