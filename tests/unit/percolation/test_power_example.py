"""The worked injection: a planted jump far above R's noise clears the bar, a tiny one cannot."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from flowlaws.percolation.power_example import plot_injection, worked_injection  # noqa: E402


def _staircases(n_runs: int = 48, n_points: int = 400, seed: int = 1) -> tuple:
    """Runs that climb from 10 by unit jumps at random steps: no cascade in them."""
    rng = np.random.default_rng(seed)
    p = np.arange(n_points, dtype=float)
    times = rng.uniform(0, n_points, size=(n_runs, 6))
    return 10.0 + (p[None, :, None] >= times[:, None, :]).sum(-1), p


def test_a_big_planted_jump_clears_the_bar_and_a_tiny_one_cannot():
    C, p = _staircases()
    kw = {"seed": 0, "n_null": 19, "n_boot": 20, "direction": 1}
    big = worked_injection(C, p, jump=40.0, **kw)
    tiny = worked_injection(C, p, jump=0.05, **kw)
    assert np.all(big.rise > big.need), big.lines()
    assert np.all(tiny.rise < tiny.need) and not tiny.found, tiny.lines()
    distance = np.abs(big.levels - big.p_c)
    assert len(big.levels) == 4 and np.allclose(distance[:-1] / distance[1:], 2.0)
    text = "\n".join(tiny.lines())
    assert "λ = 2" in text and "0 of 4 levels clear it" in text and "missed" in text
    assert np.all(tiny.ceiling < big.ceiling)
    fig = plot_injection(big)
    assert len(fig.axes) == 2
    plt.close(fig)


def test_bad_shapes_are_refused():
    C, p = _staircases()
    with pytest.raises(ValueError, match="C must be"):
        worked_injection(C[:, :-1], p)


def test_the_peak_count_reads_as_english():
    from flowlaws.percolation.power_example import _peaks

    assert [_peaks(n) for n in (0, 1, 4)] == ["0 persistent peaks", "1 persistent peak",
                                              "4 persistent peaks"]
