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

from flowlaws.book.cache import stored_type
from flowlaws.common.checks import as_float, as_int, check_positive
from flowlaws.percolation.dynamics.ensemble import (
    TwoLayerShape,
    check_ensemble_inputs,
    ensemble_forward,
    ensemble_init,
    ensemble_loss,
    forward_cache,
    per_sample_grads,
    split_params,
    weighted_grad,
)
from flowlaws.percolation.dynamics.loop import RecordedPath, run_ensemble
from flowlaws.percolation.dynamics.sde import (
    SDEPath,
    euler_maruyama,
    sgd_coefficients,
    sgd_sde,
)
from flowlaws.percolation.topology.clusters import (
    collapse_fractions,
    ensemble_cmax,
    mean_over_finite,
)

__all__ = [
    "SGDPath",
    "sgd_discrete",
    "sgd_order_parameter",
    "sde_path",
    "one_step_moments",
    "sgd_lr_sweep",
    "merge_fraction_sweep",
    "start_curves",
    "SGDPhase",
    "sgd_phases",
    "sgd_against_sde",
]


@stored_type
@dataclass
class SGDPath(RecordedPath):
    """An SGD ensemble recorded every few steps.

    Attributes:
        steps: ``(T,)`` int64 step numbers (0 first, ``n_steps`` last).
        states: ``(T, n_runs, dim)`` parameters after those steps (NaN after a run diverged).
        diverged_at: ``(n_runs,)`` int64, the step at which each run diverged, ``-1`` if never.
    """

    steps: np.ndarray
    states: torch.Tensor
    diverged_at: torch.Tensor


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
    if isinstance(lrs, str | bytes) or not hasattr(lrs, "__len__") or len(lrs) == 0:
        raise ValueError(f"lrs must be a non-empty list of positive learning rates, got {lrs!r}")
    lrs = [as_float(f"lrs[{i}]", lr, positive=True) for i, lr in enumerate(lrs)]
    R = theta0.shape[0]
    lr_per_run = torch.tensor(lrs, dtype=theta0.dtype, device=theta0.device).repeat_interleave(R)
    return sgd_discrete(theta0.repeat(len(lrs), 1), shape, X, Y, lr=lr_per_run,
                        batch_size=batch_size, n_steps=n_steps, seed=seed,
                        record_every=record_every)


def merge_fraction_sweep(
    theta0: torch.Tensor, shape: TwoLayerShape, X: torch.Tensor, Y: torch.Tensor,
    lrs: list[float], *, batch_size: int, n_steps: int, record_every: int = 1, seed: int = 0,
) -> dict[str, torch.Tensor]:
    """The fractions of merged and of dead neurons along :func:`sgd_lr_sweep`.

    Returns ``{"steps": (T,) int64, "merged": (T, len(lrs) · R), "dead": (T, len(lrs) · R)}``
    (:func:`~flowlaws.percolation.topology.clusters.collapse_fractions`, NaN for a diverged
    run), run ``k · R + r`` being ``theta0[r]`` ``(R, dim)`` trained at ``lrs[k]``. Plain
    tensors, so a chapter can cache the result.

    Explained in: book/02_percolation/02_trapping.ipynb
    """
    path = sgd_lr_sweep(theta0, shape, X, Y, list(lrs), batch_size=batch_size, n_steps=n_steps,
                        record_every=record_every, seed=seed)
    merged, dead = collapse_fractions(path.states, shape)
    return {"steps": torch.as_tensor(path.steps), "merged": torch.as_tensor(merged),
            "dead": torch.as_tensor(dead)}


def start_curves(sweep: dict[str, torch.Tensor], k: int, starts: list[str], n_per_start: int,
                 nets: int | None = None) -> dict[str, tuple[np.ndarray, np.ndarray, int]]:
    """Per start, the mean merged and dead fractions ``(T,)`` at learning rate ``k`` of a
    :func:`merge_fraction_sweep` whose ``theta0`` stacked ``n_per_start`` runs of each start in
    the order ``starts``, over the first ``nets`` runs of each, and how many of them diverged.

    A diverged run is counted, not averaged (the mean is NaN once every run has diverged).
    Returns ``{start: (merged (T,), dead (T,), n_diverged)}``.

    Explained in: book/02_percolation/02_trapping.ipynb
    """
    nets = n_per_start if nets is None else nets
    if not 1 <= nets <= n_per_start:
        raise ValueError(f"nets must lie in [1, n_per_start = {n_per_start}], got {nets}")
    out = {}
    for s, name in enumerate(starts):
        first = (len(starts) * k + s) * n_per_start
        m = sweep["merged"][:, first:first + nets].numpy()
        d = sweep["dead"][:, first:first + nets].numpy()
        out[name] = (mean_over_finite(m, 1), mean_over_finite(d, 1), int(np.isnan(m[-1]).sum()))
    return out


@stored_type
@dataclass(frozen=True)
class SGDPhase:
    """One phase of :func:`sgd_phases`: its step size, mini-batch size and number of steps."""

    lr: float
    batch_size: int
    n_steps: int


def sgd_phases(
    theta0: torch.Tensor, shape: TwoLayerShape, X: torch.Tensor, Y: torch.Tensor,
    phases: list[SGDPhase], *, record_every: int = 1, seed: int = 0,
    labels: list[str] | None = None,
) -> SGDPath:
    """:func:`sgd_discrete` in phases, each from where the last one stopped: a noisy phase
    (large ``lr / batch_size``), say, then a quiet one.

    Phase ``i`` draws its batches with ``seed + i``; ``labels[i]`` names its progress bar
    (``None``: no bars). The record joins the phases: steps count from the first phase's start
    (``(T,)``, the shared checkpoint between two phases kept once), ``states``
    ``(T, n_runs, dim)``, and ``diverged_at`` the step, so counted, at which a run diverged.

    Explained in: book/02_percolation/03_reeb.ipynb
    """
    if not phases:
        raise ValueError("phases is empty: give at least one SGDPhase")
    if labels is not None and len(labels) != len(phases):
        raise ValueError(f"labels has {len(labels)} entries for {len(phases)} phases")
    steps, states = [], []
    diverged_at = torch.full((theta0.shape[0],), -1, dtype=torch.int64)
    theta, offset = theta0, 0
    for i, phase in enumerate(phases):
        path = sgd_discrete(theta, shape, X, Y, lr=phase.lr, batch_size=phase.batch_size,
                            n_steps=phase.n_steps, record_every=record_every, seed=seed + i,
                            progress=None if labels is None else labels[i])
        first = 0 if i == 0 else 1
        steps.append(offset + path.steps[first:])
        states.append(path.states[first:])
        new = (diverged_at < 0) & (path.diverged_at >= 0)
        diverged_at[new] = offset + path.diverged_at[new]
        theta, offset = path.final, offset + phase.n_steps
    return SGDPath(np.concatenate(steps), torch.cat(states), diverged_at)


def sgd_against_sde(
    theta0: torch.Tensor, shape: TwoLayerShape, X: torch.Tensor, Y: torch.Tensor, *, lr: float,
    batch_size: int, t_max: float, substeps: int, seed: int = 0, n_records: int = 50,
) -> dict[str, torch.Tensor | dict[str, torch.Tensor]]:
    """SGD, its SDE with ``dt = lr`` and with ``dt = lr / substeps``, from the same ``theta0``
    ``(R, dim)`` up to the time ``t_max`` (``round(t_max / lr)`` SGD steps), about ``n_records``
    records each.

    Returns ``{"times": (T,) lr · step, "losses": {name: (T, R) training loss}}`` with the
    names ``"SGD"``, ``"SDE, dt = lr"`` and ``"SDE, dt = lr/<substeps>"``; on the CPU, so a
    chapter can cache it.

    Explained in: book/02_percolation/01_sde.ipynb
    """
    n = round(t_max / lr)
    kw = {"lr": lr, "batch_size": batch_size, "n_steps": n,
          "record_every": max(1, n // n_records), "seed": seed}
    runs = {
        "SGD": sgd_discrete(theta0, shape, X, Y, **kw),
        "SDE, dt = lr": sde_path(theta0, shape, X, Y, **kw),
        f"SDE, dt = lr/{substeps}": sde_path(theta0, shape, X, Y, substeps=substeps, **kw),
    }
    losses = {k: torch.stack([ensemble_loss(s, shape, X, Y) for s in p.states]).cpu()
              for k, p in runs.items()}
    # SGD counts steps; the SDE with dt = lr records the time lr · step
    return {"times": torch.as_tensor(runs["SDE, dt = lr"].times), "losses": losses}

