"""flowlaws.percolation.toys.fake_cascades: white and AR(1) noise, with known answers."""

from __future__ import annotations

import numpy as np
import pytest

from flowlaws.percolation.toys.fake_cascades import noise_signal


def test_noise_signals_are_white_or_ar1_and_reproducible():
    white, red = noise_signal("white", 20_000, 1), noise_signal("AR(1)", 20_000, 1)
    assert np.array_equal(white, noise_signal("white", 20_000, 1))
    lag1 = [np.corrcoef(x[:-1], x[1:])[0, 1] for x in (white, red)]
    assert abs(lag1[0]) < 0.03 and abs(lag1[1] - 0.9) < 0.03
    with pytest.raises(ValueError, match="kind"):
        noise_signal("pink", 10, 0)
