"""Tests of flowlaws.percolation.dynamics.loop, against answers known in advance."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from flowlaws.percolation.dynamics.loop import divergence_report, run_ensemble


def _halve(state, step):
    return {"theta": state["theta"] / 2}


def test_numpy_step_counts_run_like_python_ints():
    # issue 16: np.int64 counts (a sweep's values) were refused
    state0 = {"theta": torch.ones(3, 2)}
    a = run_ensemble(state0, _halve, np.int64(4), record_every=np.int64(2),
                     max_abs=np.float32(1e6))
    b = run_ensemble(state0, _halve, 4, record_every=2)
    np.testing.assert_array_equal(a.steps, [0, 2, 4])
    assert torch.equal(a.states["theta"], b.states["theta"])


@pytest.mark.parametrize(("kwargs", "error", "pattern"), [
    ({"n_steps": 10.0}, TypeError, "n_steps must be an integer, got 10.0 .*write 10"),
    ({"n_steps": 0}, ValueError, "n_steps must be a positive integer, got 0"),
    ({"n_steps": True}, TypeError, "n_steps must be an integer, got True"),
    ({"record_every": 2.0}, TypeError, "record_every must be an integer"),
    ({"max_abs": float("nan")}, ValueError, "max_abs must be a positive finite number"),
    ({"max_abs": 0}, ValueError, "max_abs must be a positive finite number, got 0"),
])
def test_bad_counts_are_refused_by_name(kwargs, error, pattern):
    args = {"n_steps": 3, **kwargs}
    with pytest.raises(error, match=pattern):
        run_ensemble({"theta": torch.ones(2, 2)}, _halve, **args)


def test_divergence_is_recorded_and_reported():
    def blow_up(state, step):
        theta = state["theta"].clone()
        theta[1] = theta[1] * 1e4
        return {"theta": theta}

    rec = run_ensemble({"theta": torch.ones(2, 2)}, blow_up, 3)
    assert rec.diverged_at.tolist() == [-1, 2]
    report = divergence_report(rec.diverged_at, 0.5)
    assert report == "1 of 2 runs diverged at lr=0.5: run 1 at step 2"
