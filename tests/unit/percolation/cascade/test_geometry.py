"""Tests of flowlaws.percolation.cascade.geometry against levels whose answer is known."""

from __future__ import annotations

import numpy as np
import pytest

from flowlaws.percolation.cascade.geometry import THREE_LEVELS, geometry_test, off_ladder

SIG = np.full(6, 1e-3)


def ladder(lam: float, n: int, p_c: float = 0.9, first: float = 0.2) -> np.ndarray:
    return p_c - (p_c - first) * lam ** -np.arange(float(n))


@pytest.mark.parametrize("lam", [1.5, 2.0, 3.0])
def test_geometric_levels_pass_and_give_lambda_and_p_c(lam):
    rng = np.random.default_rng(int(lam * 10))
    peaks = ladder(lam, 5) + 1e-3 * rng.standard_normal(5)
    g = geometry_test(peaks, SIG[:5])
    assert g.geometric, g.reason
    assert g.lam == pytest.approx(lam, rel=0.05) and g.p_c == pytest.approx(0.9, abs=0.01)
    mirror = geometry_test(1 - peaks, SIG[:5])  # converging downward
    assert mirror.geometric and mirror.p_c == pytest.approx(0.1, abs=0.01)


def test_evenly_spaced_levels_are_refused_by_the_lambda_range():
    g = geometry_test(np.linspace(0.2, 0.8, 5), SIG[:5])
    assert not g.geometric and ("outside" in g.reason or "exclude 1" in g.reason
                                or "beyond" in g.reason)


def test_levels_crowding_by_a_power_law_are_refused_by_the_fit():
    peaks = 0.9 - 0.7 * (np.arange(5) + 1.0) ** -1.0
    g = geometry_test(peaks, SIG[:5])
    assert not g.geometric and "not geometric" in g.reason


def test_three_levels_need_an_independent_p_c():
    peaks = ladder(2.0, 3)
    g = geometry_test(peaks, SIG[:3])
    assert not g.geometric and g.reason == THREE_LEVELS
    assert geometry_test(peaks, SIG[:3], p_c=0.9, p_c_err=0.005).geometric
    wrong = geometry_test(peaks, SIG[:3], p_c=0.7, p_c_err=0.005)  # p_c inside the levels
    assert not wrong.geometric
    with pytest.raises(ValueError, match="p_c_err"):
        geometry_test(peaks, SIG[:3], p_c=0.9)


def test_a_shared_level_off_the_ladder_is_found():
    p = np.linspace(0, 1, 1024)
    levels = ladder(2.0, 4)
    rng = np.random.default_rng(0)

    def runs(lv):
        shifted = lv + 0.005 * rng.standard_normal((64, len(lv)))
        return 1.0 + (p[None, :, None] >= shifted[:, None, :]).sum(axis=2)

    from flowlaws.percolation.cascade.statistic import relative_variance_se
    g = geometry_test(levels, SIG[:4])
    for extra, off in ((0.05, True), (ladder(2.0, 5)[-1], False)):
        C = runs(np.append(levels, extra))
        R, se = relative_variance_se(C)
        found = off_ladder(p, C, R, se, levels, g, z_peak=2.0, tooth_tol=0.25, min_gap=10)
        assert (len(found) == 1 and abs(found[0] - extra) < 0.01) if off else len(found) == 0
