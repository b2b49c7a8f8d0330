"""Argument checks shared by the library: a bad value is refused with its name.

Explained in: CONTRIBUTING.md (conventions).
"""
from __future__ import annotations

import math

__all__ = [
    "check_positive_ints",
    "check_positive",
    "check_nonnegative",
]


def check_positive_ints(**sizes: int) -> None:
    for name, value in sizes.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")


def check_positive(**values: float) -> None:
    for name, value in values.items():
        if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
            raise ValueError(f"{name} must be a positive number, got {value!r}")


def check_nonnegative(**values: float) -> None:
    for name, value in values.items():
        if not (isinstance(value, int | float) and math.isfinite(value) and value >= 0):
            raise ValueError(f"{name} must be a non-negative number, got {value!r}")
