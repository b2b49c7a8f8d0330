"""Tests of flowlaws.conservation.figures, against answers known in advance."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from flowlaws.common.fits import fit_power_law  # noqa: E402
from flowlaws.common.models import SwiGLU  # noqa: E402
from flowlaws.conservation.count_tables import count_table  # noqa: E402
from flowlaws.conservation.discrete import StepSizeScan, Sweep  # noqa: E402
from flowlaws.conservation.figures import (  # noqa: E402  # noqa: E402
    plot_cosines,
    plot_counts_vs_closed_form,
    plot_lie_dims,
    plot_local_slopes,
    plot_power_law,
    plot_sweeps,
)
from flowlaws.conservation.laws import random_inputs  # noqa: E402


def test_figures_draw_one_artist_per_item():
    torch.manual_seed(0)
    model = SwiGLU(2, 2, 1).double()
    rows = count_table([("SwiGLU", "(2,2,1)", model, random_inputs(model, 2))], progress=False)
    fig = plot_lie_dims({"SwiGLU": rows[0]["count"]})
    (line,) = fig.axes[0].get_lines()
    assert list(line.get_ydata()) == [rows[0]["D"] - d for d in rows[0]["count"].dims[0]]
    fig2 = plot_cosines({"law": 1e-16, "not a law": 0.2})
    assert len(fig2.axes[0].patches) == 2
    fig3 = plot_counts_vs_closed_form(rows)
    assert len(fig3.axes[0].collections) == 1
    plt.close("all")


def _sweep(exponent: float, reference: float) -> Sweep:
    x = np.geomspace(1e-3, 1e-1, 6)
    y = 2.0 * x**exponent
    return Sweep(x, y, fit_power_law(x, y), reference)


def test_power_law_panel_draws_points_fit_and_reference_through_the_data() -> None:
    fig, ax = plt.subplots()
    sweep = _sweep(2.0, 1.0)
    plot_power_law(ax, sweep.x, sweep.errors, sweep.fit, reference=1.0)
    points, fitted, reference = ax.get_lines()
    np.testing.assert_allclose(fitted.get_ydata(), sweep.errors, rtol=1e-10)
    ref_y = reference.get_ydata()
    slope = np.diff(np.log(ref_y)) / np.diff(np.log(sweep.x))
    np.testing.assert_allclose(slope, 1.0)
    # pinned at the geometric mean of the points
    gm_x, gm_y = np.exp(np.log(sweep.x).mean()), np.exp(np.log(sweep.errors).mean())
    np.testing.assert_allclose(np.interp(np.log(gm_x), np.log(sweep.x), np.log(ref_y)),
                               np.log(gm_y), atol=1e-12)
    assert "2.000 ± 0.000" in fitted.get_label() and ax.get_xscale() == "log"
    plt.close(fig)


def test_plot_sweeps_makes_one_panel_per_sweep_with_labels() -> None:
    fig = plot_sweeps({"a": _sweep(2.0, 2.0), "b": _sweep(1.0, 1.0)}, x_labels={"a": "lr"})
    assert [ax.get_title() for ax in fig.axes] == ["a", "b"]
    assert [ax.get_xlabel() for ax in fig.axes] == ["lr", "b"]
    plt.close(fig)
    with pytest.raises(ValueError, match="at least one"):
        plot_sweeps({})


def test_local_slope_panels_draw_one_line_per_step_size() -> None:
    lrs, ks, ts = np.array([1e-3, 2e-3]), np.arange(1, 6), np.geomspace(2e-3, 5e-3, 4)
    by_k = lrs[:, None] ** 2 * ks  # err = τ² k exactly: the err / τ² curves coincide
    by_t = lrs[:, None] * ts
    scan = StepSizeScan(lrs, ks, by_k, ts, by_t, np.ones((2, 4)), np.ones((2, 4)),
                        2 * np.ones((2, 5)))
    fig = plot_local_slopes(scan, title="scan")
    k_ax, lr_ax, k_err, t_err = fig.axes
    assert len(k_ax.get_lines()) == 2 + 2  # two runs, two reference slopes
    assert len(lr_ax.get_lines()) == 2 * 2 + 2  # fixed t and fixed k per run
    first, second = k_err.get_lines()
    np.testing.assert_allclose(first.get_ydata(), second.get_ydata())
    np.testing.assert_allclose(t_err.get_lines()[0].get_ydata(), ts)
    plt.close("all")


def test_math_label_sets_ascii_formulas_as_math_and_leaves_words():
    from flowlaws.conservation.figures import math_label

    assert math_label("no PE: W_Q W_Q^T - W_K W_K^T") == r"no PE: $W_Q W_Q^\top - W_K W_K^\top$"
    assert math_label("SwiGLU: ||A_i||^2 - ||C_i||^2") == r"SwiGLU: $\|A_i\|^2 - \|C_i\|^2$"
    assert math_label("RoPE: row norms of W_Q, W_K") == "RoPE: row norms of $W_Q$, $W_K$"
    assert math_label("RoPE: 2x2 blocks, no PE, GELU") == "RoPE: 2x2 blocks, no PE, GELU"
