"""flowlaws.percolation.dynamics.data_runs: chapter II.8's SGD ensembles on data."""

from __future__ import annotations

from types import SimpleNamespace

import matplotlib
import numpy as np
import torch

from flowlaws.percolation.dynamics.data_runs import data_run, run_figure, run_report

matplotlib.use("Agg")


def test_data_run_records_c_max_and_its_relative_variance():
    g = torch.Generator().manual_seed(0)
    X = torch.randn(32, 3, generator=g)
    Y = torch.sign(X[:, :1])
    r = data_run(X, Y, 4, 20, n_runs=5, lr=0.1, batch_size=4, init_scale=0.01,
                 record_every=5, seed=0)
    assert r["C"].shape == (5, 5) and list(r["steps"]) == [0, 5, 10, 15, 20]
    assert r["R"].shape == (5,) and 0.0 <= r["acc"] <= 1.0 and 0.0 <= r["flat"] <= 1.0
    assert "training accuracy" in run_report("toy", r) and "\n" in run_report("toy", r)
    cascade = SimpleNamespace(peaks=(10.0,), verdict="inconclusive", p_value=0.5)
    verdict = SimpleNamespace(cascade=cascade, seed=SimpleNamespace(raw_peaks=(5.0,)))
    fig = run_figure(r, verdict, "toy")
    assert len(fig.axes[1].lines) == 2  # R and the raw chain; no peaks of a cascade not found
    assert "inconclusive, p = 0.500" in fig.axes[0].get_title()
    assert np.isfinite(r["noise"])
