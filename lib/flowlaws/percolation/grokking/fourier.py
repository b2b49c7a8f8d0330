"""A functional order parameter for grokking: MLP neurons grouped by their key frequency.

In the solution Nanda et al. (2023) reverse-engineered, each MLP neuron of the one-layer
Transformer computes a function of ``(a, b)`` built from ``cos(ω_k a)``, ``sin(ω_k a)``,
``cos(ω_k b)``, ``sin(ω_k b)`` and their products for one *key frequency* ``ω_k = 2πk/p``; neurons
of one frequency form a cluster, with different phases. Their weight vectors are therefore never
close (the weight-space order parameter of :mod:`flowlaws.percolation.grokking.checkpoints` stays
at 1), but
their *functions* share a frequency. This module measures that.

**Neuron spectrum.** Neuron ``i``'s post-ReLU activation ``h_i(a, b)`` on the whole ``p × p``
grid (:func:`flowlaws.percolation.grokking.model.mlp_activations`) is Fourier transformed in both
arguments, ``F_i(u, v)``. The power of frequency ``k`` (``1 ≤ k ≤ ⌊p/2⌋``) is the power in the
cells ``u, v ∈ {0, k, −k}`` other than ``(0, 0)``: the terms of one frequency in ``a`` alone, in
``b`` alone, and their products. Its *share* is that power over the whole non-constant power
``Σ_{(u,v) ≠ (0,0)} |F_i(u, v)|²``. A neuron's *key frequency* is the ``k`` of largest share;
the neuron is *tuned* when that share is at least ``threshold`` (:data:`DEFAULT_SHARE`, 0.5:
more than half of everything the neuron does beyond a constant sits on one frequency). A neuron
that never fires (no non-constant power) has share 0.

**Order parameter.** Tuned neurons ``i ≠ j`` are linked when they share their key frequency; the
frequency ``C_max`` is the size of the largest group, computed by the book's one ``C_max``
(:func:`flowlaws.percolation.topology.clusters.cmax`) on one-hot vectors of the key frequencies (an
untuned neuron is a zero vector, hence a group of its own): 1 when no two tuned neurons share a
frequency, NaN for a diverged run.

Explained in: book/02_percolation/07_grokking.ipynb
"""
from __future__ import annotations

import numpy as np
import torch

from flowlaws.percolation.grokking.model import mlp_activations
from flowlaws.percolation.topology.clusters import cmax

__all__ = ["DEFAULT_SHARE", "frequency_cells", "activation_frequencies", "neuron_frequencies",
           "frequency_cmax"]

DEFAULT_SHARE = 0.5


def frequency_cells(p: int) -> torch.Tensor:
    """``(⌊p/2⌋, p, p)`` bool: cell ``(u, v)`` of the 2-D DFT belongs to frequency ``k`` (row
    ``k − 1``) when ``u, v ∈ {0, k, p − k}`` and not both are 0."""
    k = torch.arange(1, p // 2 + 1)[:, None]
    u = torch.arange(p)[None, :]
    on = (u == 0) | (u == k) | (u == p - k)                         # (K, p)
    cells = on[:, :, None] & on[:, None, :]
    cells[:, 0, 0] = False
    return cells


def activation_frequencies(acts: torch.Tensor) -> torch.Tensor:
    """``(..., 2)`` float64: key frequency and share (module docstring) of every function in
    ``acts`` ``(..., p, p)`` (values on the grid ``(a, b)``); share 0 for a constant one."""
    p = acts.shape[-1]
    cells = frequency_cells(p).to(acts.device, torch.float64)
    power = torch.fft.fft2(acts.double()).abs() ** 2
    power[..., 0, 0] = 0.0
    total = power.flatten(-2).sum(-1)
    share, k = torch.einsum("...uv,kuv->...k", power, cells).max(-1)
    share = torch.where(total > 1e-24 * acts.double().pow(2).flatten(-2).sum(-1).clamp_min(1e-300),
                        share / total.clamp_min(1e-300), torch.zeros_like(share))
    return torch.stack([(k + 1).double(), share], dim=-1)


def neuron_frequencies(params: dict[str, torch.Tensor], p: int, *, chunk: int = 8
                       ) -> torch.Tensor:
    """``(R, d_mlp, 2)`` float32: per run and MLP neuron, its key frequency ``k`` (1..⌊p/2⌋)
    and that frequency's share of the neuron's non-constant power (module docstring,
    :func:`activation_frequencies` of :func:`flowlaws.percolation.grokking.model.mlp_activations`);
    share 0 for a neuron that never varies, both NaN for every neuron of a run whose weights
    are not finite. Runs are processed ``chunk`` at a time (the activations of a chunk take
    ``chunk · d_mlp · p²`` numbers)."""
    R = params["W_in"].shape[0]
    out = []
    for lo in range(0, R, chunk):
        part = {k: v[lo:lo + chunk] for k, v in params.items()}
        both = activation_frequencies(mlp_activations(part, p))
        finite = torch.stack([torch.isfinite(v).flatten(1).all(1) for v in part.values()]).all(0)
        out.append(torch.where(finite[:, None, None], both, torch.nan).float().cpu())
    return torch.cat(out)


def frequency_cmax(freqs: torch.Tensor | np.ndarray, threshold: float = DEFAULT_SHARE
                   ) -> np.ndarray:
    """``(...)`` float64: the frequency ``C_max`` of every network in ``freqs`` ``(..., d_mlp,
    2)`` (:func:`neuron_frequencies`, any leading dimensions: records, runs): the largest group
    of tuned neurons (share ``≥ threshold``) with one key frequency, by
    :func:`flowlaws.percolation.topology.clusters.cmax`; NaN for a diverged run."""
    if not 0 < threshold <= 1:
        raise ValueError(f"threshold must be a share in (0, 1], got {threshold}")
    f = torch.as_tensor(np.asarray(freqs, dtype=np.float64))
    lead, m = f.shape[:-2], f.shape[-2]
    flat = f.reshape(-1, m, 2)
    diverged = torch.isnan(flat).flatten(1).any(1)
    k = torch.nan_to_num(flat[..., 0]).long()
    tuned = torch.nan_to_num(flat[..., 1]) >= threshold
    K = int(k.max()) + 1 if k.numel() else 1
    out = torch.empty(len(flat), dtype=torch.float64)
    step = max(1, 2**22 // (m * m))  # cmax builds an (m, m) matrix per network
    for lo in range(0, len(flat), step):
        onehot = torch.nn.functional.one_hot(k[lo:lo + step], K).double()
        V = onehot * tuned[lo:lo + step, :, None]
        U = torch.zeros(V.shape[0], 1, m, dtype=torch.float64)
        out[lo:lo + step] = cmax(V, U, tol=0.5)  # one-hot vectors: distance 0 or 1/√2
    out[diverged] = torch.nan
    return out.reshape(lead).numpy()
