"""Tests of flowlaws.percolation.cascade.config: presets, validation naming the field."""

from __future__ import annotations

import dataclasses

import pytest
from scipy import stats

from flowlaws.percolation.cascade import config
from flowlaws.percolation.cascade.config import FULL, READER, SMOKE, CascadeConfig


def test_presets_are_valid_frozen_and_the_default_is_the_reader_preset():
    for preset in (SMOKE, READER, FULL):
        assert preset.alpha >= preset.p_floor
        assert preset.n_power >= config.min_injections()
    assert CascadeConfig() == READER
    with pytest.raises(dataclasses.FrozenInstanceError):
        READER.alpha = 0.1  # type: ignore[misc]


@pytest.mark.parametrize("field, value", [
    ("n_power", -1), ("n_power", 5), ("n_null", 0), ("n_boot", 0), ("seed", -1),
    ("lam_claimed", 1), ("lam_claimed", float("nan")), ("lam_claimed", -2), ("alpha", 0),
    ("alpha", 1.5), ("lam_margin", 0), ("jitter", -0.1), ("window", (0.5, 0.2)),
    ("sizes", (64, 32)), ("sizes", (1,)), ("jump_ladder", (0.0,)), ("n_null", True),
])
def test_every_bad_field_is_refused_by_name(field, value):
    with pytest.raises((ValueError, TypeError), match=field):
        READER.replace(**{field: value})


def test_an_alpha_below_the_p_value_floor_is_refused():
    with pytest.raises(ValueError, match="p-value floor"):
        CascadeConfig(alpha=0.01, n_null=19)
    assert CascadeConfig(alpha=0.01, n_null=99).p_floor == 0.01


def test_replace_refuses_an_unknown_field():
    with pytest.raises(TypeError, match="n_deals"):
        READER.replace(n_deals=3)


def test_power_interval_is_clopper_pearson_and_17_injections_can_reach_0_8():
    low, high = config.power_interval(30, 40)
    ci = stats.binomtest(30, 40).proportion_ci(0.95, method="exact")
    assert (low, high) == pytest.approx((ci.low, ci.high))
    assert config.min_injections() == 17
    assert config.power_interval(16, 16)[0] < 0.8 <= config.power_interval(17, 17)[0]
