"""flowlaws.percolation.dynamics.adam_runs: chapter II.6's experiments as library calls."""

from __future__ import annotations

import torch

from flowlaws.percolation.dynamics import adam_runs


def test_joint_state_check_confirms_both_halves_of_the_proposition():
    assert adam_runs.joint_state_check(3, 2, truncation=10.0, weight_decay=0.01, seed=0) == (
        True, True)


def test_trap_run_without_noise_and_its_row():
    task = adam_runs.adam_task(3, 2, 4, 16, label_noise=0.1, perturbation=1e-3, seed=0)
    assert task.theta0.shape == (4, task.shape.dim) and task.pairs == ((0, 1), (2, 3))
    config = {"opt": "sgd", "lr": 0.05, "alpha": 2.0, "batch": 0}
    r = adam_runs.trap_run(task, **config, n_steps=20, truncation=10.0, weight_decay=0.0,
                           seed=0)
    assert r["d"].shape[1:] == (4, 2) and r["eff_lr"] == 0.05
    (row,) = adam_runs.trap_rows([(config, r)])
    assert row["configuration"] == "sgd, lr=0.05, no noise"
    assert row["merged"] == float((r["d"][-1] < 0.05).float().mean())
    assert torch.isfinite(torch.tensor(row["loss"]))


def test_cascade_run_records_c_max_of_every_run():
    task = adam_runs.adam_task(3, 2, 4, 16, label_noise=0.1, perturbation=1e-3, seed=0)
    out = adam_runs.cascade_run(task, "adam", 0.01, 3, 0, width=4, teacher_width=2,
                                init_scale=0.1, n_steps=20, alpha=1.5, truncation=10.0,
                                weight_decay=0.0, record_every=5, seed=0)
    assert out["C"].shape == (3, len(out["steps"])) and out["steps"][-1] == 20
