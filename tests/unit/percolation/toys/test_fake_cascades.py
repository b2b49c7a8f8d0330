"""flowlaws.percolation.toys.fake_cascades: noise and evenly spaced levels, with known answers."""

from __future__ import annotations

import numpy as np
import pytest

from flowlaws.percolation.toys.fake_cascades import even_levels, noise_signal


def test_noise_signals_are_white_or_ar1_and_reproducible():
    white, red = noise_signal("white", 20_000, 1), noise_signal("AR(1)", 20_000, 1)
    assert np.array_equal(white, noise_signal("white", 20_000, 1))
    lag1 = [np.corrcoef(x[:-1], x[1:])[0, 1] for x in (white, red)]
    assert abs(lag1[0]) < 0.03 and abs(lag1[1] - 0.9) < 0.03
    with pytest.raises(ValueError, match="kind"):
        noise_signal("pink", 10, 0)


def test_even_levels_double_at_each_evenly_spaced_level():
    p = np.linspace(0, 1, 101)
    C = even_levels(p, 5, jitter=0.0)
    assert C.shape == (5, 101) and np.all(C[:, 0] == 1) and np.all(C[:, -1] == 16)
    jumps = p[1:][np.diff(C[0]) > 0]
    assert np.allclose(jumps, [0.2, 0.4, 0.6, 0.8])
    with pytest.raises(ValueError, match="n_runs"):
        even_levels(p, 1)
