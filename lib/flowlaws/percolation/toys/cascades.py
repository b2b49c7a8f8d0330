"""Cascades with a known mechanism: a planted cascade, merge models, a kinematic toy model.

:func:`planted_ensemble` puts micro-transitions at a known geometric cascade (a test with a
known answer for the estimators) and :func:`random_staircases` random integer jumps with no
cascade at all (the test's null, to calibrate it); :func:`hierarchical_runs` merges units
pairwise in generations and :func:`asynchronous_runs` merges random pairs one at a time; the
kinematic model (:class:`KinematicModel`, :func:`kinematic_runs`) is a ring of coalescing
particles whose merges set no scale factor by hand. The DSI chapter judges each with
:func:`flowlaws.percolation.cascade.judge.judge_cascade`.

Explained in: book/02_percolation/05_dsi.ipynb.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = [
    "planted_ensemble",
    "TIMINGS",
    "random_staircases",
    "KinematicModel",
    "kinematic_runs",
    "merged_fraction",
    "hierarchical_runs",
    "asynchronous_runs",
]


def planted_ensemble(p: np.ndarray, n_runs: int, *, p_c: float, lam: float, first: float,
                     n_levels: int, jitter: float = 0.1, noise: float = 0.02,
                     seed: int = 0) -> np.ndarray:
    """``(n_runs, len(p))`` order parameters with micro-transitions planted at a known cascade.

    Level ``k`` sits at ``p_k = p_c − (p_c − first) λ^{−k}``; each run jumps by 1 there, at
    ``p_k`` shifted by ``jitter · (p_c − p_k) · ξ`` (a jitter that shrinks toward ``p_c``, as
    discrete scale invariance requires), on a base of 1 plus white noise of size ``noise``.
    A test with a known answer for the estimators of :mod:`flowlaws.percolation.cascade.variance`.

    Explained in: book/02_percolation/05_dsi.ipynb.
    """
    rng = np.random.default_rng(seed)
    levels = p_c - (p_c - first) * lam ** -np.arange(n_levels, dtype=float)
    shifts = levels + jitter * (p_c - levels) * rng.standard_normal((n_runs, n_levels))
    C = 1.0 + (np.asarray(p)[None, :, None] >= shifts[:, None, :]).sum(axis=2)
    return C + noise * rng.standard_normal(C.shape)


TIMINGS = ("uniform", "late", "clustered")


def random_staircases(n_runs: int, n_points: int, rng: np.random.Generator,
                      timing: str = "uniform") -> tuple[np.ndarray, np.ndarray]:
    """``(C (n_runs, n_points), p (n_points,))``: integer staircases without a cascade, over
    ``p = linspace(0, 1, n_points)``. Each run starts at 1 and jumps ``1 + Poisson(4)`` times,
    by 1 or 2, at independent positions drawn from one law, one of :data:`TIMINGS`: uniform on
    ``[0, 1]``, skewed late (Beta(5, 1.5)), or half of them clustered at 0.3 (N(0.3, 0.03²))
    and the rest uniform. Exactly the null of
    :func:`flowlaws.percolation.cascade.statistic.deal_jumps`, so the test's rejection rate on them
    is its false-positive rate."""
    if timing not in TIMINGS:
        raise ValueError(f"timing must be one of {TIMINGS}, got {timing!r}")
    p = np.linspace(0, 1, n_points)
    C = np.ones((n_runs, n_points))
    for r, k in enumerate(1 + rng.poisson(4, n_runs)):
        if timing == "uniform":
            t = rng.uniform(0, 1, k)
        elif timing == "late":
            t = rng.beta(5, 1.5, k)
        else:
            t = np.where(rng.uniform(size=k) < 0.5, rng.normal(0.3, 0.03, k), rng.uniform(0, 1, k))
        C[r] += (p[:, None] >= t[None, :]) @ rng.integers(1, 3, k)
    return C, p


@dataclass(frozen=True)
class KinematicModel:
    """Particles ("neurons") on a ring of circumference ``N`` (mean spacing 1).

    Every particle carries unit noise and attracts each particle of a neighbouring cluster
    with force ``kappa`` once the gap is below the capture radius ``capture``; a cluster of
    ``m`` particles moves as one, with mobility ``1/m``:
    ``dx = kappa (m_right·[g_right < capture] − m_left·[g_left < capture]) dt + √(2D dt/m) dB``.
    Clusters closer than ``merge`` fuse (mass-weighted position). Nothing sets a scale
    factor: which clusters merge, and when, comes out of the dynamics. The time step adapts
    per run, ``dt = min(0.02 g² m_min / D, 0.2 g / (kappa m_max))`` with ``g`` the smallest gap
    (so a step moves nothing by more than ~20% of the closest gap).
    """

    N: int = 64
    kappa: float = 1.0
    D: float = 0.05
    capture: float = 0.5
    merge: float = 0.05

    def __post_init__(self) -> None:
        # refuse a ring on which nothing can move or merge (D = kappa = 0 ran 200,000 idle
        # steps); imported here to keep this check self-contained
        from flowlaws.common.checks import as_int, check_nonnegative, check_positive

        object.__setattr__(self, "N", as_int("N", self.N, minimum=2))  # np.int64 -> int
        check_nonnegative(kappa=self.kappa, D=self.D, capture=self.capture)
        check_positive(merge=self.merge)
        if self.kappa == 0 and self.D == 0:
            raise ValueError("kappa and D are both 0: no particle ever moves, so nothing merges;"
                             " give kappa > 0 (attraction) or D > 0 (noise)")


def _sort_ring(x: np.ndarray, m: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    order = np.argsort(np.where(m > 0, x, np.inf), axis=1)
    x, m = np.take_along_axis(x, order, 1), np.take_along_axis(m, order, 1)
    return x, m, (m > 0).sum(axis=1)


def _ring_gaps(x: np.ndarray, K: np.ndarray, L: float) -> np.ndarray:
    """``g_j`` from cluster ``j`` to the next (``inf`` on empty slots or ``K = 1``)."""
    j = np.arange(x.shape[1])[None, :]
    nxt = np.where(j + 1 < K[:, None], j + 1, 0)
    g = np.take_along_axis(x, nxt, 1) - x + np.where(j + 1 < K[:, None], 0.0, L)
    return np.where((j < K[:, None]) & (K[:, None] > 1), g, np.inf)


def _velocity(g: np.ndarray, m: np.ndarray, K: np.ndarray, model: KinematicModel) -> np.ndarray:
    j = np.arange(g.shape[1])[None, :]
    nxt = np.where(j + 1 < K[:, None], j + 1, 0)
    prv = np.where(j > 0, j - 1, np.maximum(K[:, None] - 1, 0))
    right = np.take_along_axis(m, nxt, 1) * (g < model.capture)
    left = np.take_along_axis(m, prv, 1) * (np.take_along_axis(g, prv, 1) < model.capture)
    return model.kappa * (right - left)


def _merge_run(x: np.ndarray, m: np.ndarray, close: np.ndarray, L: float) -> tuple:
    """Fuse the clusters of one run across the gaps flagged ``close`` ``(K,)`` (gap ``j`` joins
    cluster ``j`` to ``j+1``; gap ``K−1`` wraps around the ring), chains included."""
    K = len(close)
    labels = np.concatenate([[0], np.cumsum(~close[:-1])])
    if K > 1 and close[-1]:
        labels[labels == labels[-1]] = 0
    xs, ms = x[:K], m[:K]
    new_x, new_m = [], []
    for lab in np.unique(labels):
        sel = labels == lab
        ref = xs[sel][0]
        rel = np.mod(xs[sel] - ref + L / 2, L) - L / 2
        new_m.append(ms[sel].sum())
        new_x.append(np.mod(ref + (rel * ms[sel]).sum() / new_m[-1], L))
    out_x, out_m = np.full_like(x, np.inf), np.zeros_like(m)
    out_x[: len(new_x)], out_m[: len(new_m)] = new_x, new_m
    return out_x, out_m


def _apply_merges(x: np.ndarray, m: np.ndarray, K: np.ndarray, model: KinematicModel,
                  cmax_at_K: np.ndarray, last_K: np.ndarray) -> None:
    """Merge in place every run with a gap below ``model.merge``; record ``C_max`` per ``K``."""
    g = _ring_gaps(x, K, model.N)
    for r in np.nonzero((g < model.merge).any(axis=1))[0]:
        x[r], m[r] = _merge_run(x[r], m[r], g[r, : K[r]] < model.merge, model.N)
        k_new = int((m[r] > 0).sum())
        cmax_at_K[r, k_new - 1 : last_K[r] - 1] = m[r].max()
        last_K[r] = k_new


def kinematic_runs(model: KinematicModel, n_runs: int, *, seed: int = 0, init: str = "poisson",
                   max_steps: int = 200_000) -> np.ndarray:
    """``C_max`` of every run at each number of components: ``(n_runs, N)``, column ``K − 1``.

    Entry ``[r, K−1]`` is the largest cluster's size the first time run ``r`` has at most ``K``
    clusters (several merges in one step fill every ``K`` they skip). Initial positions:
    ``init="poisson"`` uniform on the ring, ``"lattice"`` the symmetric start ``x_i = i``
    (only the noise breaks the symmetry). Runs not finished after ``max_steps`` steps keep
    NaN for the ``K`` they did not reach.
    """
    if init not in ("poisson", "lattice"):
        raise ValueError(f"init must be 'poisson' or 'lattice', got {init!r}")
    rng = np.random.default_rng(seed)
    N = model.N
    lattice = np.tile(np.arange(N, dtype=float), (n_runs, 1))
    x = rng.uniform(0, N, (n_runs, N)) if init == "poisson" else lattice
    m = np.ones((n_runs, N))
    cmax_at_K = np.full((n_runs, N), np.nan)
    cmax_at_K[:, N - 1] = 1.0
    last_K = np.full(n_runs, N)
    for _ in range(max_steps):
        x, m, K = _sort_ring(x, m)
        _apply_merges(x, m, K, model, cmax_at_K, last_K)
        x, m, K = _sort_ring(x, m)
        if np.all(K <= 1):
            break
        _kinematic_step(x, m, K, model, rng)
    return cmax_at_K


def _kinematic_step(x: np.ndarray, m: np.ndarray, K: np.ndarray, model: KinematicModel,
                    rng: np.random.Generator) -> None:
    g = _ring_gaps(x, K, model.N)
    alive = m > 0
    v = _velocity(g, m, K, model)
    gmin = g.min(axis=1, keepdims=True)
    m_min = np.where(alive, m, np.inf).min(axis=1, keepdims=True)
    v_max = np.abs(np.where(alive, v, 0.0)).max(axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        dt = np.minimum(0.02 * gmin**2 * m_min / model.D, 0.2 * gmin / v_max)
    dt = np.where(np.isfinite(dt) & (K[:, None] > 1), dt, 0.0)
    noise = np.sqrt(2 * model.D * dt / np.where(alive, m, 1.0)) * rng.standard_normal(x.shape)
    x[:] = np.where(alive, np.mod(np.where(alive, x, 0.0) + v * dt + noise, model.N), np.inf)


def merged_fraction(N: int) -> np.ndarray:
    """``(N,)`` the merged fraction ``m/(N − 1)`` after ``m = 0 … N − 1`` pairwise merges."""
    return np.arange(N) / (N - 1)


def hierarchical_runs(N: int, n_runs: int, *, spread: float = 0.5, seed: int = 0) -> np.ndarray:
    """``(n_runs, N)`` ``C_max`` after ``m`` merges in the hierarchical pairwise-merge model.

    ``N = 2^L`` units merge pairwise in generations, as the leaves of a binary tree: each node of
    generation ``g`` (size ``2^g``) forms when both its children exist plus a random delay (gamma,
    mean 1, coefficient of variation ``spread``), independently in every run. Column ``m`` is
    the largest cluster after the ``m`` earliest merges (read against :func:`merged_fraction`):
    the largest node formed so far, since clusters only grow. Generation ``g`` ends near merged
    fraction ``1 − 2^{−g}``, so mean field puts the jumps of ``C_max`` at ``1 − p ∝ 2^{−g}``:
    ``λ = 2`` toward ``p_c = 1``.

    Explained in: book/02_percolation/05_dsi.ipynb.
    """
    L = int(round(np.log2(N)))
    if N < 4 or 2**L != N:
        raise ValueError(f"N must be a power of 2, at least 4, got {N}")
    if not spread > 0:
        raise ValueError(f"spread must be positive, got {spread}")
    rng = np.random.default_rng(seed)
    shape = 1.0 / spread**2
    t = np.zeros((n_runs, N))
    times, sizes = [], []
    for g in range(1, L + 1):
        t = np.maximum(t[:, 0::2], t[:, 1::2]) + rng.gamma(shape, 1 / shape, (n_runs, N >> g))
        times.append(t)
        sizes.append(np.full(N >> g, 2.0**g))
    order = np.argsort(np.concatenate(times, axis=1), axis=1)
    merged = np.concatenate(sizes)[order]
    return np.concatenate([np.ones((n_runs, 1)), np.maximum.accumulate(merged, axis=1)], axis=1)


def asynchronous_runs(N: int, n_runs: int, *, seed: int = 0) -> np.ndarray:
    """``(n_runs, N)`` ``C_max`` after ``m`` merges when each merge joins a uniformly random pair
    of the current clusters (Kingman-like coalescence: no generations), read against
    :func:`merged_fraction`. The negative control of the hierarchical model.

    Explained in: book/02_percolation/05_dsi.ipynb.
    """
    if N < 2:
        raise ValueError(f"N must be at least 2, got {N}")
    rng = np.random.default_rng(seed)
    size = np.ones((n_runs, N))
    rows = np.arange(n_runs)
    C = np.ones((n_runs, N))
    for m in range(1, N):
        K = N - m + 1  # clusters before this merge, in columns 0 … K − 1
        i = rng.integers(K, size=n_runs)
        j = (i + rng.integers(1, K, size=n_runs)) % K
        size[rows, i] += size[rows, j]
        size[rows, j] = size[rows, K - 1]
        size[rows, K - 1] = 0.0
        C[:, m] = np.maximum(C[:, m - 1], size[rows, np.where(i == K - 1, j, i)])
    return C
