"""II.7's figures: bands and markers from known curves; a first-point spike is clipped."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from flowlaws.percolation.grokking.figures import (  # noqa: E402
    plot_accuracy_bands,
    plot_variance_panels,
    variance_top,
)


def test_bands_hold_the_median_and_mark_each_grokked_run():
    steps = np.arange(10.0)
    test = np.tile(np.linspace(0, 1, 10)[:, None], (1, 5)) * np.array([0.6, 0.8, 1.0, 1.2, 1.4])
    test = test.clip(0, 1)
    grokked = np.array([3.0, 5.0, np.nan, 7.0, 8.0])
    fig = plot_accuracy_bands(steps, np.ones_like(test), test, grokked, chance=0.1)
    ax = fig.axes[0]
    medians = {line.get_label(): line.get_ydata() for line in ax.get_lines()}
    assert np.allclose(medians["test (median)"], np.median(test, axis=1))
    marks = [line for line in ax.get_lines() if "grokking step" in line.get_label()][0]
    assert list(marks.get_xdata()) == [3.0, 5.0, 7.0, 8.0] and "4 of 5" in marks.get_label()
    plt.close(fig)
    with pytest.raises(ValueError, match="grokked"):
        plot_accuracy_bands(steps, test, test, grokked[:3], chance=0.1)


def test_a_first_point_spike_is_clipped_and_written_beside_the_axis():
    assert variance_top([np.array([3.1, 0.2, 0.3, 0.25])]) == (pytest.approx(0.345), [3.1])
    assert variance_top([np.array([0.4, 0.2, 0.3])]) == (None, [])
    x = np.arange(6.0)
    C = np.array([[0.1, 1, 2, 3, 2, 1], [2.0, 1.2, 2.1, 3.3, 2.2, 1.1], [0.0, 1, 2, 3, 2, 1]])
    fig = plot_variance_panels({"frequency, raw step": (C, x)}, ["frequency"], hows=["raw step"])
    ax = fig.axes[0]
    assert ax.get_ylim()[1] < 1.0, "the spike at step 0 does not set the scale"
    assert any("off scale" in t.get_text() for t in ax.texts)
    plt.close(fig)


def test_a_spike_just_after_the_first_point_is_clipped_too():
    """II.7's reader preset: R = 0 at step 0 (every run at 1), 3.1 at step 10, then below 1."""
    R = np.concatenate([[0.0, 3.1, 1.2], np.linspace(0.9, 0.2, 298)])
    top, clipped = variance_top([R])
    assert top == pytest.approx(1.15 * R[6:].max()) and clipped == [3.1]  # head: 2 % = 6 points
    assert variance_top([R], head=1) == (None, [])
    x = np.arange(301.0) * 10
    rng = np.random.default_rng(0)
    C = 1 + rng.poisson(np.linspace(0.5, 5, 301), size=(32, 301)).astype(float)
    C[:, 0] = 1
    C[:4, 1] = 30  # four runs leave 1 early: R spikes at step 10
    fig = plot_variance_panels({"frequency, raw step": (C, x)}, ["frequency"], hows=["raw step"])
    ax = fig.axes[0]
    texts = [t.get_text() for t in ax.texts]
    assert any("off scale" in t and "at 10" in t for t in texts), texts
    assert ax.get_ylim()[1] < 2.0
    plt.close(fig)
