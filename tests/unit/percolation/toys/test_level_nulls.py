"""The level-structured null families have the structure their names promise."""

from __future__ import annotations

import numpy as np
import pytest

from flowlaws.percolation.toys.level_nulls import FAMILIES, level_null, null_levels


@pytest.mark.parametrize("family", FAMILIES)
def test_every_family_gives_integer_staircases_with_shared_levels(family):
    rng = np.random.default_rng(0)
    for _ in range(5):
        C, p, levels = level_null(family, 16, 256, rng)
        assert C.shape == (16, 256) and p.shape == (256,) and np.all(np.diff(C, axis=1) >= 0)
        assert np.all(C == np.round(C)) and np.all(np.diff(levels) > 0)
        assert (1 <= len(levels) <= 2) if family == "transitions" else len(levels) >= 4


def test_the_level_families_are_not_geometric():
    rng = np.random.default_rng(1)
    for _ in range(20):
        gaps = np.diff(null_levels("arithmetic", rng))
        np.testing.assert_allclose(gaps, gaps[0])
        crowd = np.diff(null_levels("crowding", rng))
        ratios = crowd[:-1] / crowd[1:]
        assert np.all(ratios > 1) and np.ptp(ratios) > 0.05  # shrinking, not by one ratio


def test_an_unknown_family_is_refused():
    with pytest.raises(ValueError, match="family"):
        null_levels("geometric", np.random.default_rng(0))
