"""Tests of flowlaws.common.checks: numpy scalars accepted, bad values refused by name."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from flowlaws.common import checks


@pytest.mark.parametrize("value", [4, np.int64(4), np.int32(4), np.uint8(4)])
def test_positive_ints_accept_python_and_numpy_integers(value):
    checks.check_positive_ints(n_steps=value)
    assert checks.as_int("n_steps", value) == 4 and type(checks.as_int("n", value)) is int


@pytest.mark.parametrize("value", [0.1, np.float32(0.1), np.float64(0.1), 1, np.int64(3)])
def test_positive_numbers_accept_python_and_numpy_scalars(value):
    checks.check_positive(lr=value)
    checks.check_nonnegative(lr=value)
    checks.check_finite(lr=value)


@pytest.mark.parametrize(("value", "error", "shown"), [
    (10.0, TypeError, "write 10"),
    (np.float64(10.0), TypeError, "write 10"),
    (2.5, TypeError, "2.5"),
    (float("nan"), TypeError, "nan"),
    (True, TypeError, "True"),
    (np.bool_(True), TypeError, "True"),
    ("4", TypeError, "'4'"),
    (None, TypeError, "None"),
    (torch.tensor(4), TypeError, "tensor"),
    (0, ValueError, "got 0"),
    (-3, ValueError, "got -3"),
    (np.int64(0), ValueError, "got 0"),
])
def test_positive_ints_refuse_by_name_without_contradiction(value, error, shown):
    with pytest.raises(error, match="n_steps must be") as info:
        checks.check_positive_ints(n_steps=value)
    assert shown in str(info.value)
    assert "np.int64(4)" not in str(info.value)


@pytest.mark.parametrize(("value", "error"), [
    (float("nan"), ValueError), (np.float32("nan"), ValueError), (float("inf"), ValueError),
    (-np.inf, ValueError), (0, ValueError), (-0.1, ValueError), (np.float32(-1), ValueError),
    (True, TypeError), (np.bool_(False), TypeError), ("0.1", TypeError), (1j, TypeError),
    (torch.tensor(0.1), TypeError), (np.array([0.1]), TypeError), (None, TypeError),
])
def test_positive_numbers_refuse_by_name(value, error):
    with pytest.raises(error, match="^lr must be") as info:
        checks.check_positive(lr=value)
    message = str(info.value)
    assert "positive" in message or "real number" in message


def test_nonnegative_accepts_zero_and_refuses_nan():
    checks.check_nonnegative(eta=0, absorb=np.float32(0))
    checks.check_nonnegative_ints(seed=0, other=np.int64(0))
    with pytest.raises(ValueError, match="eta must be a non-negative finite number, got nan"):
        checks.check_nonnegative(eta=float("nan"))
    with pytest.raises(ValueError, match="seed must be a non-negative integer, got -1"):
        checks.check_nonnegative_ints(seed=-1)
