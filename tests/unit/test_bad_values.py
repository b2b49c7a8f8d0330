"""Property-style test: public functions fed a table of bad values (issue 16).

Every case below is one public function with a valid set of arguments; each argument in turn
is replaced by every value of a table (NaN, ±inf, 0, negative, bools, strings, None, floats for
counts, numpy scalars, tensors of the wrong shape or dtype, empty data). The function must
either work or raise a ``ValueError`` / ``TypeError`` whose message names the argument; any
other exception (a bare ``RuntimeError`` from torch, ``ZeroDivisionError``, ``IndexError``) or
an error that does not say which argument was wrong fails the test. Values that can never be
right (NaN, inf, bools, strings, None for a number) must be refused, and the numpy scalar of a
valid value must work (``np.int64(4)`` is a 4).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
import torch

from flowlaws.common.models import TwoLayer
from flowlaws.common.optim import DivergenceError, UpdateRule, check_run_args
from flowlaws.conservation.losses import mse_loss, parameters_of
from flowlaws.conservation.training import train
from flowlaws.data.text import char_dataset
from flowlaws.percolation.dynamics import adaptive, sde, sgd
from flowlaws.percolation.dynamics.ensemble import TwoLayerShape, ensemble_init, ensemble_loss
from flowlaws.percolation.dynamics.loop import run_ensemble
from flowlaws.percolation.grokking.training import GrokConfig
from flowlaws.percolation.toys import quartic
from flowlaws.percolation.toys.cascades import KinematicModel

NAN, INF = float("nan"), float("inf")

# values that are never a number: each must be refused wherever a number is expected
NEVER_NUMBERS = [NAN, INF, -INF, np.float64(NAN), True, np.bool_(False), "1", None,
                 torch.tensor(1.0), [1]]
# values that may be fine or refused depending on the argument (zero seed, zero decay ...)
MAYBE = [0, 0.0, -1, -0.5, 10.0, 2.5, 1e-300, 1e300, np.int64(0), np.float32(-1.0),
         np.int64(-3)]

SHAPE = TwoLayerShape(3, 4, 1)
_g = torch.Generator().manual_seed(0)
X = torch.randn(8, 3, generator=_g, dtype=torch.float64)
Y = torch.randn(8, 1, generator=_g, dtype=torch.float64)
THETA = ensemble_init(SHAPE, 2, seed=1)

# tensors of the wrong shape, dtype or size, and empty data, for tensor arguments
BAD_TENSORS = {
    "theta0": [THETA[:, :-1], THETA[0], THETA[:0], THETA.long(), torch.full_like(THETA, NAN),
               THETA[None], torch.empty(0), None, THETA.numpy()],
    "X": [X[:, :2], X[:0], X[0], X.long(), X[None].expand(3, -1, -1), None, X.numpy()],
    "Y": [Y[:, 0], Y[:5], Y[:0], torch.cat([Y, Y], 1), Y.T, None],
}
# another floating dtype: promoted (works) or refused by name
MAYBE_TENSORS = {"theta0": [THETA.float(), THETA.half()], "X": [X.float()], "Y": [Y.float()]}


@dataclass
class Case:
    """One function: ``call(**kwargs)`` with ``valid`` arguments; ``numbers`` are checked
    against the number tables, ``tensors`` against :data:`BAD_TENSORS`."""

    name: str
    call: Callable[..., Any]
    valid: dict[str, Any]
    numbers: list[str]
    tensors: list[str] = field(default_factory=list)
    none_ok: list[str] = field(default_factory=list)  # None is a valid value ("no noise")
    inf_ok: list[str] = field(default_factory=list)  # +inf is a valid value ("no clipping")


def _train_linear(**kw):
    torch.manual_seed(0)
    model = TwoLayer(3, 4, 1).double()
    loss = mse_loss(model, kw.pop("X"), kw.pop("Y"))
    return train(loss, parameters_of(model), **kw)


def _run_ensemble(**kw):
    return run_ensemble({"theta": torch.ones(2, 2)}, lambda s, k: {"theta": s["theta"] / 2}, **kw)


def _ensemble_loss(theta0, X, Y):
    return ensemble_loss(theta0, SHAPE, X, Y)


CASES = [
    Case("TwoLayer", TwoLayer, {"n_in": 3, "width": 4, "n_out": 1},
         ["n_in", "width", "n_out"]),
    Case("TwoLayerShape", TwoLayerShape, {"n_in": 3, "width": 4, "n_out": 1},
         ["n_in", "width", "n_out"]),
    Case("ensemble_init", ensemble_init, {"shape": SHAPE, "n_runs": 2, "scale": 1.0, "seed": 0},
         ["n_runs", "scale", "seed"]),
    Case("check_run_args", check_run_args,
         {"optimizer": "sgd", "lr": 0.1, "n_steps": 4, "record_every": 1},
         ["lr", "n_steps", "record_every"]),
    Case("UpdateRule", UpdateRule, {"name": "adam", "lr": 0.1, "momentum": 0.9, "eps": 1e-8,
                                    "weight_decay": 0.0, "betas": (0.9, 0.999)},
         ["momentum", "eps", "weight_decay", "betas"]),  # lr may be a tensor (one per run)
    Case("training.train", _train_linear,
         {"X": X, "Y": Y, "optimizer": "sgd", "lr": 0.05, "n_steps": 3, "batch_size": 4,
          "record_every": 1, "seed": 0},
         ["lr", "n_steps", "batch_size", "record_every", "seed"], ["Y"]),
    Case("run_ensemble", _run_ensemble, {"n_steps": 3, "record_every": 1, "max_abs": 1e6},
         ["n_steps", "record_every", "max_abs"]),
    Case("ensemble_loss", _ensemble_loss, {"theta0": THETA, "X": X, "Y": Y}, [], ["Y"]),
    Case("adaptive.train_ensemble", adaptive.train_ensemble,
         {"theta0": THETA, "shape": SHAPE, "X": X, "Y": Y, "optimizer": "adam", "lr": 0.01,
          "n_steps": 3, "batch_size": 4, "alpha": 1.5, "truncation": 10.0, "eps": 1e-8,
          "weight_decay": 0.0, "seed": 0, "record_every": 1, "max_abs": 1e6,
          "betas": (0.9, 0.999)},
         ["lr", "n_steps", "batch_size", "alpha", "truncation", "eps", "weight_decay", "seed",
          "record_every", "max_abs", "betas"], ["theta0", "X", "Y"],
         none_ok=["batch_size"], inf_ok=["truncation"]),
    Case("sgd.sgd_discrete", sgd.sgd_discrete,
         {"theta0": THETA, "shape": SHAPE, "X": X, "Y": Y, "lr": 0.05, "batch_size": 2,
          "n_steps": 3, "seed": 0, "record_every": 1, "max_abs": 1e6},
         ["lr", "batch_size", "n_steps", "seed", "record_every", "max_abs"],
         ["theta0", "X", "Y"]),
    Case("sde.sgd_sde", sde.sgd_sde,
         {"theta0": THETA, "shape": SHAPE, "X": X, "Y": Y, "lr": 0.05, "batch_size": 2,
          "n_steps": 3, "seed": 0},
         ["lr", "batch_size", "n_steps", "seed"], ["theta0", "X", "Y"]),
    Case("quartic_collapse", quartic.quartic_collapse,
         {"zetas": [0.5, 1.0], "mu": 1.0, "theta0": 1.0, "t_final": 0.5, "dt": 0.05,
          "n_runs": 4, "threshold": 1e-6, "seed": 0},
         ["mu", "theta0", "t_final", "dt", "n_runs", "threshold", "seed"]),
    Case("GrokConfig", GrokConfig,
         {"p": 7, "fraction": 0.5, "d_model": 8, "n_heads": 2, "d_mlp": 4, "lr": 1e-3,
          "weight_decay": 1.0, "eps": 1e-8, "warmup": 2, "n_runs": 2, "seed": 0,
          "n_steps": 4, "log_every": 2, "checkpoint_every": 2, "betas": (0.9, 0.98)},
         ["p", "fraction", "d_model", "n_heads", "d_mlp", "lr", "weight_decay", "eps", "warmup",
          "n_runs", "seed", "n_steps", "log_every", "checkpoint_every", "betas"]),
    Case("KinematicModel", KinematicModel,
         {"N": 16, "kappa": 1.0, "D": 0.05, "capture": 0.5, "merge": 0.05},
         ["N", "kappa", "D", "capture", "merge"]),
    Case("char_dataset", char_dataset, {"text": "abcdefghij" * 3, "block_size": 4, "stride": 2},
         ["block_size", "stride"], none_ok=["stride"]),
]


def _names(message: str, argument: str) -> bool:
    return re.search(rf"(?<![\w.]){re.escape(argument)}(?![\w])", message) is not None


def _attempt(case: Case, argument: str, value: Any) -> BaseException | None:
    """``None`` when the call works, else the (named) error; fails on anything unnamed."""
    kwargs = {**case.valid, argument: value}
    try:
        case.call(**kwargs)
    except (ValueError, TypeError, DivergenceError) as error:  # divergence names the lr
        message = str(error)
        assert _names(message, argument), (
            f"{case.name}({argument}={value!r}) raised {type(error).__name__} "
            f"without naming {argument!r}: {message}")
        return error
    except Exception as error:  # noqa: BLE001 - any other type is the failure we look for
        pytest.fail(f"{case.name}({argument}={value!r}) raised {type(error).__name__}, "
                    f"not a ValueError/TypeError naming {argument!r}: {error}")
    return None


def _short(value: Any) -> str:
    if isinstance(value, torch.Tensor | np.ndarray):
        return f"{type(value).__name__}{tuple(value.shape)}{value.dtype}"
    return repr(value)[:30]


NUMBER_PARAMS = [(c, a) for c in CASES for a in c.numbers]
TENSOR_PARAMS = [(c, a) for c in CASES for a in c.tensors]


def test_every_case_works_with_its_valid_arguments():
    for case in CASES:
        case.call(**case.valid)


@pytest.mark.parametrize(("case", "argument"), NUMBER_PARAMS,
                         ids=[f"{c.name}-{a}" for c, a in NUMBER_PARAMS])
def test_numbers_are_refused_by_name_or_work(case, argument):
    valid = case.valid[argument]
    if isinstance(valid, tuple):  # betas: a pair, each entry bad in turn, and wrong lengths
        values = [(v, valid[1]) for v in NEVER_NUMBERS + MAYBE] + [
            (valid[0], v) for v in NEVER_NUMBERS + [1.0, -0.1]] + [valid[:1], (*valid, 0.5)]
        for value in values:
            error = _attempt(case, argument, value)
            never = any(v is None or isinstance(v, bool | np.bool_ | str | list | torch.Tensor)
                        or (isinstance(v, float | np.floating) and not math.isfinite(v))
                        for v in value)
            assert error is not None or not never, f"{case.name} accepted {argument}={value}"
        return
    for value in NEVER_NUMBERS:
        error = _attempt(case, argument, value)
        if (value is None and argument in case.none_ok) or (value == INF and argument in
                                                              case.inf_ok):
            continue
        assert error is not None, f"{case.name} accepted {argument}={_short(value)}"
    for value in MAYBE:
        _attempt(case, argument, value)


@pytest.mark.parametrize(("case", "argument"),
                         [(c, a) for c, a in NUMBER_PARAMS if not isinstance(c.valid[a], tuple)],
                         ids=[f"{c.name}-{a}" for c, a in NUMBER_PARAMS
                              if not isinstance(c.valid[a], tuple)])
def test_the_numpy_scalar_of_a_valid_value_works(case, argument):
    valid = case.valid[argument]
    for value in ((np.int64(valid), np.int32(valid)) if isinstance(valid, int)
                  else (np.float64(valid), np.float32(valid))):
        assert _attempt(case, argument, value) is None, (
            f"{case.name} refused {argument}={value!r}, the numpy scalar of {valid!r}")


@pytest.mark.parametrize(("case", "argument"), TENSOR_PARAMS,
                         ids=[f"{c.name}-{a}" for c, a in TENSOR_PARAMS])
def test_wrong_shapes_dtypes_and_empty_data_are_refused_by_name(case, argument):
    for value in BAD_TENSORS[argument]:
        error = _attempt(case, argument, value)
        assert error is not None, f"{case.name} accepted {argument}={_short(value)}"
    for value in MAYBE_TENSORS[argument]:
        _attempt(case, argument, value)


EMPTY = [
    ("char_dataset", lambda: char_dataset("", 4), "text"),
    ("quartic_collapse", lambda: quartic.quartic_collapse([], t_final=0.5, dt=0.05), "zetas"),
    ("ensemble_loss", lambda: ensemble_loss(THETA, SHAPE, X[:0], Y[:0]), "X"),
    ("mse_loss", lambda: mse_loss(TwoLayer(3, 4, 1).double(), X[:0], Y[:0]), "X"),
    ("train_ensemble", lambda: adaptive.train_ensemble(THETA, SHAPE, X[:0], Y[:0], lr=0.1,
                                                       n_steps=2), "X"),
    ("sgd_discrete", lambda: sgd.sgd_discrete(THETA, SHAPE, X[:0], Y[:0], lr=0.1, batch_size=2,
                                              n_steps=2), "X"),
]


@pytest.mark.parametrize(("name", "call", "argument"), EMPTY, ids=[e[0] for e in EMPTY])
def test_empty_data_is_refused_by_name(name, call, argument):
    with pytest.raises((ValueError, TypeError)) as info:
        call()
    assert _names(str(info.value), argument), f"{name}: {info.value}"
