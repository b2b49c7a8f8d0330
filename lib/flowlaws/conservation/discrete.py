"""How discrete steps break a conservation law: the exact one-step change, and sweeps.

For a quadratic law ``h`` conserved by gradient flow, one GD or SGD step of size ``τ`` changes
``h`` by exactly ``τ² h(g_k)`` (:func:`one_step_change_quadratic`), so

    ``h(θ_k) − h(θ_0) = τ² Σ_{j<k} h(g_j) ≈ τ ∫_0^{τk} h(g(s)) ds``.

Two regimes follow, and the sweeps below measure both:

- **early training**, ``t = τk`` much shorter than the time the loss takes to fall
  appreciably: ``g_j ≈ g_0``, the error is ``≈ τ² k ‖h(g_0)‖``, exponent 2 in ``τ`` at fixed
  ``k`` and 1 in ``k`` at fixed ``τ``: the seed's ``O(τ² k)`` bound, attained;
- **at fixed time** ``t`` (any ``t``, converged or not) the error is ``≈ τ ‖∫_0^t h(g)‖``:
  exponent 1 in ``τ``. Once the run has converged the increments ``τ² h(g_j)`` vanish and the
  error stops growing with ``k``: ``O(τ² k)`` is then a loose bound, not the law.

The error along one run is a deterministic, curved function of ``k``: a power law fitted over
a window gives its *average* slope there, and the fit's standard error measures the curvature,
not an uncertainty. :func:`local_slope` and :func:`scan_step_sizes` give the slopes point by
point instead: ``d log err / d log k`` at fixed ``τ``, and ``d log err / d log τ`` at fixed
``k`` and at fixed ``t``, all against ``t = τ k`` (by the chain rule the slope in ``τ`` at
fixed ``k`` is the slope at fixed ``t`` plus the slope in ``k``).

Explained in: book/01_conservation/05_discrete_steps.ipynb.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from flowlaws.common.fits import PowerLawFit, fit_power_law
from flowlaws.conservation.flow import conservation_error
from flowlaws.conservation.losses import LossFn, Params
from flowlaws.conservation.training import train

__all__ = [
    "Law",
    "errors_at_fixed_steps",
    "errors_along_run",
    "errors_at_fixed_time",
    "Sweep",
    "discretisation_exponents",
    "local_slope",
    "StepSizeScan",
    "scan_step_sizes",
    "one_step_change_quadratic",
    "one_step_change_two_layer",
]


Law = Callable[[Params], torch.Tensor]


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

    ``train_kwargs`` go to :func:`train` (``optimizer``, ``batch_size``, ...).
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


def local_slope(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    """``d log y / d log x`` at every point: :func:`numpy.gradient` on log-log axes.

    Second-order central differences inside (for unevenly spaced ``x`` too), one-sided at the
    two ends. ``x``: ``(n,)``, increasing, positive; ``y``: positive, with ``n`` values along
    ``axis``; the result has ``y``'s shape. A zero or negative ``y`` gives NaN there.

    Explained in: book/01_conservation/05_discrete_steps.ipynb.
    """
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    if x.ndim != 1 or x.size < 2 or y.shape[axis] != x.size or np.any(x <= 0):
        raise ValueError(f"x must be (n,) positive with n = y.shape[axis] ≥ 2, got {x.shape}, "
                         f"y {y.shape}")
    with np.errstate(divide="ignore", invalid="ignore"):
        log_y = np.where(y > 0, np.log(np.where(y > 0, y, 1.0)), np.nan)
    return np.gradient(log_y, np.log(x), axis=axis)


@dataclass(frozen=True)
class StepSizeScan:
    """Runs at several step sizes, each to the same time, read at common ``k`` and common ``t``.

    Attributes:
        lrs: ``(m,)`` the step sizes ``τ``, increasing.
        ks: ``(p,)`` step counts ``1 ≤ k ≤ t_max / τ_max``, log-spaced (every run reaches them).
        by_k: ``(m, p)`` the error ``‖h(θ_k) − h(θ_0)‖`` of run ``i`` after ``ks[j]`` steps.
        ts: ``(q,)`` times ``τ_max ≤ t ≤ t_max``, log-spaced.
        by_t: ``(m, q)`` the error of run ``i`` at time ``ts[j]``, interpolated linearly in
            ``(log k, log err)`` between the two recorded steps around ``k = t / τ``.
        k_slope: ``(m, q)`` ``d log err / d log k`` at fixed ``τ`` (= ``d log err / d log t``).
        lr_slope_t: ``(m, q)`` ``d log err / d log τ`` at fixed ``t``.
        lr_slope_k: ``(m, p)`` ``d log err / d log τ`` at fixed ``k``; its time is
            ``lrs[i] · ks[j]``.

    Explained in: book/01_conservation/05_discrete_steps.ipynb.
    """

    lrs: np.ndarray
    ks: np.ndarray
    by_k: np.ndarray
    ts: np.ndarray
    by_t: np.ndarray
    k_slope: np.ndarray
    lr_slope_t: np.ndarray
    lr_slope_k: np.ndarray

    def at(self, t: float) -> dict[str, np.ndarray]:
        """The three slopes of every run at the grid time nearest ``t``, each ``(m,)``.

        The slope at fixed ``k`` is read at ``k = t / τ`` (nearest grid ``k``; NaN when the
        grid does not reach it), so all three refer to the same time. Keys ``"t"``,
        ``"k slope"``, ``"lr slope at fixed t"``, ``"lr slope at fixed k"``.
        """
        j = int(np.argmin(np.abs(np.log(self.ts / t))))
        last = self.ks[-1] ** 2 / self.ks[-2] if self.ks.size > 1 else self.ks[-1]
        at_k = np.full(self.lrs.shape, np.nan)
        for i, lr in enumerate(self.lrs):
            if t / lr <= last:  # NaN past the end of the k grid (by more than one spacing)
                at_k[i] = self.lr_slope_k[i, int(np.argmin(np.abs(np.log(self.ks * lr / t))))]
        return {
            "t": np.full(self.lrs.shape, self.ts[j]),
            "k slope": self.k_slope[:, j],
            "lr slope at fixed t": self.lr_slope_t[:, j],
            "lr slope at fixed k": at_k,
        }

    def rows(self, times: list[float]) -> list[dict[str, object]]:
        """One table row per time in ``times`` (kept when on the scan's grid): ``"t"`` and,
        for each slope of :meth:`at`, its range over the step sizes as text ("0.96 to 0.97";
        "—" where no run reaches it)."""
        rows = []
        for t in times:
            if not self.ts[0] * (1 - 1e-9) <= t <= self.ts[-1] * (1 + 1e-9):
                continue
            at = self.at(t)
            row: dict[str, object] = {"t": float(at.pop("t")[0])}
            for key, v in at.items():
                v = v[np.isfinite(v)]
                row[key] = f"{v.min():.2f} to {v.max():.2f}" if v.size else "—"
            rows.append(row)
        return rows


def scan_step_sizes(
    loss_fn: LossFn, params0: Params, law: Law, lrs: np.ndarray, t_max: float,
    *, n_points: int = 40, relative: bool = False, **train_kwargs,
) -> StepSizeScan:
    """Run every step size in ``lrs`` to time ``t_max`` (``round(t_max/τ)`` steps, the law
    recorded at every step) and read the local slopes of the error (:class:`StepSizeScan`).

    ``lrs``: ``(m,)`` with ``m ≥ 2`` and ``t_max ≥ 2 max(lrs)``; ``n_points`` log-spaced
    points on each grid; ``train_kwargs`` go to :func:`train` (``optimizer``, ...). One run
    per step size: every slope is a property of one deterministic path, with no sampling.

    Explained in: book/01_conservation/05_discrete_steps.ipynb.
    """
    lrs = np.sort(np.asarray(lrs, dtype=float))
    if lrs.size < 2 or not t_max >= 2 * lrs[-1]:
        raise ValueError(f"need ≥ 2 lrs and t_max ≥ 2 max(lrs), got {lrs} and t_max={t_max}")
    errors = []
    for lr in lrs:
        run = train(loss_fn, params0, lr=float(lr), n_steps=int(round(t_max / lr)),
                    laws=lambda p: {"h": law(p)}, **train_kwargs)
        errors.append(conservation_error(run, "h", relative=relative))
    ks = np.unique(np.geomspace(1, min(e.size - 1 for e in errors), n_points).round()).astype(int)
    by_k = np.stack([e[ks] for e in errors])
    ts = np.geomspace(lrs[-1], t_max, n_points)
    by_t = np.stack([_log_interp(ts / lr, e) for lr, e in zip(lrs, errors, strict=True)])
    return StepSizeScan(
        lrs, ks, by_k, ts, by_t,
        k_slope=local_slope(ts, by_t, axis=1),
        lr_slope_t=local_slope(lrs, by_t, axis=0),
        lr_slope_k=local_slope(lrs, by_k, axis=0),
    )


def _log_interp(k: np.ndarray, error: np.ndarray) -> np.ndarray:
    """``error`` (recorded at steps 0, 1, …) at fractional steps ``k ≥ 1``, log-log linear."""
    steps = np.arange(1, error.size)
    with np.errstate(divide="ignore"):
        return np.exp(np.interp(np.log(k), np.log(steps), np.log(error[1:])))


def one_step_change_quadratic(
    law: Callable[[Params], torch.Tensor],
    grads: Params,
    lr: float,
    *,
    params: Params | None = None,
    weight_decay: float = 0.0,
) -> torch.Tensor:
    """The exact change ``h(θ_1) − h(θ_0)`` of a quadratic law in one GD or SGD step.

    Let ``h(θ) = B(θ, θ)`` with ``B`` symmetric bilinear (``UᵀU − VVᵀ``, ``QᵢᵀQᵢ − KᵢᵀKᵢ``,
    ``‖A_i‖² − ‖C_i‖²`` ...). That ``h`` is conserved by the flow for every data set means
    ``B(θ, g) = 0`` for the gradient ``g`` of the loss (of any batch). Then the step
    ``θ_1 = θ_0 − τ g`` gives, with no remainder,

        ``h(θ_1) = h(θ_0) − 2τ B(θ_0, g) + τ² B(g, g) = h(θ_0) + τ² h(g)``,

    so each step moves the law by exactly ``τ² h(g_k)`` and ``h(θ_k) − h(θ_0) = τ² Σ_j h(g_j)``.
    With L2 weight decay ``θ_1 = (1 − τλ)θ_0 − τg`` and the change is
    ``((1 − τλ)² − 1) h(θ_0) + τ² h(g)``, first order in ``τ``: decay does not conserve ``h``.

    Args:
        law: ``θ -> h(θ)``, applied to the gradient dict as if it were parameters.
        grads: ``∇L(θ_0)`` with the same keys as the parameters (without the decay term).
        params: ``θ_0``, needed only when ``weight_decay`` is not zero.

    Explained in: book/01_conservation/05_discrete_steps.ipynb.
    """
    change = lr**2 * law(grads)
    if weight_decay:
        if params is None:
            raise ValueError("weight_decay needs params, the point θ_0 the step starts from")
        change = change + ((1 - lr * weight_decay) ** 2 - 1) * law(params)
    return change


def one_step_change_two_layer(
    grads: Params, lr: float, *, u: str = "U.weight", v: str = "V.weight"
) -> torch.Tensor:
    """``τ² (G_Uᵀ G_U − G_V G_Vᵀ)``, the exact one-step change of ``UᵀU − VVᵀ`` for ``f = U V x``.

    Shapes (PyTorch's ``out x in``): ``G_U`` is ``(n_out, width)``, ``G_V`` is
    ``(width, n_in)``; the result is ``(width, width)``. Holds for any loss of the product
    ``UV`` (linear :class:`~flowlaws.common.models.TwoLayer` without biases), full or mini-batch,
    because ``G_U = E Vᵀ`` and ``G_V = Uᵀ E`` with ``E = ∂L/∂(UV)`` make the first-order
    terms ``UᵀG_U + G_UᵀU`` and ``G_V Vᵀ + V G_Vᵀ`` equal.

    Explained in: book/01_conservation/05_discrete_steps.ipynb.
    """
    G_U, G_V = grads[u], grads[v]
    return lr**2 * (G_U.T @ G_U - G_V @ G_V.T)
