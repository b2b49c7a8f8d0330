"""Helpers of the percolation and DSI chapters: symmetric merges, jump sweeps, SGD cascades.

- :func:`ensemble_cmax`: the order parameter ``C_max`` of many networks at once (the same
  rule as :func:`flowlaws.clusters.ensemble_largest_component`, vectorised);
- :func:`merge_heights`: the single-linkage merge heights of the neurons (the tolerances at
  which components join), and :func:`cyclic_problem`, a network and data set with a cyclic
  symmetry whose neurons therefore merge in whole orbits;
- :func:`block_jump_sweep`: the largest and the last jump of ``C_max/N`` for block merges
  or Erdős–Rényi growth, over network sizes (plain lists, ready for :mod:`flowlaws.cache`);
- chapter 5: :func:`planted_ensemble` (a cascade with a known answer), :func:`sgd_order_parameter`
  (``C_max`` over SGD training of an ensemble of small networks), :func:`kinematic_summary`
  and :func:`cascade_caption` (λ and ``p_c`` only when a cascade exists, with its surrogate test).

Explained in: book/02_percolation/04_percolation.ipynb and book/02_percolation/05_dsi.ipynb.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from scipy.cluster.hierarchy import linkage
from scipy.spatial.distance import squareform

from flowlaws.clusters import DEFAULT_DEAD_TOL, DEFAULT_TOL, dead_neurons, relative_distance
from flowlaws.percolation import block_merge_curve, erdos_renyi_curve, max_jump
from flowlaws.progress import track
from flowlaws.sde import TwoLayerShape, split_params

__all__ = ["ensemble_cmax", "merge_heights", "cyclic_problem", "block_jump_sweep",
           "planted_ensemble", "sgd_order_parameter", "finite_runs", "cascade_caption",
           "kinematic_summary"]


def ensemble_cmax(theta: torch.Tensor, shape: TwoLayerShape, tol: float = DEFAULT_TOL,
                  dead_tol: float = DEFAULT_DEAD_TOL) -> torch.Tensor:
    """``(R,)`` ``C_max`` of every network in ``theta`` ``(R, dim)``, without a Python loop.

    Same graph as :func:`flowlaws.clusters.largest_component`: live neurons with relative
    distance below ``tol`` are joined; components by transitive closure (repeated squaring of
    the adjacency matrix). A network with a non-finite weight gets ``C_max = 0`` (diverged).

    Explained in: book/02_percolation/05_dsi.ipynb.
    """
    V, U = split_params(theta, shape)
    alive = ~dead_neurons(V, U, dead_tol)
    A = (relative_distance(V, U) < tol) & alive[:, :, None] & alive[:, None, :]
    A = (A | torch.eye(shape.width, dtype=torch.bool, device=theta.device)).float()
    for _ in range(max(1, math.ceil(math.log2(shape.width)))):
        A = ((A @ A) > 0).float()
    cmax = A.sum(-1).amax(-1)
    return torch.where(torch.isfinite(theta).all(dim=1), cmax, torch.zeros_like(cmax))


def merge_heights(theta: torch.Tensor, shape: TwoLayerShape) -> np.ndarray:
    """``(R, width − 1)`` single-linkage merge heights of the neurons of each network.

    Height ``k`` is the relative distance (:func:`flowlaws.clusters.relative_distance`) at
    which the number of components drops from ``width − k`` to ``width − k − 1``: at a
    tolerance ``tol`` the network has ``1 + #{heights ≥ tol}`` components (dead neurons
    counted like the others). Equal heights are merges that happen at the same instant.
    """
    rel = relative_distance(*split_params(theta, shape)).double().cpu().numpy()
    out = []
    for d in rel:
        d = 0.5 * (d + d.T)
        np.fill_diagonal(d, 0.0)
        out.append(linkage(squareform(d, checks=False), "single")[:, 2])
    return np.array(out)


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


def block_jump_sweep(sizes: list[int], n_runs: int, *, process: str = "block", n: int = 2,
                     weighting: str = "uniform", seed: int = 0) -> dict[str, list[float]]:
    """Largest and last one-step jump of ``C_max/N`` over ``n_runs`` runs, for each ``N``.

    ``process`` is ``"block"`` (:func:`flowlaws.percolation.block_merge_curve` with block size
    ``n`` and ``weighting``) or ``"er"`` (:func:`flowlaws.percolation.erdos_renyi_curve`).
    Returns lists over ``sizes``: ``N``, ``max_mean``, ``max_sem``, ``last_mean``,
    ``last_sem`` (the last jump is that of the final merge; for ER the last edge's).
    """
    if process not in ("block", "er"):
        raise ValueError(f"process must be 'block' or 'er', got {process!r}")
    out: dict[str, list[float]] = {k: [] for k in ("N", "max_mean", "max_sem", "last_mean",
                                                   "last_sem")}
    for N in sizes:
        curves = [block_merge_curve(N, n, weighting=weighting, seed=seed + r)[1]
                  if process == "block" else erdos_renyi_curve(N, seed=seed + r)[1]
                  for r in range(n_runs)]
        for key, vals in (("max", [max_jump(c) for c in curves]),
                          ("last", [c[-1] - c[-2] for c in curves])):
            out[f"{key}_mean"].append(float(np.mean(vals)))
            out[f"{key}_sem"].append(float(np.std(vals, ddof=1) / math.sqrt(n_runs)))
        out["N"].append(float(N))
    return out


# ----------------------------------------------------------------------------------------
# Chapter 5: ensembles whose relative variance is searched for a DSI cascade
# ----------------------------------------------------------------------------------------


def planted_ensemble(p: np.ndarray, n_runs: int, *, p_c: float, lam: float, first: float,
                     n_levels: int, jitter: float = 0.1, noise: float = 0.02,
                     seed: int = 0) -> np.ndarray:
    """``(n_runs, len(p))`` order parameters with micro-transitions planted at a known cascade.

    Level ``k`` sits at ``p_k = p_c − (p_c − first) λ^{−k}``; each run jumps by 1 there, at
    ``p_k`` shifted by ``jitter · (p_c − p_k) · ξ`` (a jitter that shrinks toward ``p_c``, as
    discrete scale invariance requires), on a base of 1 plus white noise of size ``noise``.
    A test with a known answer for the estimators of :mod:`flowlaws.dsi`.

    Explained in: book/02_percolation/05_dsi.ipynb.
    """
    rng = np.random.default_rng(seed)
    levels = p_c - (p_c - first) * lam ** -np.arange(n_levels, dtype=float)
    shifts = levels + jitter * (p_c - levels) * rng.standard_normal((n_runs, n_levels))
    C = 1.0 + (np.asarray(p)[None, :, None] >= shifts[:, None, :]).sum(axis=2)
    return C + noise * rng.standard_normal(C.shape)


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
    ``record_every`` steps by :func:`ensemble_cmax` (0 for a diverged run).
    Returns ``{"steps": (T,) list, "C": (n_runs, T) float tensor on the CPU}``.

    Explained in: book/02_percolation/05_dsi.ipynb.
    """
    from flowlaws.sde import ensemble_forward, ensemble_init, per_sample_grads

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
    theta, X, Y = theta.to(device), X.to(device), Y.to(device)
    batches = torch.Generator(device=device).manual_seed(seed + 1)
    steps, C = [], []
    for step in track(range(n_steps + 1), desc=f"SGD lr={lr:g}", enabled=False):
        if step % record_every == 0:
            steps.append(step)
            C.append(ensemble_cmax(theta, shape).cpu())
        idx = torch.randint(n_data, (n_runs, batch_size), generator=batches, device=device)
        theta = theta - lr * per_sample_grads(theta, shape, X[idx], Y[idx]).mean(dim=1)
        theta = torch.where(torch.isfinite(theta).all(1, keepdim=True), theta, torch.nan)
    return {"steps": steps, "C": torch.stack(C, dim=1)}


def finite_runs(C: torch.Tensor | np.ndarray) -> np.ndarray:
    """The rows of ``C`` ``(n_runs, T)`` whose run never diverged (``C_max > 0`` throughout)."""
    C = np.asarray(C, dtype=float)
    return C[(C > 0).all(axis=1)]


def cascade_caption(null) -> str:
    """One line for a :class:`flowlaws.dsi.NullTest`: λ and ``p_c`` with errors, or why none.

    Explained in: book/02_percolation/05_dsi.ipynb.
    """
    c = null.cascade
    if not c.found:
        return c.reason
    e = c.estimate
    verdict = "significant" if null.significant else "not significant"
    return (f"{c.reason}: λ = {e.lam:.2f} ± {e.lam_err:.2f}, p_c = {e.p_c:.4g} ± {e.p_c_err:.2g}; "
            f"surrogate p = {null.p_value:.3f} ({verdict})")


def kinematic_summary(N: int, n_runs: int, *, n_boot: int, n_surrogates: int, seed: int = 0
                      ) -> dict:
    """:func:`flowlaws.dsi.kinematic_cascade` on a ring of ``N``, as plain lists and numbers.

    Keys: ``p``, ``R``, ``peaks`` (every detected peak position), ``reason``, ``score``,
    ``surrogate_scores``, ``p_value``, ``detection_rate`` (of the raw detector on the
    surrogates), ``boot_lams``, ``boot_found``, ``lam``, ``lam_err`` (bootstrap median and
    standard deviation of the best triple's λ; NaN when no replicate held a cascade).

    Explained in: book/02_percolation/05_dsi.ipynb.
    """
    from flowlaws.dsi import KinematicModel, kinematic_cascade

    r = kinematic_cascade(KinematicModel(N=N), n_runs, seed=seed, n_boot=n_boot,
                          n_surrogates=n_surrogates)
    return {"p": r.p.tolist(), "R": r.R.tolist(), "peaks": r.cascade.all_peaks.p.tolist(),
            "reason": r.cascade.reason, "score": r.null.score,
            "surrogate_scores": r.null.scores.tolist(), "p_value": r.null.p_value,
            "detection_rate": r.null.detection_rate, "boot_lams": r.boot_lams.tolist(),
            "boot_found": r.boot_found, "lam": r.lam, "lam_err": r.lam_err}
