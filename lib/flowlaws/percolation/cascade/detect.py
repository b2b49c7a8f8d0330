"""What the cascade test sees in one ensemble: persistent peaks on the best comb, their
geometry, and a cascade planted into observed runs to measure power.

**Peaks.** The best comb's teeth, extended over the window, are read in ``R``; a tooth counts as
a peak when its contrast to its neighbouring troughs (maximum of ``R`` within ``±TOOTH_TOL`` of a
period around the tooth, minus the larger neighbouring trough minimum) is above ``Z_PEAK σ_R``
(the largest ``σ_R`` over the tooth's and its troughs' windows) in the data *and* in at least
``PERSIST`` of ``n_boot`` bootstrap replicates (runs resampled). The longest run of consecutive
persistent peaks are the levels.

**Found.** :func:`run_test` finds a cascade when the permutation p-value is at most α, at least
``N_TEETH`` consecutive persistent peaks stand on the comb (three with an independent ``p_c``),
*and* their spacing is geometric (:func:`flowlaws.percolation.cascade.geometry.geometry_test`).
A rejected null alone only says that the runs are not independent collections of jumps; shared
levels alone (evenly spaced, at random positions) are not a cascade.

**Injection.** :func:`inject_cascade` adds planted cascades (as many levels as asked, at the
claimed λ, integer jumps of the data's typical size, a per-run jitter of each level of
``jitter`` times the spacing to the next level) to the observed runs.

Explained in: book/02_percolation/05_dsi.ipynb.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from flowlaws.common.threads import map_in_threads
from flowlaws.percolation.cascade.config import CascadeConfig
from flowlaws.percolation.cascade.geometry import GeometryFit, geometry_test, off_ladder
from flowlaws.percolation.cascade.statistic import (
    MIN_GAP,
    N_TEETH,
    TOOTH_TOL,
    Comb,
    comb_grid,
    permutation_test,
    relative_variance_se,
    split_jumps,
)

__all__ = [
    "Z_PEAK", "PERSIST", "typical_jump", "steps_for_levels", "min_points_for_power",
    "missing_room", "require_room", "inject_cascade",
    "persistent_peaks", "TestOnce", "test_grid", "run_test",
]

Z_PEAK = 2.0
PERSIST = 0.8
BOOT_CHUNK = 16  # bootstrap replicates drawn and scored together (one thread's work)


def typical_jump(C: np.ndarray) -> float:
    """The median size of the jumps of ``C`` ``(n_runs, n_points)``
    (:func:`~flowlaws.percolation.cascade.statistic.split_jumps`), 1 when it has none: the default
    size of an injected level."""
    _, is_jump = split_jumps(C)
    return float(np.median(np.abs(np.diff(C, axis=1)[is_jump]))) if is_jump.any() else 1.0


def steps_for_levels(lam: float = 2.0, n_levels: int = N_TEETH) -> float:
    """Grid steps between ``p_c`` and the window's far end that :func:`inject_cascade` needs for
    ``n_levels`` levels at ``lam``: the last level ``2·MIN_GAP`` steps from ``p_c``, the first
    ``λ^{n_levels−1}`` times as far, at most 0.9 of the way to the far end."""
    return 2 * MIN_GAP * lam ** (n_levels - 1) / 0.9


def min_points_for_power(lam: float = 2.0, n_levels: int = N_TEETH) -> int:
    """The fewest points of a uniform grid on which :func:`inject_cascade` can place
    ``n_levels`` levels at ``lam`` (:func:`steps_for_levels` + 1): 179 at λ = 2 and four
    levels. On a coarser grid power cannot be measured, so no verdict can be "no cascade"."""
    return int(np.ceil(steps_for_levels(lam, n_levels))) + 1


def missing_room(p: np.ndarray, *, lam: float, n_levels: int,
                 p_c: float | None = None) -> str:
    """``""`` when :func:`inject_cascade` can place ``n_levels`` levels at ``lam`` on the grid
    ``p`` ``(n_points,)``, else the room they would need, as a noun phrase that names what is
    there: "a grid of ≥ 179 points (has 128)", or with a given ``p_c`` "a window of ≥ 98 grid
    steps from p_c = 0 to its far end (has 56)". Power needs that room; the phrase is what
    would decide a verdict whose power could not be measured."""
    p = np.asarray(p, dtype=float)
    dp, need = float(np.median(np.diff(p))), steps_for_levels(lam, n_levels)
    if p[-1] - p[0] < need * dp * (1 - 1e-12):  # the span, in steps of the median spacing
        return f"a grid of ≥ {min_points_for_power(lam, n_levels)} points (has {len(p)})"
    if p_c is None:
        return ""
    has = max(p_c - p[0], p[-1] - p_c) / dp
    if has >= need * (1 - 1e-12):
        return ""
    return (f"a window of ≥ {int(np.ceil(need))} grid steps from p_c = {p_c:g} to its far end "
            f"(has {int(has)})")


def require_room(p: np.ndarray, *, lam: float, n_levels: int, p_c: float | None = None
                 ) -> None:
    """Raise ValueError, naming the room :func:`missing_room` finds missing, when
    :func:`inject_cascade` cannot place ``n_levels`` levels at ``lam`` on the grid ``p``."""
    missing = missing_room(p, lam=lam, n_levels=n_levels, p_c=p_c)
    if missing:
        raise ValueError(f"the window is too small for {n_levels} injected levels at "
                         f"λ = {lam:g}: they need {missing}")


def inject_cascade(C: np.ndarray, p: np.ndarray, rng: np.random.Generator, *, lam: float,
                   n_levels: int = N_TEETH, jitter: float = 0.1, jump: float | None = None,
                   direction: int | None = None, p_c: float | None = None
                   ) -> tuple[np.ndarray, np.ndarray, float]:
    """``C`` plus a planted cascade: ``(C + jumps, level positions, p_c)``.

    ``p_c`` is drawn inside the window (at least ``0.6`` spans from its far end), the first level
    log-uniformly between ``2·MIN_GAP·λ^{n_levels−1}`` grid steps and 0.9 of the distance to the
    far end (so the last level is at least ``2·MIN_GAP`` steps from ``p_c``); each run jumps by
    ``jump`` (default: the median size of the data's jumps, 1 if none) at each level, shifted by
    ``jitter · (spacing to the next level) · ξ``, ``ξ ~ N(0, 1)`` per run and level. A given
    ``p_c`` (an independently measured critical point) is used instead of a drawn one, the
    cascade converging toward it from the window's farther end.
    """
    C, p = np.asarray(C, dtype=float), np.asarray(p, dtype=float)
    dp, span = float(np.median(np.diff(p))), float(p[-1] - p[0])
    if p_c is not None:
        direction = 1 if p_c - p[0] >= p[-1] - p_c else -1
    direction = int(rng.choice([1, -1])) if direction is None else int(direction)
    lo = 0.9 * steps_for_levels(lam, n_levels) * dp
    require_room(p, lam=lam, n_levels=n_levels, p_c=p_c)
    near_end = max(0.6 * span, lo / 0.9)
    if p_c is None:
        dist = rng.uniform(near_end, span)  # p_c's distance from the window's far end
        p_c = p[0] + dist if direction > 0 else p[-1] - dist
    else:
        dist = abs(p_c - (p[0] if direction > 0 else p[-1]))
    first = np.exp(rng.uniform(np.log(lo), np.log(0.9 * dist)))
    d = first * lam ** -np.arange(n_levels, dtype=float)
    levels = p_c - direction * d
    jump = typical_jump(C) if jump is None else jump
    shifted = levels + jitter * d * (1 - 1 / lam) * rng.standard_normal((C.shape[0], n_levels))
    passed = (p[None, :, None] >= shifted[:, None, :]) if direction > 0 else (
        p[None, :, None] <= shifted[:, None, :])
    return C + jump * passed.sum(axis=2), levels, float(p_c)


def _tooth_windows(comb: Comb, p: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """Every tooth of ``comb`` inside the window, far from ``p_c`` first: ``(peak window,
    trough window toward p_c, the tooth's whole period cell)`` as boolean masks over ``p``."""
    dist = comb.direction * (comb.p_c - p)
    ok = dist >= MIN_GAP * float(np.median(np.diff(p)))
    if not ok.any():
        return []
    lx = np.log(np.where(ok, dist, 1.0))
    period = np.log(comb.lam)
    xs = np.log(comb.direction * (comb.p_c - comb.teeth[0])) + np.arange(-60, 60) * period
    xs = xs[(xs >= lx[ok].min()) & (xs <= lx[ok].max())]
    win = [(ok & (np.abs(lx - x) <= TOOTH_TOL * period),
            ok & (np.abs(lx - (x - period / 2)) <= TOOTH_TOL * period),
            ok & (np.abs(lx - x) <= 0.5 * period)) for x in xs[::-1]]
    return [w for w in win if w[0].any()]


def _tooth_contrasts(R: np.ndarray, windows: list) -> tuple[np.ndarray, np.ndarray]:
    """``(B, n_teeth)`` contrast of each tooth over its neighbouring troughs, and the index of
    its maximum, for the rows of ``R`` ``(B, n_points)``."""
    peak = np.stack([np.where(w, R, -np.inf).max(axis=1) for w, _, _ in windows], axis=1)
    arg = np.stack([np.where(w, R, -np.inf).argmax(axis=1) for w, _, _ in windows], axis=1)
    trough = np.stack([np.where(t, R, np.inf).min(axis=1) if t.any() else
                       np.full(len(R), -np.inf) for _, t, _ in windows], axis=1)
    before = np.concatenate([np.full((len(R), 1), -np.inf), trough[:, :-1]], axis=1)
    return peak - np.maximum(before, trough), arg


def _level_positions(V: np.ndarray, windows: list) -> np.ndarray:
    """``(B, n_teeth)`` index of the maximum of ``Var C`` (rows of ``V``) in each tooth's period
    cell (``±½`` period: the level need not sit in the comb's narrower tooth window):
    a level's position. ``R = Var C/⟨C⟩²`` peaks before the level (where ``⟨C⟩`` is still low),
    by an amount that depends on the level's index, which would bend a geometric ladder; ``Var
    C`` peaks where half the runs have passed it."""
    return np.stack([np.where(c, V, -np.inf).argmax(axis=1) for _, _, c in windows], axis=1)


def persistent_peaks(C: np.ndarray, p: np.ndarray, comb: Comb | None, *, n_boot: int = 200,
                     rng: np.random.Generator | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(positions, bootstrap spreads)`` of the longest run of consecutive teeth of ``comb``
    that are persistent peaks of ``R`` (module docstring), each placed at the maximum of
    ``Var C`` in its tooth window (:func:`_level_positions`); empty when none."""
    windows = _tooth_windows(comb, p) if comb is not None else []
    if not windows:
        return np.zeros(0), np.zeros(0)
    rng = np.random.default_rng(0) if rng is None else rng
    R, se = relative_variance_se(C)
    contrast, _ = _tooth_contrasts(R[None], windows)
    arg = _level_positions(C.var(axis=0)[None], windows)
    near = [w | t | (windows[k - 1][1] if k else False) for k, (w, t, _) in enumerate(windows)]
    need = Z_PEAK * np.array([se[m].max() for m in near])
    def replicate(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        resampled = C[rows]
        c_b, _ = _tooth_contrasts(relative_variance_se(resampled)[0], windows)
        return (c_b > need).sum(axis=0), p[_level_positions(resampled.var(axis=1), windows)]

    starts = range(0, n_boot, BOOT_CHUNK)
    draws = (rng.integers(len(C), size=(min(BOOT_CHUNK, n_boot - k), len(C))) for k in starts)
    scored = map_in_threads(replicate, draws, n_items=len(starts))
    held, where = sum(h for h, _ in scored), [w for _, w in scored]
    keep = np.append((contrast[0] > need) & (held / n_boot >= PERSIST), False)
    best, run = (0, 0), 0
    for k, kept in enumerate(keep):
        run = run + 1 if kept else 0
        best = max(best, (run, k - run + 1))
    sel = slice(best[1], best[1] + best[0])
    spread = np.concatenate(where)[:, sel].std(axis=0)
    return p[arg[0, sel]], np.maximum(spread, 0.5 * float(np.median(np.diff(p))))


@dataclass(frozen=True)
class TestOnce:
    """One run of the test on one ensemble: ``found``, the permutation ``p_value``, ``score``,
    ``null`` scores, best ``comb``, the persistent ``peaks`` and their bootstrap ``spread``, and
    the ``geometry`` of the peaks (None when the peaks were not looked at)."""

    found: bool
    p_value: float
    score: float
    null: np.ndarray
    comb: Comb | None
    peaks: np.ndarray
    spread: np.ndarray
    geometry: GeometryFit | None


def test_grid(p: np.ndarray, p_c: float | None = None, p_c_err: float | None = None):
    """The combs of the test on ``p``: four teeth anywhere, or three at a given ``p_c``."""
    if p_c is None:
        return comb_grid(p)
    return comb_grid(p, n_teeth=3, p_c=(float(p_c), float(p_c_err)))


def run_test(C: np.ndarray, p: np.ndarray, grid, config: CascadeConfig,
             rng: np.random.Generator, *, report: bool = True, p_c: float | None = None,
             p_c_err: float | None = None) -> TestOnce:
    """The test once (module docstring) on ``C`` ``(n_runs, n_points)`` over ``p`` with the
    combs ``grid`` (:func:`test_grid`); without ``report`` the peaks are only looked for when
    the p-value is at most α."""
    p_value, score, null, comb = permutation_test(C, grid, config.n_null, rng)
    if not (report or p_value <= config.alpha):
        return TestOnce(False, p_value, score, null, comb, np.zeros(0), np.zeros(0), None)
    peaks, spread = persistent_peaks(C, p, comb, n_boot=config.n_boot, rng=rng)
    geo = geometry_test(peaks, spread, p_c=p_c, p_c_err=p_c_err)
    if geo.geometric:
        R, se = relative_variance_se(C)
        off = off_ladder(p, C, R, se, peaks, geo, z_peak=Z_PEAK, tooth_tol=TOOTH_TOL,
                         min_gap=MIN_GAP)
        if len(off):
            geo = replace(geo, geometric=False, reason=(
                f"{len(off)} shared level(s) off the fitted ladder, at p = "
                f"{', '.join(f'{q:.4g}' for q in off)}"))
    found = bool(p_value <= config.alpha and geo.geometric)
    return TestOnce(found, p_value, score, null, comb, peaks, spread, geo)
