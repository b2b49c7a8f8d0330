"""Tests of flowlaws.percolation.lppl, against answers known in advance."""

from __future__ import annotations

import numpy as np
import pytest

from flowlaws.percolation import (
    lppl,
)

LAM, P_C, A = 2.0, 0.8, 0.4


def test_lppl_fit_recovers_lambda():
    q = np.linspace(0, 0.75, 600)
    y = lppl.lppl(q, 0.8, 0.4, 2 * np.pi / np.log(LAM), np.array([1.0, -0.5, 0.1, 0.05]))
    fit = lppl.fit_lppl(q, y)
    assert fit.lam == pytest.approx(LAM, rel=1e-6) and fit.p_c == pytest.approx(0.8, rel=1e-6)
    noisy = lppl.fit_lppl(q, y + 0.002 * np.random.default_rng(0).standard_normal(q.size))
    assert noisy.lam == pytest.approx(LAM, rel=0.02)
