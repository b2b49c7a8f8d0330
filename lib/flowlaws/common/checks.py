"""Argument checks shared by the library: a bad value is refused with its name.

Numbers come as Python ``int`` / ``float`` or as numpy scalars (``np.int64(4)``,
``np.float32(0.1)``: what indexing an array or a sweep gives), and both are accepted. A bool is
never a number here (``True`` is not a step count). A value of the wrong type is a
``TypeError`` and a number out of range (zero, negative, NaN, infinite) a ``ValueError``; both
messages name the argument, say what it must be and show what was given, so they never
contradict themselves. A float where a count is expected (``n_steps=10.0``) is refused: write
the integer.

Explained in: CONTRIBUTING.md (conventions).
"""
from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

__all__ = [
    "check_positive_ints",
    "check_nonnegative_ints",
    "check_positive",
    "check_nonnegative",
    "check_finite",
    "as_int",
    "as_float",
    "as_betas",
    "check_decoupled_decay",
]


def _shown(value: Any) -> str:
    """``value`` and its type, as an error message shows them."""
    if isinstance(value, np.generic):
        return f"{value.item()!r} (numpy {value.dtype})"
    if isinstance(value, bool | int | float | str):
        return f"{value!r} ({type(value).__name__})"
    text = repr(value)
    text = text if len(text) <= 60 else text[:57] + "..."
    return f"{text} (a {type(value).__module__}.{type(value).__qualname__})"


def _is_bool(value: Any) -> bool:
    return isinstance(value, bool | np.bool_)


def as_int(name: str, value: Any, *, minimum: int | None = None) -> int:
    """``value`` as a Python ``int``, or an error naming ``name``.

    Accepts ``int`` and numpy integers; refuses bools, floats (``10.0`` too: a count is written
    as an integer), strings and everything else with a ``TypeError``, and values below
    ``minimum`` with a ``ValueError``.
    """
    if _is_bool(value) or not isinstance(value, numbers.Integral):
        hint = ""
        if isinstance(value, numbers.Real) and not _is_bool(value):
            v = float(value)
            hint = f"; write {int(v)}" if math.isfinite(v) and v == int(v) else ""
        raise TypeError(f"{name} must be an integer, got {_shown(value)}{hint}")
    out = int(value)
    if minimum is not None and out < minimum:
        what = {1: "a positive integer", 0: "a non-negative integer"}.get(
            minimum, f"an integer >= {minimum}")
        raise ValueError(f"{name} must be {what}, got {out}")
    return out


def as_float(name: str, value: Any, *, positive: bool = False, nonnegative: bool = False,
             finite: bool = True) -> float:
    """``value`` as a Python ``float``, or an error naming ``name``.

    Accepts ``int``, ``float`` and numpy integer and floating scalars; refuses bools, complex
    numbers, strings, tensors and arrays (``TypeError``); with ``finite`` NaN and ±inf, with
    ``positive`` values ``≤ 0`` and with ``nonnegative`` values ``< 0`` (``ValueError``).
    """
    if _is_bool(value) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {_shown(value)}")
    out = float(value)
    sign = "positive " if positive else "non-negative " if nonnegative else ""
    desc = f"a {sign}{'finite ' if finite else ''}number"
    shown = value.item() if isinstance(value, np.generic) else value
    if (math.isnan(out) or (finite and math.isinf(out)) or (positive and not out > 0)
            or (nonnegative and not out >= 0)):
        raise ValueError(f"{name} must be {desc}, got {shown!r}")
    return out


def check_positive_ints(**sizes: Any) -> None:
    """Each value an integer ``≥ 1`` (Python or numpy); floats and bools refused."""
    for name, value in sizes.items():
        as_int(name, value, minimum=1)


def check_nonnegative_ints(**values: Any) -> None:
    """Each value an integer ``≥ 0`` (Python or numpy); floats and bools refused."""
    for name, value in values.items():
        as_int(name, value, minimum=0)


def check_positive(**values: Any) -> None:
    """Each value a finite number ``> 0`` (Python or numpy scalar)."""
    for name, value in values.items():
        as_float(name, value, positive=True)


def check_nonnegative(**values: Any) -> None:
    """Each value a finite number ``≥ 0`` (Python or numpy scalar)."""
    for name, value in values.items():
        as_float(name, value, nonnegative=True)


def check_finite(**values: Any) -> None:
    """Each value a finite real number (Python or numpy scalar), of any sign."""
    for name, value in values.items():
        as_float(name, value)


def as_betas(name: str, betas: Any) -> tuple[float, float]:
    """Adam's ``(β₁, β₂)`` as two floats in ``[0, 1)``, or an error naming ``name``.

    ``β₂ = 1`` would divide by ``1 − β₂ᵗ = 0`` at every step (every run NaN at step 1).
    """
    if not isinstance(betas, tuple | list) or len(betas) != 2:
        raise TypeError(f"{name} must be two numbers (beta1, beta2), got {_shown(betas)}")
    out = tuple(as_float(f"{name}[{i}]", b, nonnegative=True) for i, b in enumerate(betas))
    if not all(b < 1 for b in out):
        raise ValueError(f"{name} must lie in [0, 1), got {out} (beta = 1 divides by "
                         "1 - beta**t = 0)")
    return out


def check_decoupled_decay(lr: Any, weight_decay: Any, *, lr_name: str = "lr",
                          decay_name: str = "weight_decay") -> None:
    """Refuse an AdamW step that zeroes or flips the weights.

    Decoupled weight decay multiplies every weight by ``1 − lr · weight_decay`` at each step
    (before the Adam update): at ``lr · weight_decay = 1`` it zeroes them, above it flips
    their sign at every step (and above 2 the flips grow). A ``ValueError`` names both
    arguments and the factor.
    """
    product = as_float(lr_name, lr, positive=True) * as_float(decay_name, weight_decay,
                                                              nonnegative=True)
    if product >= 1:
        raise ValueError(
            f"{lr_name} · {decay_name} = {product:g} ≥ 1: AdamW's decoupled decay multiplies "
            f"the weights by 1 − {lr_name}·{decay_name} = {1 - product:g} at every step, which "
            f"{'zeroes' if product == 1 else 'flips the sign of'} them; lower {lr_name} or "
            f"{decay_name} so that their product is below 1")
