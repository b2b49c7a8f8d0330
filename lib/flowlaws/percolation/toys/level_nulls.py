"""Ensembles with shared levels but no discrete scale invariance: the level-structured nulls
against which the cascade test's "cascade" must mean geometric spacing (issue 24).

Every family returns ``(C (n_runs, n_points), p (n_points,), levels)`` over ``p =
linspace(0, 1, n_points)``: integer staircases starting at 1 in which every run jumps by 1 at
each shared level, shifted per run by ``jitter`` times the distance to the nearest other level
(``N(0, 1)`` per run and level, as in
:func:`flowlaws.percolation.toys.cascades.planted_ensemble`), so the levels are resolved as
sharply as a planted cascade's. Families (:data:`FAMILIES`):

- ``"arithmetic"``: 4–6 evenly spaced levels (λ = 1; the issue's reproduction, which the old
  test called a cascade in 40 of 40 ensembles);
- ``"random"``: 4–6 levels at uniform random positions on ``[0.1, 0.9]``, at least 0.04 apart;
- ``"crowding"``: 4–6 levels crowding towards a point by a power law, ``p_n = p_c − d
  (n + 1)^{−a}`` with ``a ~ U(0.7, 2)``: the spacings shrink, but their ratio
  ``((n + 2)/(n + 1))^a`` is not constant;
- ``"transitions"``: one or two shared levels over a background of ``Poisson(4)`` independent
  jumps per run (the level-free staircases of
  :func:`~flowlaws.percolation.toys.cascades.random_staircases`);
- ``"broken"`` (ours): three levels of a geometric cascade (λ ~ U(1.5, 3)) and a fourth at a
  random position away from the cascade's law, the nearest a non-cascade gets to a cascade;
- ``"two-scales"`` (ours): two pairs of close levels far apart (spacings short, long, short),
  which a comb of wide teeth can read as four levels.

Explained in: book/02_percolation/05_dsi.ipynb.
"""
from __future__ import annotations

import numpy as np

__all__ = ["FAMILIES", "level_ensemble", "null_levels", "level_null"]

FAMILIES = ("arithmetic", "random", "crowding", "transitions", "broken", "two-scales")
MIN_SEP = 0.04  # the closest two levels of a family may be, in p (41 grid steps at 1024)


def level_ensemble(levels: np.ndarray, n_runs: int, p: np.ndarray, rng: np.random.Generator,
                   *, jitter: float = 0.1) -> np.ndarray:
    """``(n_runs, len(p))``: 1 plus the number of ``levels`` each run has passed, each level
    shifted per run by ``jitter`` × its distance to the nearest other level × ``N(0, 1)``."""
    lv = np.sort(np.asarray(levels, dtype=float))
    if len(lv) > 1:
        near = np.minimum(np.append(np.inf, np.diff(lv)), np.append(np.diff(lv), np.inf))
    else:
        near = np.full(1, 0.1)
    shifted = lv + jitter * near * rng.standard_normal((n_runs, len(lv)))
    return 1.0 + (np.asarray(p)[None, :, None] >= shifted[:, None, :]).sum(axis=2)


def _random_levels(rng: np.random.Generator, k: int, lo: float = 0.1, hi: float = 0.9
                   ) -> np.ndarray:
    while True:
        lv = np.sort(rng.uniform(lo, hi, k))
        if k < 2 or np.diff(lv).min() >= MIN_SEP:
            return lv


def null_levels(family: str, rng: np.random.Generator) -> np.ndarray:
    """The shared level positions of one ensemble of ``family`` (module docstring)."""
    k = int(rng.integers(4, 7))
    if family == "arithmetic":
        lo = rng.uniform(0.05, 0.3)
        hi = rng.uniform(0.7, 0.95)
        return np.linspace(lo, hi, k)
    if family == "random":
        return _random_levels(rng, k)
    if family == "crowding":
        while True:
            a, p_c = rng.uniform(0.7, 2.0), rng.uniform(0.8, 0.97)
            d = (p_c - rng.uniform(0.05, 0.3))
            lv = p_c - d * (np.arange(k) + 1.0) ** -a
            if np.diff(lv).min() >= MIN_SEP / 4:
                return lv
    if family == "transitions":
        return _random_levels(rng, int(rng.integers(1, 3)))
    if family == "broken":
        while True:
            lam, p_c = rng.uniform(1.5, 3.0), rng.uniform(0.8, 0.95)
            first = rng.uniform(0.05, 0.3)
            cascade = p_c - (p_c - first) * lam ** -np.arange(3.0)
            extra = rng.uniform(0.05, 0.95)
            on_law = p_c - (p_c - first) * lam ** -np.arange(-1.0, 4.0)
            lv = np.sort(np.append(cascade, extra))
            # the fourth level stays ≥ 0.2 of a local spacing off every point of the law
            off = np.abs(on_law - extra).min() >= 0.2 * np.abs(np.diff(on_law)).min()
            if off and np.diff(lv).min() >= MIN_SEP / 4:
                return lv
    if family == "two-scales":
        a, b = rng.uniform(0.1, 0.35), rng.uniform(0.6, 0.85)
        short = rng.uniform(MIN_SEP, 0.08, 2)
        return np.array([a, a + short[0], b, b + short[1]])
    raise ValueError(f"family must be one of {FAMILIES}, got {family!r}")


def level_null(family: str, n_runs: int, n_points: int, rng: np.random.Generator, *,
               jitter: float = 0.1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(C, p, levels)``: one ensemble of ``family`` (:data:`FAMILIES`) with ``n_runs`` runs on
    ``n_points`` points of ``[0, 1]``; ``"transitions"`` adds each run's ``Poisson(4)``
    independent unit jumps at uniform positions."""
    p = np.linspace(0, 1, n_points)
    levels = null_levels(family, rng)
    C = level_ensemble(levels, n_runs, p, rng, jitter=jitter)
    if family == "transitions":
        for r, k in enumerate(rng.poisson(4, n_runs)):
            C[r] += (p[:, None] >= rng.uniform(0, 1, k)[None, :]).sum(axis=1)
    return C, p, levels
