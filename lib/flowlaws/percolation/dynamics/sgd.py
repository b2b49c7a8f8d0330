"""The SGD ensembles of Part II: teacher data, planted pairs, learning-rate sweeps.

Each function runs a whole *ensemble* at once (states ``(R, dim)`` in the flat layout of
:class:`flowlaws.percolation.dynamics.ensemble.TwoLayerShape`) and returns plain tensors or arrays,
so a
chapter can cache the result with :func:`flowlaws.book.cache.calls.cached`.

Explained in: book/02_percolation/01_sde.ipynb (SDE and one-step moments),
02_trapping.ipynb (lr sweeps), 04_percolation.ipynb (a cyclic problem) and 05_dsi.ipynb
(the order parameter over SGD training).
"""
from __future__ import annotations

import math

import torch

from flowlaws.common.checks import as_float
from flowlaws.percolation.dynamics.ensemble import (
    TwoLayerShape,
    ensemble_forward,
    ensemble_init,
    per_sample_grads,
    split_params,
)
from flowlaws.percolation.dynamics.sde import (
    SDEPath,
    euler_maruyama,
    sgd_coefficients,
    sgd_discrete,
    sgd_sde,
)
from flowlaws.percolation.topology.clusters import ensemble_cmax

__all__ = [
    "cyclic_problem",
    "sgd_order_parameter",
    "teacher_data",
    "planted_pairs",
    "sde_path",
    "one_step_moments",
    "sgd_lr_sweep",
]


def cyclic_problem(n: int, n_base: int = 32, *, spread: float = 0.5, seed: int = 0
                   ) -> tuple[TwoLayerShape, torch.Tensor, torch.Tensor, torch.Tensor]:
    """A tanh network of ``n`` neurons on data with the cyclic symmetry ``x → Sx``.

    ``S`` rolls the ``n`` input coordinates. The inputs are ``n_base`` Gaussian points and all
    their rolls (``n · n_base`` rows), the target ``tanh(Σx/√n)`` is roll-invariant, and the
    initial state ``(1, dim)`` is an orbit: ``v_i = S^i v_0``, ``u_i = 1/n``, with
    ``v_0 = (1 + spread·ξ)/√n``. The loss is invariant under ``v_i → S v_{i−1}``, so gradient
    descent keeps the state an orbit and the neurons' distance matrix circulant.
    Returns ``(shape, X, Y, theta0)``, float32.
    """
    g = torch.Generator().manual_seed(seed)
    base = torch.randn(n_base, n, generator=g)
    X = torch.cat([torch.roll(base, k, dims=1) for k in range(n)])
    Y = torch.tanh(X.sum(1, keepdim=True) / math.sqrt(n))
    v0 = (1 + spread * torch.randn(n, generator=g)) / math.sqrt(n)
    V = torch.stack([torch.roll(v0, i) for i in range(n)])
    theta0 = torch.cat([V.flatten(), torch.full((n,), 1.0 / n)])[None]
    return TwoLayerShape(n, n, 1, "tanh"), X, Y, theta0


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
    return {"steps": (path.times / lr).round().astype(int).tolist(), "C": C.T.contiguous()}


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

    The first half of the neurons is drawn by :func:`ensemble_init`; each copy
    multiplies every weight by ``1 + rel_noise · ξ`` (ξ ~ N(0, 1)), so a pair starts at a
    relative distance of roughly ``rel_noise / 2``: near the permutation set ``{w_i = w_j}``.

    Explained in: book/02_percolation/02_trapping.ipynb.
    """
    if shape.width % 2:
        raise ValueError(f"planted pairs need an even width, got {shape.width}")
    half = TwoLayerShape(shape.n_in, shape.width // 2, shape.n_out, shape.activation)
    V, U = split_params(ensemble_init(half, n_runs, seed=seed, dtype=dtype), half)
    g = torch.Generator().manual_seed(seed + 1)
    V2 = V * (1 + rel_noise * torch.randn(V.shape, generator=g, dtype=dtype))
    U2 = U * (1 + rel_noise * torch.randn(U.shape, generator=g, dtype=dtype))
    return torch.cat([torch.cat([V, V2], 1).flatten(1), torch.cat([U, U2], 2).flatten(1)], 1)


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
) -> SDEPath:
    """Discrete SGD at several learning rates in ONE ensemble (one batch of tensor ops per step).

    Run ``k · R + r`` starts at ``theta0[r]`` and uses ``lrs[k]``; each run draws its own
    mini-batches (with replacement). Returns an :class:`SDEPath` whose times are
    step numbers; ``states`` has shape ``(T, len(lrs) · R, dim)``.

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
