"""Holm's correction, the slider point and the model controls against independent answers."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest

from flowlaws.percolation.cascade.config import SMOKE
from flowlaws.percolation.cascade.judge import judge_cascade
from flowlaws.percolation.cascade.models import model_runs, synchronised_ratios
from flowlaws.percolation.cascade.slider import cascade_point, unselected_maxima
from flowlaws.percolation.cascade.stats import holm, power_fits
from flowlaws.percolation.toys.cascades import (
    hierarchical_runs,
    merged_fraction,
    planted_ensemble,
)


def _holm_by_definition(p: np.ndarray, alpha: float) -> np.ndarray:
    """Closed testing with Bonferroni on every intersection: H_i is rejected when every subset
    containing i has min p <= alpha / |subset| (Holm's procedure is its shortcut)."""
    m = len(p)
    out = np.zeros(m, dtype=bool)
    for i in range(m):
        out[i] = all(min(p[list(s)]) <= alpha / len(s)
                     for k in range(1, m + 1) for s in itertools.combinations(range(m), k)
                     if i in s)
    return out


def test_holm_agrees_with_closed_testing():
    rng = np.random.default_rng(0)
    for _ in range(200):
        p = rng.choice([0.001, 0.01, 0.0125, 0.02, 0.03, 0.05, 0.2], size=rng.integers(1, 6))
        assert np.array_equal(holm(p, 0.05), _holm_by_definition(p, 0.05)), p


def test_synchronised_ratios_match_the_model_without_delay_spread():
    N = 64
    C = hierarchical_runs(N, 3, spread=1e-3, seed=1)
    p = merged_fraction(N)
    L = int(np.log2(N))
    jumps = np.array([p[np.argmax(C[0] >= 2**g)] for g in range(1, L + 1)])
    expected = (N - N * 2.0 ** (1 - np.arange(1, L + 1)) + 1) / (N - 1)
    np.testing.assert_allclose(jumps, expected)
    d = N / (N - 1) - jumps
    np.testing.assert_allclose(d[:-1] / d[1:], synchronised_ratios(N))


def test_power_fits_is_the_injection_rule():
    assert not power_fits(128) and power_fits(256)
    assert not power_fits(178) and power_fits(179)
    assert power_fits(90, 2.0, 3) and not power_fits(89, 2.0, 3)  # three levels at a given p_c


def test_cascade_point_marks_peaks_only_for_a_cascade():
    p = np.linspace(0.0, 1.0, 512)
    C = planted_ensemble(p, 64, p_c=0.9, lam=2.0, first=0.2, n_levels=4, jitter=0.05,
                         noise=0.0, seed=1)
    v = judge_cascade(C, p, SMOKE.replace(n_power=0, sizes=()))
    assert v.verdict == "cascade"
    point = cascade_point(v)
    line = point.curves["fitted p_c"]
    assert np.isfinite(line).sum() == 2 and np.all(point.x[np.isfinite(line)] == v.p_c)
    assert point.marks.shape == (len(v.peaks), 2) and "cascade: λ = " in point.caption
    refused = cascade_point(dataclasses.replace(v, verdict="inconclusive"))
    assert refused.marks.shape == (0, 2) and "fitted p_c" not in refused.curves
    assert set(point.mark_sets()) == {"peaks of the cascade", "other local maxima"}


def test_unselected_maxima_are_the_detectors_peaks_away_from_the_cascade():
    x = np.linspace(0, 1, 201)
    R = sum(np.exp(-((x - c) / 0.03) ** 2) for c in (0.2, 0.5, 0.8))  # wider than 4 steps
    others = unselected_maxima(x, R, np.array([0.5]))
    np.testing.assert_allclose(np.sort(others[:, 0]), [0.2, 0.8])
    np.testing.assert_allclose(others[:, 1], np.interp(others[:, 0], x, R))
    assert len(unselected_maxima(x, R, np.array([0.2, 0.5, 0.8]))) == 0


def test_model_runs_refuses_an_unknown_model():
    with pytest.raises(ValueError, match="model"):
        model_runs("ring", 16, 2)
