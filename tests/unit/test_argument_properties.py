"""Property-based test (Hypothesis) of the public API's argument checks (issue 27).

For each checked argument of a public function, Hypothesis draws values: every bad value (NaN,
±inf, bools, strings, None, floats where a count is expected, values out of range) must raise
a ``ValueError`` or ``TypeError`` whose message names the argument, and every good value
(Python or numpy scalars in range) must never raise. The functions checked are cheap to call,
or refuse before computing; ``max_examples`` is modest and deadlines are off, so the whole
file runs in seconds.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flowlaws.book.runtime import check_device
from flowlaws.common.checks import check_decoupled_decay
from flowlaws.common.models import TwoLayer
from flowlaws.conservation.laws import drift
from flowlaws.conservation.lie_count import count
from flowlaws.percolation.dynamics.ensemble import TwoLayerShape, ensemble_init
from flowlaws.percolation.dynamics.sgd import sgd_lr_sweep
from flowlaws.percolation.grokking.training import GrokConfig

SETTINGS = settings(max_examples=25, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])

NAN, INF = float("nan"), float("inf")
NOT_NUMBERS = st.one_of(st.sampled_from([NAN, -NAN, INF, -INF, np.float64(NAN), True, False,
                                         np.bool_(True), None, "1", "", [1], (2,),
                                         torch.tensor(1.0), np.array([1.0]), 1j]),
                        st.text(max_size=5))


def bad_counts(minimum: int) -> st.SearchStrategy:
    """Never a count: non-numbers, floats (even integral ones), integers below ``minimum``."""
    return st.one_of(NOT_NUMBERS, st.floats(allow_nan=True, allow_infinity=True),
                     st.integers(max_value=minimum - 1),
                     st.integers(-10**6, minimum - 1).map(np.int64))


def good_counts(low: int, high: int) -> st.SearchStrategy:
    return st.one_of(st.integers(low, high), st.integers(low, high).map(np.int64),
                     st.integers(low, high).map(np.int32))


BAD_POSITIVE = st.one_of(NOT_NUMBERS, st.floats(max_value=0.0), st.integers(max_value=0))
BAD_NONNEGATIVE = st.one_of(NOT_NUMBERS, st.floats(max_value=-1e-12, allow_infinity=True),
                            st.integers(max_value=-1))


def good_floats(low: float, high: float) -> st.SearchStrategy:
    return st.one_of(st.floats(low, high), st.floats(low, high).map(np.float64),
                     st.floats(low, high).map(np.float32).filter(lambda x: low <= x <= high))


@dataclass
class Arg:
    """One argument of one function: how to call it, and bad and good values."""

    name: str
    call: Callable[[Any], Any]
    bad: st.SearchStrategy
    good: st.SearchStrategy | None  # None: good values compute too long to try here


GROK = {"p": 7, "fraction": 0.5, "d_model": 8, "n_heads": 2, "d_mlp": 4, "lr": 1e-3,
        "weight_decay": 1.0, "eps": 1e-8, "warmup": 2, "n_runs": 2, "seed": 0, "n_steps": 4,
        "log_every": 2, "checkpoint_every": 2}


def grok(name: str) -> Callable[[Any], Any]:
    return lambda value: GrokConfig(**{**GROK, name: value})


torch.manual_seed(0)
MODEL = TwoLayer(3, 4, 2).double()
INPUTS = torch.randn(6, 3, dtype=torch.float64)
SHAPE = TwoLayerShape(2, 3, 1)
THETA = ensemble_init(SHAPE, 2, seed=0)
XS, YS = torch.randn(8, 2, dtype=torch.float64), torch.randn(8, 1, dtype=torch.float64)


def _targets_of(k: int) -> torch.Tensor:
    return torch.zeros(6, k, dtype=torch.float64)


ARGS = [
    Arg("p", grok("p"), bad_counts(2), good_counts(5, 60)),
    Arg("d_mlp", grok("d_mlp"), bad_counts(1), good_counts(1, 64)),
    Arg("n_runs", grok("n_runs"), bad_counts(1), good_counts(1, 64)),
    Arg("n_steps", grok("n_steps"), bad_counts(0), good_counts(0, 10**6)),
    Arg("warmup", grok("warmup"), bad_counts(0), good_counts(0, 1000)),
    Arg("lr", grok("lr"), BAD_POSITIVE, good_floats(1e-6, 0.9)),
    Arg("eps", grok("eps"), BAD_POSITIVE, good_floats(1e-12, 1.0)),
    Arg("weight_decay", grok("weight_decay"), BAD_NONNEGATIVE, good_floats(0.0, 10.0)),
    Arg("fraction", grok("fraction"), st.one_of(NOT_NUMBERS, st.floats(max_value=0.0),
                                                st.floats(min_value=1.0)), good_floats(0.1, 0.9)),
    Arg("n_points", lambda v: count(MODEL, INPUTS, n_points=v), bad_counts(1), None),
    Arg("min_gap", lambda v: count(MODEL, INPUTS, min_gap=v), BAD_POSITIVE, None),
    Arg("min_margin", lambda v: count(MODEL, INPUTS, min_margin=v), BAD_POSITIVE, None),
    Arg("max_depth", lambda v: count(MODEL, INPUTS, max_depth=v), bad_counts(0), None),
    Arg("targets", lambda k: drift(MODEL, INPUTS, _targets_of(k)),
        st.integers(1, 6).filter(lambda k: k != 2), st.just(2)),
    Arg("lrs", lambda v: sgd_lr_sweep(THETA, SHAPE, XS, YS, v, batch_size=2, n_steps=1),
        st.one_of(st.just([]), st.lists(BAD_POSITIVE, min_size=1, max_size=3)),
        st.lists(good_floats(1e-3, 0.5), min_size=1, max_size=3)),
    Arg("device", check_device,
        st.one_of(st.sampled_from(["cpu", "cuda", "mps", "meta"]).map(lambda s: s + "x"),
                  st.text("abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=6).map(
                      lambda s: "z" + s), st.integers(), st.floats()),
        st.sampled_from(["cpu", torch.device("cpu"), None, "meta"])),
]


def _names(message: str, argument: str) -> bool:
    return re.search(rf"(?<![\w.]){re.escape(argument)}(?![\w])", message) is not None


@pytest.mark.parametrize("arg", ARGS, ids=[a.name for a in ARGS])
@SETTINGS
@given(data=st.data())
def test_bad_values_raise_an_error_naming_the_argument(arg, data):
    value = data.draw(arg.bad, label=arg.name)
    with pytest.raises((ValueError, TypeError)) as info:
        arg.call(value)
    assert _names(str(info.value), arg.name), f"{arg.name}={value!r}: {info.value}"


@pytest.mark.parametrize("arg", [a for a in ARGS if a.good is not None],
                         ids=[a.name for a in ARGS if a.good is not None])
@SETTINGS
@given(data=st.data())
def test_good_values_never_raise(arg, data):
    arg.call(data.draw(arg.good, label=arg.name))


@SETTINGS
@given(lr=st.floats(1e-6, 1e3), weight_decay=st.floats(0.0, 1e3))
def test_decoupled_decay_is_refused_exactly_where_it_zeroes_or_flips_the_weights(lr,
                                                                                 weight_decay):
    if lr * weight_decay >= 1:
        with pytest.raises(ValueError, match=r"lr · weight_decay = .* ≥ 1"):
            check_decoupled_decay(lr, weight_decay)
    else:
        check_decoupled_decay(lr, weight_decay)
        assert math.isfinite(1 - lr * weight_decay) and 1 - lr * weight_decay > 0
