"""Plain SGD on ensembles of two-layer networks: a loop over steps, lr sweeps, the order
parameter over training, and SGD against its SDE.

:func:`sgd_discrete` is the book's one batched mini-batch SGD: ``θ ← θ − lr ĝ_B`` for every
run at once, stepped by :func:`flowlaws.percolation.dynamics.loop.run_ensemble`; its record
counts *steps* (an :class:`SGDPath`), never times ``lr · step``. The SDE that SGD is compared
with (:func:`sde_path`, :func:`one_step_moments`) is :mod:`flowlaws.percolation.dynamics.sde`.
States are ``(R, dim)`` in the flat layout of
:class:`flowlaws.percolation.dynamics.ensemble.TwoLayerShape`. The data and starts these runs
use are :mod:`flowlaws.percolation.toys.planted`.

Explained in: book/02_percolation/01_sde.ipynb (SGD against its SDE, one-step moments),
02_trapping.ipynb (lr sweeps), 03_reeb.ipynb and 05_dsi.ipynb (the order parameter over SGD
training).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from flowlaws.common.checks import as_int, check_positive
from flowlaws.percolation.dynamics.ensemble import (
    TwoLayerShape,
    check_ensemble_inputs,
    ensemble_forward,
    ensemble_init,
    forward_cache,
    per_sample_grads,
    split_params,
    weighted_grad,
)
from flowlaws.percolation.dynamics.loop import divergence_report, run_ensemble
from flowlaws.percolation.dynamics.sde import (
    SDEPath,
    euler_maruyama,
    sgd_coefficients,
    sgd_sde,
)
from flowlaws.percolation.topology.clusters import ensemble_cmax

__all__ = [
    "SGDPath",
    "sgd_discrete",
    "sgd_order_parameter",
    "sde_path",
    "one_step_moments",
    "sgd_lr_sweep",
]


@dataclass
class SGDPath:
    """An SGD ensemble recorded every few steps.

    Attributes:
        steps: ``(T,)`` int64 step numbers (0 first, ``n_steps`` last).
        states: ``(T, n_runs, dim)`` parameters after those steps (NaN after a run diverged).
        diverged_at: ``(n_runs,)`` int64, the step at which each run diverged, ``-1`` if never.
    """

    steps: np.ndarray
    states: torch.Tensor
    diverged_at: torch.Tensor

    @property
    def final(self) -> torch.Tensor:
        """``(n_runs, dim)`` the last recorded state."""
        return self.states[-1]

    @property
    def diverged(self) -> torch.Tensor:
        """``(n_runs,)`` bool, the runs that diverged."""
        return self.diverged_at >= 0

    def divergence_report(self) -> str:
        """One line naming the diverged runs and their steps (or saying that none did)."""
        return divergence_report(self.diverged_at)


def sgd_discrete(
    theta0: torch.Tensor, shape: TwoLayerShape, X: torch.Tensor, Y: torch.Tensor, *,
    lr: float | torch.Tensor, batch_size: int, n_steps: int, seed: int = 0,
    record_every: int = 1, max_abs: float = 1e6, progress: str | None = None,
) -> SGDPath:
    """Plain SGD ``θ ← θ − lr ĝ_B``, each run with its own batches (drawn with replacement).

    The book's one batched SGD loop for ensembles of two-layer networks, a plain loop over
    steps through :func:`~flowlaws.percolation.dynamics.loop.run_ensemble` (divergence
    included). ``lr`` is one step size for every run or a ``(n_runs,)`` tensor, one step size
    per run. Batches are drawn from a generator seeded with ``seed`` on ``theta0``'s device.
    Shapes: ``theta0`` ``(R, dim)``, ``X`` ``(N, n_in)``, ``Y`` ``(N, n_out)``. The record
    counts steps (:class:`SGDPath`); the time of the SDE that SGD approximates is
    ``lr · step``.

    Explained in: book/02_percolation/01_sde.ipynb
    """
    if isinstance(lr, torch.Tensor):
        if lr.shape != (theta0.shape[0],) or not bool(torch.isfinite(lr).all() & (lr > 0).all()):
            raise ValueError(f"lr must be a positive float or a positive (n_runs,) = "
                             f"({theta0.shape[0]},) tensor, got shape {tuple(lr.shape)}")
        step_size: float | torch.Tensor = lr.to(theta0)[:, None]
    else:
        check_positive(lr=lr)
        step_size = lr
    batch_size = as_int("batch_size", batch_size, minimum=1)
    check_ensemble_inputs(theta0, shape, X, Y)
    g = torch.Generator(device=theta0.device).manual_seed(as_int("seed", seed))

    def advance(state: dict[str, torch.Tensor], step: int) -> dict[str, torch.Tensor]:
        theta = state["theta"]
        idx = torch.randint(X.shape[0], (theta.shape[0], batch_size), generator=g,
                            device=theta.device)
        Xb = X[idx]
        weights = torch.full(idx.shape, 1.0 / batch_size, dtype=theta.dtype, device=theta.device)
        grad = weighted_grad(weights, forward_cache(theta, shape, Xb, Y[idx]), Xb)
        return {"theta": theta - step_size * grad}

    run = run_ensemble({"theta": theta0}, advance, n_steps, record_every=record_every,
                       max_abs=max_abs, progress=progress)
    return SGDPath(run.steps, run.states["theta"], run.diverged_at)


def sgd_order_parameter(lr: float, *, width: int = 8, n_in: int = 4, n_data: int = 64,
                        n_runs: int = 64, batch_size: int = 2, n_steps: int = 6000,
                        record_every: int = 20, label_noise: float = 0.3, spread: float = 0.3,
                        seed: int = 0, device: str | torch.device = "cpu") -> dict:
    """``C_max`` over SGD training of an ensemble of tanh students started near the merged set.

    The teacher is one tanh neuron (``n_in`` inputs, weights ``N(0, 1.5²/n_in)``) with label
    noise ``label_noise`` on ``n_data`` Gaussian inputs. Every student of ``width`` neurons
    starts on the invariant set of identical neurons (each a copy of the teacher neuron, output
    weight ``u*/width``), each weight multiplied by ``1 + spread·ξ``; each run then draws its
    own mini-batches of ``batch_size`` (with replacement). ``C_max`` is recorded every
    ``record_every`` steps by :func:`~flowlaws.percolation.topology.clusters.ensemble_cmax` (NaN
    for a
    diverged run).
    Returns ``{"steps": (T,) list, "C": (n_runs, T) float tensor on the CPU}``.

    Explained in: book/02_percolation/05_dsi.ipynb.
    """

    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n_data, n_in, generator=g)
    one = TwoLayerShape(n_in, 1, 1, "tanh")
    teacher = ensemble_init(one, 1, seed=seed + 5, scale=1.5, dtype=torch.float32)
    Y = ensemble_forward(teacher, one, X)[0] + label_noise * torch.randn(n_data, 1, generator=g)
    shape = TwoLayerShape(n_in, width, 1, "tanh")
    V, U = split_params(teacher, one)
    merged = torch.cat([V.repeat(1, width, 1).flatten(1),
                        (U.repeat(1, 1, width) / width).flatten(1)], 1)
    theta = merged.repeat(n_runs, 1) * (1 + spread * torch.randn(n_runs, shape.dim, generator=g))
    path = sgd_discrete(theta.to(device), shape, X.to(device), Y.to(device), lr=lr,
                        batch_size=batch_size, n_steps=n_steps, seed=seed + 1,
                        record_every=record_every)
    C = ensemble_cmax(path.states, shape).cpu()
    return {"steps": path.steps.tolist(), "C": C.T.contiguous()}


def sde_path(
    theta0: torch.Tensor, shape: TwoLayerShape, X: torch.Tensor, Y: torch.Tensor, *, lr: float,
    batch_size: int, n_steps: int, substeps: int = 1, seed: int = 0, record_every: int = 1,
) -> SDEPath:
    """The SGD SDE ``dθ = −∇L dt + √lr (Σ/B)^{1/2} dW`` by Euler–Maruyama with ``dt = lr/substeps``.

    ``substeps = 1`` is :func:`sgd_sde` (one EM step per SGD step: Gaussian SGD);
    larger values integrate the same SDE more finely, up to the same time ``t = lr · n_steps``.
    ``record_every`` counts SGD steps. Shapes: ``theta0`` ``(R, dim)``, ``X`` ``(N, n_in)``.

    Explained in: book/02_percolation/01_sde.ipynb.
    """
    coefficients = sgd_coefficients(shape, X, Y, batch_size)
    return euler_maruyama(coefficients, theta0, lr / substeps, n_steps * substeps, eta=lr,
                              seed=seed, record_every=record_every * substeps)


def _relative_error(estimate: torch.Tensor, exact: torch.Tensor) -> float:
    return float((estimate - exact).norm() / exact.norm())


def one_step_moments(
    theta: torch.Tensor, shape: TwoLayerShape, X: torch.Tensor, Y: torch.Tensor, *, lr: float,
    batch_size: int, n_samples: int, seed: int = 0,
) -> dict[str, float]:
    """Relative errors of the mean and covariance of one step from ``theta`` ``(dim,)``.

    ``n_samples`` independent steps of discrete SGD and of the SDE (one EM step, ``dt = lr``)
    are compared with the exact moments ``−lr ∇L`` and ``lr² Σ / B`` (``Σ`` the per-sample
    gradient covariance). Keys ``mean_sgd``, ``cov_sgd``, ``mean_sde``, ``cov_sde``; and
    ``mean_floor``, ``cov_floor``: the same errors for ``n_samples`` exact Gaussian draws, the
    size that sampling alone explains. Covariance errors are in the Frobenius norm.

    Explained in: book/02_percolation/01_sde.ipynb.
    """
    grads = per_sample_grads(theta[None], shape, X, Y)[0]  # (N, dim)
    mean, cov = -lr * grads.mean(0), lr**2 * torch.cov(grads.T, correction=0) / batch_size
    start = theta[None].repeat(n_samples, 1)
    out = {}
    for name, run in (("sgd", sgd_discrete), ("sde", sgd_sde)):
        step = run(start, shape, X, Y, lr=lr, batch_size=batch_size, n_steps=1, seed=seed).final
        step = step - start
        out[f"mean_{name}"] = _relative_error(step.mean(0), mean)
        out[f"cov_{name}"] = _relative_error(torch.cov(step.T), cov)
    g = torch.Generator(device=mean.device).manual_seed(seed + 1)
    evals, evecs = torch.linalg.eigh(cov)
    root = evecs * evals.clamp_min(0).sqrt()
    xi = torch.randn(n_samples, len(mean), generator=g, dtype=mean.dtype, device=mean.device)
    exact = mean + xi @ root.T
    out["mean_floor"] = _relative_error(exact.mean(0), mean)
    out["cov_floor"] = _relative_error(torch.cov(exact.T), cov)
    return out


def sgd_lr_sweep(
    theta0: torch.Tensor, shape: TwoLayerShape, X: torch.Tensor, Y: torch.Tensor,
    lrs: list[float], *, batch_size: int, n_steps: int, record_every: int = 1, seed: int = 0,
) -> SGDPath:
    """Discrete SGD at several learning rates in ONE ensemble (one batch of tensor ops per step).

    Run ``k · R + r`` starts at ``theta0[r]`` and uses ``lrs[k]``; each run draws its own
    mini-batches (with replacement). Returns an :class:`SGDPath`; ``states`` has shape
    ``(T, len(lrs) · R, dim)``.

    Explained in: book/02_percolation/02_trapping.ipynb.
    """
    R = theta0.shape[0]
    lr_per_run = torch.tensor(lrs, dtype=theta0.dtype, device=theta0.device).repeat_interleave(R)
    return sgd_discrete(theta0.repeat(len(lrs), 1), shape, X, Y, lr=lr_per_run,
                        batch_size=batch_size, n_steps=n_steps, seed=seed,
                        record_every=record_every)
