"""Tests of flowlaws.plots: power-law panels and Markdown tables."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from flowlaws.fits import Sweep, fit_power_law  # noqa: E402
from flowlaws.plots import markdown_table, plot_power_law, plot_sweeps, table_text  # noqa: E402


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


def test_table_text_formats_columns_in_order_and_escapes_bars() -> None:
    rows = [{"gate": "softmax", "k": None, "cos": 1.234e-17, "ok": True},
            {"gate": "a|b", "k": 2, "cos": 0.5, "ok": False}]
    text = table_text(rows, {"gate": "gate", "k": "top-k", "cos": "cosine", "ok": "holds"},
                      {"cos": ".1e"})
    lines = text.splitlines()
    assert lines[0] == "| gate | top-k | cosine | holds |"
    assert lines[1] == "|---|---|---|---|"
    assert lines[2] == "| softmax | — | 1.2e-17 | True |"
    assert lines[3] == r"| a\|b | 2 | 5.0e-01 | False |"
    assert markdown_table(rows, {"gate": "gate"}).data.splitlines()[2] == "| softmax |"


def test_table_text_names_missing_columns() -> None:
    with pytest.raises(KeyError, match="missing_key"):
        table_text([{"a": 1}], {"a": "A", "missing_key": "B"})
