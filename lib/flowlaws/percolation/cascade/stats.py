"""Statistics over several cascade verdicts: Holm's correction over a grid of settings and its
one-line summary, and whether a grid can hold the injected levels that power needs.

Explained in: book/02_percolation/05_dsi.ipynb.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from flowlaws.percolation.cascade.detect import min_points_for_power
from flowlaws.percolation.cascade.statistic import N_TEETH

__all__ = ["holm", "grid_summary", "power_fits"]


def holm(p_values: list[float] | np.ndarray, alpha: float = 0.05) -> np.ndarray:
    """Holm–Bonferroni: which of the ``p_values`` are rejected with the family-wise error rate
    at most ``alpha`` (the ``k``-th smallest is compared with ``alpha/(m − k)``, ``k = 0 …``,
    stopping at the first that fails). Written out: four lines, no extra dependency."""
    p = np.asarray(p_values, dtype=float)
    order = np.argsort(p)
    passed = p[order] <= alpha / (len(p) - np.arange(len(p)))
    rejected = np.zeros(len(p), dtype=bool)
    rejected[order[: int(np.argmin(passed)) if not passed.all() else len(p)]] = True
    return rejected


def grid_summary(rows: Sequence, alpha: float = 0.05) -> tuple[str, np.ndarray]:
    """``(line, rejected)`` for the verdicts ``rows`` (anything with ``verdict``, ``p_value``
    and ``surrogate_p`` keys: a :class:`~flowlaws.percolation.cascade.judge.CascadeVerdict`)
    of a grid of settings: how many were tested, how many have ``p ≤ alpha``, how many survive
    :func:`holm` over the grid and are cascades, and how many the seed's surrogate test passes
    (``rejected``: Holm's, per row)."""
    p = np.array([r["p_value"] for r in rows], dtype=float)
    rejected = holm(np.where(np.isfinite(p), p, 1.0), alpha)
    found = sum(bool(k) and r["verdict"] == "cascade" for k, r in zip(rejected, rows,
                                                                       strict=True))
    seed_p = np.array([r["surrogate_p"] for r in rows], dtype=float)
    line = (f"{len(rows)} settings tested; p <= {alpha:g} in {int(np.sum(p <= alpha))}, "
            f"{int(rejected.sum())} after Holm's correction over the {len(rows)}, of which "
            f"{found} with a geometric cascade; the seed's surrogate test passes "
            f"{int(np.sum(seed_p <= alpha))} (uncorrected)")
    return line, rejected


def power_fits(n_points: int, lam: float = 2.0, n_levels: int = N_TEETH) -> bool:
    """Whether ``n_levels`` injected levels at ``lam`` fit on a grid of ``n_points``
    (:func:`~flowlaws.percolation.cascade.detect.min_points_for_power`)."""
    return n_points >= min_points_for_power(lam, n_levels)
