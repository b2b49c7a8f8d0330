"""Data and starting states with a planted answer, for Part II's SGD ensembles.

A tanh teacher with label noise (:func:`teacher_data`), data with a cyclic symmetry whose
gradient descent keeps an orbit (:func:`cyclic_problem`), and starts next to the permutation
set: planted pairs of near-copies (:func:`planted_pairs`) and every neuron of a half network
copied (:func:`merged_ensemble`). States are ``(n_runs, dim)`` in the flat layout of
:class:`flowlaws.percolation.dynamics.ensemble.TwoLayerShape`.

Explained in: book/02_percolation/01_sde.ipynb (teacher data), 02_trapping.ipynb (planted
pairs), 04_percolation.ipynb (the cyclic problem), 06_adaptive.ipynb and
09_fragmentation.ipynb (merged ensembles).
"""
from __future__ import annotations

import math

import torch

from flowlaws.percolation.dynamics.ensemble import TwoLayerShape, ensemble_init, split_params

__all__ = [
    "teacher_data",
    "cyclic_problem",
    "planted_pairs",
    "merged_ensemble",
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


def merged_ensemble(
    half: TwoLayerShape, n_runs: int, *, copies: int = 2, perturbation: float = 1e-3,
    scale: float = 1.0, seed: int = 0, dtype: torch.dtype = torch.float32,
) -> tuple[torch.Tensor, torch.Tensor, TwoLayerShape]:
    """Runs that start next to the permutation set: every neuron of one ``half`` network copied.

    Each neuron of a random ``half`` network (:func:`ensemble_init`, ``seed``)
    is repeated ``copies`` times and its outgoing weights divided by ``copies``, so the wide
    network computes the same function. Returns ``(theta0, merged, shape)``: ``theta0``
    ``(n_runs, dim)`` is ``merged`` ``(1, dim)`` plus independent Gaussian perturbations of
    standard deviation ``perturbation`` per run; ``shape`` the wide network's shape. Copies
    of neuron ``i`` are the neurons ``copies·i, …, copies·i + copies − 1``.
    """
    V, U = split_params(ensemble_init(half, 1, seed=seed, scale=scale, dtype=dtype), half)
    merged = torch.cat([V.repeat_interleave(copies, 1).flatten(1),
                        (U.repeat_interleave(copies, 2) / copies).flatten(1)], 1)
    shape = TwoLayerShape(half.n_in, copies * half.width, half.n_out, half.activation)
    g = torch.Generator().manual_seed(seed + 1)
    noise = perturbation * torch.randn(n_runs, shape.dim, generator=g, dtype=dtype)
    return merged + noise, merged, shape
