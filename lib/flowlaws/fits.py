"""Power-law fits with uncertainty, and the sweeps that measure how discrete steps break a law.

For a quadratic law ``h`` conserved by gradient flow, one GD or SGD step of size ``τ`` changes
``h`` by exactly ``τ² h(g_k)`` (:func:`flowlaws.flow.one_step_change_quadratic`), so

    ``h(θ_k) − h(θ_0) = τ² Σ_{j<k} h(g_j) ≈ τ ∫_0^{τk} h(g(s)) ds``.

Two regimes follow, and the sweeps below measure both:

- **early training**, ``t = τk`` much shorter than the time the loss takes to fall
  appreciably: ``g_j ≈ g_0``, the error is ``≈ τ² k ‖h(g_0)‖``, exponent 2 in ``τ`` at fixed
  ``k`` and 1 in ``k`` at fixed ``τ``: the seed's ``O(τ² k)`` bound, attained;
- **at fixed time** ``t`` (any ``t``, converged or not) the error is ``≈ τ ‖∫_0^t h(g)‖``:
  exponent 1 in ``τ``. Once the run has converged the increments ``τ² h(g_j)`` vanish and the
  error stops growing with ``k``: ``O(τ² k)`` is then a loose bound, not the law.

Explained in: book/01_conservation/05_discrete_steps.ipynb.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from scipy import stats

from flowlaws.flow import LossFn, Params, conservation_error, train

Law = Callable[[Params], torch.Tensor]


@dataclass(frozen=True)
class PowerLawFit:
    """``y ≈ prefactor · x^exponent``, fitted by least squares on ``log y`` against ``log x``.

    Attributes:
        exponent, stderr: the slope on log-log axes and its standard error.
        prefactor: ``exp(intercept)``; ``intercept_stderr`` is the error of the intercept.
        r2: the coefficient of determination on log-log axes.
        n: the number of points.
    """

    exponent: float
    stderr: float
    prefactor: float
    intercept_stderr: float
    r2: float
    n: int

    def predict(self, x: np.ndarray | float) -> np.ndarray:
        """``prefactor · x^exponent``, for drawing the fitted line."""
        return self.prefactor * np.asarray(x, dtype=float) ** self.exponent

    def interval(self, level: float = 0.95) -> tuple[float, float]:
        """A Student-t confidence interval for the exponent (``n − 2`` degrees of freedom)."""
        half = stats.t.ppf(0.5 + level / 2, self.n - 2) * self.stderr
        return self.exponent - half, self.exponent + half

    def __str__(self) -> str:
        return f"{self.exponent:.3f} ± {self.stderr:.3f} (R² = {self.r2:.4f}, n = {self.n})"


def fit_power_law(x: np.ndarray, y: np.ndarray) -> PowerLawFit:
    """Fit ``y = c x^p`` by :func:`scipy.stats.linregress` on ``(log x, log y)``.

    Shapes: ``x`` and ``y`` are ``(n,)`` with ``n ≥ 3`` (two points leave no error estimate).

    Raises:
        ValueError: when a value is zero, negative or not finite (no logarithm), or the
            shapes disagree.
    """
    x, y = np.asarray(x, dtype=float).ravel(), np.asarray(y, dtype=float).ravel()
    if x.shape != y.shape or x.size < 3:
        raise ValueError(f"need x and y of the same length ≥ 3, got {x.size} and {y.size}")
    for name, v in (("x", x), ("y", y)):
        if not np.all(np.isfinite(v) & (v > 0)):
            raise ValueError(f"a power-law fit needs positive finite {name}, got {v[~(v > 0)]}")
    r = stats.linregress(np.log(x), np.log(y))
    return PowerLawFit(
        float(r.slope), float(r.stderr), float(np.exp(r.intercept)),
        float(r.intercept_stderr), float(r.rvalue**2), int(x.size),
    )


def _final_error(loss_fn: LossFn, params0: Params, law: Law, lr: float, n_steps: int,
                 relative: bool, **train_kwargs) -> float:
    run = train(loss_fn, params0, lr=lr, n_steps=n_steps, record_every=n_steps,
                laws=lambda p: {"h": law(p)}, **train_kwargs)
    return float(conservation_error(run, "h", relative=relative)[-1])


def errors_at_fixed_steps(
    loss_fn: LossFn, params0: Params, law: Law, lrs: np.ndarray, n_steps: int,
    *, relative: bool = False, **train_kwargs,
) -> np.ndarray:
    """``‖h(θ_k) − h(θ_0)‖_F`` after ``k = n_steps`` steps, one run per step size in ``lrs``.

    ``train_kwargs`` go to :func:`flowlaws.flow.train` (``optimizer``, ``batch_size``, ...).
    Returns shape ``(len(lrs),)``; ``relative=True`` divides by ``‖θ_0‖²``.
    """
    return np.array([_final_error(loss_fn, params0, law, float(lr), n_steps, relative,
                                  **train_kwargs) for lr in lrs])


def errors_along_run(
    loss_fn: LossFn, params0: Params, law: Law, lr: float, n_steps: int,
    *, n_points: int = 12, relative: bool = False, **train_kwargs,
) -> tuple[np.ndarray, np.ndarray]:
    """The error after ``k`` steps of one run at fixed ``lr``, at ``n_points`` log-spaced ``k``.

    Returns ``(ks, errors)``, both ``(m,)`` with ``m ≤ n_points`` distinct ``k`` in
    ``[1, n_steps]``; the run records the law (not the parameters) at every step.
    """
    run = train(loss_fn, params0, lr=lr, n_steps=n_steps, laws=lambda p: {"h": law(p)},
                **train_kwargs)
    ks = np.unique(np.geomspace(1, n_steps, n_points).round().astype(int))
    return ks, conservation_error(run, "h", relative=relative)[ks]


def errors_at_fixed_time(
    loss_fn: LossFn, params0: Params, law: Law, lrs: np.ndarray, t: float,
    *, relative: bool = False, **train_kwargs,
) -> tuple[np.ndarray, np.ndarray]:
    """The error at the same time ``t = τk`` for every step size: ``k = round(t/τ)`` steps.

    Each ``τ`` is adjusted to ``t/k`` so that every run ends exactly at ``t``.
    Returns ``(lrs_used, errors)``, both ``(len(lrs),)``.
    """
    steps = np.maximum(1, np.round(t / np.asarray(lrs, dtype=float))).astype(int)
    used = t / steps
    errors = [_final_error(loss_fn, params0, law, float(lr), int(k), relative, **train_kwargs)
              for lr, k in zip(used, steps, strict=True)]
    return used, np.array(errors)


@dataclass(frozen=True)
class Sweep:
    """One measured scaling: ``errors`` against ``x``, its fit and the predicted exponent."""

    x: np.ndarray
    errors: np.ndarray
    fit: PowerLawFit
    reference: float


def discretisation_exponents(
    loss_fn: LossFn, params0: Params, law: Law, *,
    lrs: np.ndarray, n_steps: int, lr: float, k_max: int, t: float, **train_kwargs,
) -> dict[str, Sweep]:
    """The three sweeps of the chapter, each fitted: τ at fixed ``k``, ``k`` at fixed τ, τ at t.

    Keys: ``"lr at fixed k"`` (``k = n_steps``, reference exponent 2), ``"k at fixed lr"``
    (``k ≤ k_max``, reference 1), ``"lr at fixed t"`` (reference 1). The first two predict
    the seed's ``O(τ² k)`` only in early training: choose ``τ k`` well below the time the
    loss takes to fall (see the module docstring).
    """
    by_lr = errors_at_fixed_steps(loss_fn, params0, law, lrs, n_steps, **train_kwargs)
    ks, by_k = errors_along_run(loss_fn, params0, law, lr, k_max, **train_kwargs)
    lrs_t, by_t = errors_at_fixed_time(loss_fn, params0, law, lrs, t, **train_kwargs)
    return {
        "lr at fixed k": Sweep(np.asarray(lrs, dtype=float), by_lr, fit_power_law(lrs, by_lr), 2.0),
        "k at fixed lr": Sweep(ks.astype(float), by_k, fit_power_law(ks, by_k), 1.0),
        "lr at fixed t": Sweep(lrs_t, by_t, fit_power_law(lrs_t, by_t), 1.0),
    }
