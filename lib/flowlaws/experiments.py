"""The experiments of Part II's first three chapters: SGD against its SDE, trapping, Reeb graphs.

Each function runs a whole *ensemble* at once (states ``(R, dim)`` in the flat layout of
:class:`flowlaws.sde.TwoLayerShape`) and returns plain tensors or arrays, so a chapter can cache
the result with :func:`flowlaws.cache.cached`.

Explained in: book/02_percolation/01_sde.ipynb (SDE and one-step moments),
book/02_percolation/02_trapping.ipynb (quartic well, lr sweeps, collapse fractions),
book/02_percolation/03_reeb.ipynb (Reeb graphs of runs).
"""

from __future__ import annotations

import math

import numpy as np
import torch
from scipy.stats import norm

from flowlaws import clusters, reeb, sde
from flowlaws.sde import SDEPath, TwoLayerShape

__all__ = [
    "teacher_data",
    "planted_pairs",
    "sde_path",
    "one_step_moments",
    "sgd_lr_sweep",
    "collapse_fractions",
    "quartic_lognormal_collapse",
    "quartic_escape_fraction",
    "partition_with_dead",
    "run_reeb",
]


def teacher_data(
    n_samples: int, n_in: int, n_teacher: int, *, label_noise: float, seed: int = 0,
    dtype: torch.dtype = torch.float32,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs ``X`` ``(N, n_in)`` ~ N(0, I) and targets ``Y`` ``(N, 1)`` of a tanh teacher.

    ``y = Σ_k (−1)^k tanh(v_k · x) + label_noise · ξ`` with ``n_teacher`` rows ``v_k`` ~ N(0, I).
    The label noise keeps the mini-batch gradients noisy at the minimum (without it SGD
    noise vanishes where the network interpolates).

    Explained in: book/02_percolation/01_sde.ipynb.
    """
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n_samples, n_in, generator=g, dtype=dtype)
    V = torch.randn(n_teacher, n_in, generator=g, dtype=dtype)
    signs = torch.tensor([(-1.0) ** k for k in range(n_teacher)], dtype=dtype)
    Y = torch.tanh(X @ V.T) @ signs[:, None]
    return X, Y + label_noise * torch.randn(n_samples, 1, generator=g, dtype=dtype)


def planted_pairs(
    shape: TwoLayerShape, n_runs: int, *, rel_noise: float, seed: int = 0,
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """``(n_runs, dim)`` states whose neuron ``i + width/2`` is a noisy copy of neuron ``i``.

    The first half of the neurons is drawn by :func:`flowlaws.sde.ensemble_init`; each copy
    multiplies every weight by ``1 + rel_noise · ξ`` (ξ ~ N(0, 1)), so a pair starts at a
    relative distance of roughly ``rel_noise / 2``: near the permutation set ``{w_i = w_j}``.

    Explained in: book/02_percolation/02_trapping.ipynb.
    """
    if shape.width % 2:
        raise ValueError(f"planted pairs need an even width, got {shape.width}")
    half = TwoLayerShape(shape.n_in, shape.width // 2, shape.n_out, shape.activation)
    V, U = sde.split_params(sde.ensemble_init(half, n_runs, seed=seed, dtype=dtype), half)
    g = torch.Generator().manual_seed(seed + 1)
    V2 = V * (1 + rel_noise * torch.randn(V.shape, generator=g, dtype=dtype))
    U2 = U * (1 + rel_noise * torch.randn(U.shape, generator=g, dtype=dtype))
    return torch.cat([torch.cat([V, V2], 1).flatten(1), torch.cat([U, U2], 2).flatten(1)], 1)


def sde_path(
    theta0: torch.Tensor, shape: TwoLayerShape, X: torch.Tensor, Y: torch.Tensor, *, lr: float,
    batch_size: int, n_steps: int, substeps: int = 1, seed: int = 0, record_every: int = 1,
) -> SDEPath:
    """The SGD SDE ``dθ = −∇L dt + √lr (Σ/B)^{1/2} dW`` by Euler–Maruyama with ``dt = lr/substeps``.

    ``substeps = 1`` is :func:`flowlaws.sde.sgd_sde` (one EM step per SGD step: Gaussian SGD);
    larger values integrate the same SDE more finely, up to the same time ``t = lr · n_steps``.
    ``record_every`` counts SGD steps. Shapes: ``theta0`` ``(R, dim)``, ``X`` ``(N, n_in)``.

    Explained in: book/02_percolation/01_sde.ipynb.
    """
    coefficients = sde.sgd_coefficients(shape, X, Y, batch_size)
    return sde.euler_maruyama(coefficients, theta0, lr / substeps, n_steps * substeps, eta=lr,
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
    grads = sde.per_sample_grads(theta[None], shape, X, Y)[0]  # (N, dim)
    mean, cov = -lr * grads.mean(0), lr**2 * torch.cov(grads.T, correction=0) / batch_size
    start = theta[None].repeat(n_samples, 1)
    out = {}
    for name, run in (("sgd", sde.sgd_discrete), ("sde", sde.sgd_sde)):
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
) -> SDEPath:
    """Discrete SGD at several learning rates in ONE ensemble (one batch of tensor ops per step).

    Run ``k · R + r`` starts at ``theta0[r]`` and uses ``lrs[k]``; each run draws its own
    mini-batches (with replacement). Returns an :class:`~flowlaws.sde.SDEPath` whose times are
    step numbers; ``states`` has shape ``(T, len(lrs) · R, dim)``.

    Explained in: book/02_percolation/02_trapping.ipynb.
    """
    R = theta0.shape[0]
    start = theta0.repeat(len(lrs), 1)
    lr_col = torch.tensor(lrs, dtype=theta0.dtype, device=theta0.device)
    lr_col = lr_col.repeat_interleave(R)[:, None]
    g = torch.Generator(device=theta0.device).manual_seed(seed)

    def coefficients(theta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        idx = torch.randint(X.shape[0], (theta.shape[0], batch_size), generator=g,
                            device=theta.device)
        grad = sde.per_sample_grads(theta, shape, X[idx], Y[idx]).mean(dim=1)
        return -lr_col * grad, torch.zeros_like(theta)

    return sde.euler_maruyama(coefficients, start, 1.0, n_steps, eta=0.0, seed=seed,
                              record_every=record_every)


def collapse_fractions(
    states: torch.Tensor, shape: TwoLayerShape, *, tol: float = clusters.DEFAULT_TOL,
    dead_tol: float = clusters.DEFAULT_DEAD_TOL,
) -> tuple[np.ndarray, np.ndarray]:
    """Fractions of *merged* and of *dead* neurons, each ``(T, R)`` for ``states`` ``(T, R, dim)``.

    Merged: alive and at relative distance below ``tol`` from another alive neuron (it lies in
    a synchronized pair, :func:`flowlaws.clusters.synchronized_pairs`). Dead:
    :func:`flowlaws.clusters.dead_neurons`. Runs whose state is not finite (diverged) are NaN.

    Explained in: book/02_percolation/02_trapping.ipynb.
    """
    V, U = sde.split_params(states.reshape(-1, shape.dim), shape)
    dead = clusters.dead_neurons(V, U, dead_tol)
    alive = ~dead
    close = clusters.relative_distance(V, U) < tol
    close &= alive[:, :, None] & alive[:, None, :]
    close &= ~torch.eye(shape.width, dtype=torch.bool, device=close.device)
    merged = close.any(dim=-1).double().mean(dim=-1)
    finite = torch.isfinite(states.reshape(-1, shape.dim)).all(dim=-1)
    nan = torch.tensor(float("nan"), dtype=torch.float64, device=merged.device)
    merged = torch.where(finite, merged, nan).reshape(states.shape[:2])
    dead = torch.where(finite, dead.double().mean(dim=-1), nan).reshape(states.shape[:2])
    return merged.cpu().numpy(), dead.cpu().numpy()


def quartic_lognormal_collapse(
    zetas: np.ndarray, *, mu: float, theta0: float, t_final: float, threshold: float
) -> np.ndarray:
    """``(len(zetas),)`` P(θ_T < threshold) if ``log θ`` were Brownian with drift ``μ − ζ²/2``.

    Near ``θ = 0`` Itô's formula gives ``d log θ = (μ − ζ²/2 − θ²) dt + ζ dB``; dropping ``θ²``
    leaves ``log θ_T ~ N(log θ0 + (μ − ζ²/2) T, ζ² T)``. The approximation ignores the wall
    ``−θ³`` that stops excursions upward, so it is only a guide, best where ``ζ² > 2μ``.

    Explained in: book/02_percolation/02_trapping.ipynb.
    """
    zetas = np.asarray(zetas, dtype=float)
    mean = math.log(theta0) + (mu - zetas**2 / 2) * t_final
    return norm.cdf((math.log(threshold) - mean) / (zetas * math.sqrt(t_final)))


def quartic_escape_fraction(
    zeta: float, *, mu: float, theta0: float, level: float, t_final: float, dt: float,
    n_runs: int, seed: int = 0,
) -> float:
    """Fraction of quartic-well runs from ``theta0`` that reach ``θ ≥ level`` before ``t_final``.

    Checked at every Euler–Maruyama step (all runs at once, float64). Compare with the
    supermartingale bound ``(theta0 / level)^p``, ``p = 1 − 2μ/ζ²`` (when ``ζ² > 2μ``).

    Explained in: book/02_percolation/02_trapping.ipynb.
    """
    coefficients = sde.quartic_coefficients(mu, zeta)
    theta = torch.full((n_runs, 1), float(theta0), dtype=torch.float64)
    g = torch.Generator().manual_seed(seed)
    reached = torch.zeros(n_runs, dtype=torch.bool)
    for _ in range(int(round(t_final / dt))):
        drift, factor = coefficients(theta)
        xi = torch.randn(theta.shape, generator=g, dtype=theta.dtype)
        theta = theta + drift * dt + math.sqrt(dt) * factor * xi
        reached |= theta[:, 0] >= level
    return float(reached.double().mean())


def partition_with_dead(
    V: torch.Tensor, U: torch.Tensor, tol: float = clusters.DEFAULT_TOL,
    dead_tol: float = clusters.DEFAULT_DEAD_TOL,
) -> list[frozenset]:
    """Merged groups of one network, with all dead neurons in ONE group (largest first).

    :func:`flowlaws.clusters.partition` leaves dead neurons as singletons (their relative
    distance is meaningless). Here they are joined: dead neurons all lie next to ``w = 0``, so
    they are (nearly) identical to each other, and dying becomes a merge into the dead group.
    ``V`` ``(width, n_in)``, ``U`` ``(n_out, width)``.

    Explained in: book/02_percolation/03_reeb.ipynb.
    """
    dead = torch.nonzero(clusters.dead_neurons(V, U, dead_tol)).flatten().tolist()
    pairs = clusters.synchronized_pairs(V, U, tol)
    return clusters.components(range(V.shape[-2]), pairs + list(zip(dead, dead[1:], strict=False)))


def run_reeb(
    states: torch.Tensor, shape: TwoLayerShape, times: np.ndarray, run: int,
    tol: float = clusters.DEFAULT_TOL, *, dead_group: bool = False,
):
    """The Reeb graph of run ``run`` of ``states`` ``(T, R, dim)`` at ``times`` ``(T,)``.

    ``dead_group=False`` uses :func:`flowlaws.clusters.partition` (as
    :func:`flowlaws.reeb.reeb_from_checkpoints`); ``True`` uses :func:`partition_with_dead`.
    Returns a ``networkx.DiGraph``.

    Explained in: book/02_percolation/03_reeb.ipynb.
    """
    V, U = sde.split_params(states[:, run], shape)
    split = partition_with_dead if dead_group else clusters.partition
    parts = [split(V[k], U[k], tol) for k in range(V.shape[0])]
    return reeb.reeb_graph(parts, [float(t) for t in times])
