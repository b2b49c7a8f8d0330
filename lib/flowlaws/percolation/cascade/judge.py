"""The cascade test that chapters call, :func:`judge_cascade`: a run-level permutation null, a
comb statistic that tests discrete scale invariance (both in
:mod:`flowlaws.percolation.cascade.statistic`), persistent peaks, power by injection and a
three-way verdict.

**Peaks, λ and p_c.** The best comb's teeth, extended over the window, are read in ``R``; a
tooth counts as a peak when its contrast to its neighbouring troughs (maximum of ``R`` within
``±TOOTH_TOL`` of a period around the tooth, minus the larger neighbouring trough minimum) is
above ``Z_PEAK σ_R`` (the largest ``σ_R`` over the tooth's and its troughs' windows) in the data
*and* in at least ``PERSIST`` of ``n_boot`` bootstrap replicates (runs resampled). λ and
``p_c`` come from :func:`flowlaws.percolation.cascade.variance.estimate_lambda` on the longest run
of
consecutive peaks, with the bootstrap spread of each peak's position as its error.

**Found.** A cascade is found when the permutation p-value is at most α *and* at least
``N_TEETH`` consecutive persistent peaks stand on the comb: a rejected null alone only says that
the runs are not independent collections of jumps (a record process is not), not that they
hold a geometric cascade.

**Power and verdict.** :func:`injection_power` adds planted cascades (``N_TEETH`` levels at the
claimed λ, integer jumps of the data's typical size, a per-run jitter of each level of
``jitter`` times the spacing to the next level) to the observed runs and reruns the same test,
found-rule included, at the same size and α. Verdict: ``"cascade"`` if found; ``"no cascade"``
if not found and the power is at least ``POWER_TARGET``; ``"inconclusive"`` otherwise (the
summary then says whether the null alone was rejected).

**Which cascade the power is for.** The verdict's power is measured at the data's own median
jump: the cascade these runs would show if their own jumps were arranged in levels, so "no
cascade" means that such a cascade would have been seen. In a record process (the largest
cluster of random merging) that power can stay near 0 at any size, so an "inconclusive" also
reports, on request (``jump_ladder``), the *detectable jump*: the smallest injected jump, on a
geometric ladder of multiples of the median jump, at which the same test reaches
``POWER_TARGET`` (:func:`detectable_jump`). It says what the test could have seen and never
changes the verdict. A grid with fewer than :func:`min_points_for_power` points cannot hold
four injected levels: its power is not measured, and the note says how many points it needs.

Explained in: book/02_percolation/05_dsi.ipynb.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from flowlaws.book.progress import track
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
from flowlaws.percolation.cascade.surrogates import surrogate_test
from flowlaws.percolation.cascade.variance import (
    NoCascadeError,
    estimate_lambda,
    finite_runs,
    relative_variance,
)

__all__ = [
    "Z_PEAK", "PERSIST", "POWER_TARGET", "persistent_peaks", "inject_cascade", "injection_power",
    "RunsForPower", "runs_for_power", "CascadeVerdict", "judge_cascade", "JUMP_LADDER",
    "typical_jump", "min_points_for_power", "detectable_jump",
]

Z_PEAK = 2.0
PERSIST = 0.8
POWER_TARGET = 0.8
JUMP_LADDER = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0)  # multiples of the data's median jump


def typical_jump(C: np.ndarray) -> float:
    """The median size of the jumps of ``C`` ``(n_runs, n_points)``
    (:func:`~flowlaws.percolation.cascade.statistic.split_jumps`), 1 when it has none: the default
    size of an injected level."""
    _, is_jump = split_jumps(C)
    return float(np.median(np.abs(np.diff(C, axis=1)[is_jump]))) if is_jump.any() else 1.0


def min_points_for_power(lam: float = 2.0, n_levels: int = N_TEETH) -> int:
    """The fewest points of a uniform grid on which :func:`inject_cascade` can place
    ``n_levels`` levels at ``lam`` (the last ``2·MIN_GAP`` steps from ``p_c``, the first
    ``λ^{n_levels−1}`` times as far, at most 0.9 of the window from it): 179 at λ = 2 and four
    levels. On a coarser grid power cannot be measured, so no verdict can be "no cascade"."""
    return int(np.ceil(2 * MIN_GAP * lam ** (n_levels - 1) / 0.9)) + 1


def inject_cascade(C: np.ndarray, p: np.ndarray, rng: np.random.Generator, *, lam: float,
                   n_levels: int = N_TEETH, jitter: float = 0.1, jump: float | None = None,
                   direction: int | None = None) -> tuple[np.ndarray, np.ndarray, float]:
    """``C`` plus a planted cascade: ``(C + jumps, level positions, p_c)``.

    ``p_c`` is drawn inside the window (at least ``0.6`` spans from its far end), the first level
    log-uniformly between ``2·MIN_GAP·λ^{n_levels−1}`` grid steps and 0.9 of the distance to the
    far end (so the last level is at least ``2·MIN_GAP`` steps from ``p_c``); each run jumps by
    ``jump`` (default: the median size of the data's jumps, 1 if none) at each level, shifted by
    ``jitter · (spacing to the next level) · ξ``, ``ξ ~ N(0, 1)`` per run and level.
    """
    C, p = np.asarray(C, dtype=float), np.asarray(p, dtype=float)
    dp, span = float(np.median(np.diff(p))), float(p[-1] - p[0])
    direction = int(rng.choice([1, -1])) if direction is None else int(direction)
    lo = 2 * MIN_GAP * dp * lam ** (n_levels - 1)
    near_end = max(0.6 * span, lo / 0.9)
    if near_end > span:
        raise ValueError(f"the window of {len(p)} points is too coarse for {n_levels} injected "
                         f"levels at λ = {lam:g}: the first would lie {lo / dp:.0f} grid steps "
                         f"from p_c; needs ≥ {min_points_for_power(lam, n_levels)} points")
    dist = rng.uniform(near_end, span)  # p_c's distance from the window's far end
    p_c = p[0] + dist if direction > 0 else p[-1] - dist
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
    trough window toward p_c)`` as boolean masks over ``p``."""
    dist = comb.direction * (comb.p_c - p)
    ok = dist >= MIN_GAP * float(np.median(np.diff(p)))
    if not ok.any():
        return []
    lx = np.log(np.where(ok, dist, 1.0))
    period = np.log(comb.lam)
    xs = np.log(comb.direction * (comb.p_c - comb.teeth[0])) + np.arange(-60, 60) * period
    xs = xs[(xs >= lx[ok].min()) & (xs <= lx[ok].max())]
    win = [(ok & (np.abs(lx - x) <= TOOTH_TOL * period),
            ok & (np.abs(lx - (x - period / 2)) <= TOOTH_TOL * period)) for x in xs[::-1]]
    return [w for w in win if w[0].any()]


def _tooth_contrasts(R: np.ndarray, windows: list) -> tuple[np.ndarray, np.ndarray]:
    """``(B, n_teeth)`` contrast of each tooth over its neighbouring troughs, and the index of
    its maximum, for the rows of ``R`` ``(B, n_points)``."""
    peak = np.stack([np.where(w, R, -np.inf).max(axis=1) for w, _ in windows], axis=1)
    arg = np.stack([np.where(w, R, -np.inf).argmax(axis=1) for w, _ in windows], axis=1)
    trough = np.stack([np.where(t, R, np.inf).min(axis=1) if t.any() else
                       np.full(len(R), -np.inf) for _, t in windows], axis=1)
    before = np.concatenate([np.full((len(R), 1), -np.inf), trough[:, :-1]], axis=1)
    return peak - np.maximum(before, trough), arg


def persistent_peaks(C: np.ndarray, p: np.ndarray, comb: Comb | None, *, n_boot: int = 200,
                     rng: np.random.Generator | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(positions, bootstrap spreads)`` of the longest run of consecutive teeth of ``comb``
    that are persistent peaks of ``R`` (module docstring); empty when none."""
    windows = _tooth_windows(comb, p) if comb is not None else []
    if not windows:
        return np.zeros(0), np.zeros(0)
    rng = np.random.default_rng(0) if rng is None else rng
    R, se = relative_variance_se(C)
    contrast, arg = _tooth_contrasts(R[None], windows)
    near = [w | t | (windows[k - 1][1] if k else False) for k, (w, t) in enumerate(windows)]
    need = Z_PEAK * np.array([se[m].max() for m in near])
    held, where = np.zeros(len(windows)), []
    for k in range(0, n_boot, 16):
        rows = rng.integers(len(C), size=(min(16, n_boot - k), len(C)))
        c_b, arg_b = _tooth_contrasts(relative_variance_se(C[rows])[0], windows)
        held += (c_b > need).sum(axis=0)
        where.append(p[arg_b])
    keep = np.append((contrast[0] > need) & (held / n_boot >= PERSIST), False)
    best, run = (0, 0), 0
    for k, kept in enumerate(keep):
        run = run + 1 if kept else 0
        best = max(best, (run, k - run + 1))
    sel = slice(best[1], best[1] + best[0])
    spread = np.concatenate(where)[:, sel].std(axis=0)
    return p[arg[0, sel]], np.maximum(spread, 0.5 * float(np.median(np.diff(p))))


def _found(C: np.ndarray, p: np.ndarray, grid, alpha: float, n_null: int, n_boot: int,
           rng: np.random.Generator, report: bool = True) -> tuple[bool, tuple, tuple]:
    """The test once: ``(found, permutation_test(...), persistent_peaks(...))``; without
    ``report`` the peaks are only looked for when the p-value is at most α."""
    test = permutation_test(C, grid, n_null, rng)
    peaks = (persistent_peaks(C, p, test[3], n_boot=n_boot, rng=rng)
             if report or test[0] <= alpha else (np.zeros(0), np.zeros(0)))
    return bool(test[0] <= alpha and len(peaks[0]) >= N_TEETH), test, peaks


def injection_power(C: np.ndarray, p: np.ndarray, *, lam: float = 2.0, alpha: float = 0.05,
                    n_power: int = 100, n_null: int = 99, n_boot: int = 100, seed: int = 0,
                    jitter: float = 0.1, jump: float | None = None,
                    direction: int | None = None, progress: str | None = None) -> float:
    """The fraction of ``n_power`` injected cascades (:func:`inject_cascade`) that the same test
    finds (p-value and persistent peaks, module docstring) at the same size and α.
    ``progress``: a label for a progress bar."""
    rng = np.random.default_rng([seed, 1])
    C, p = np.asarray(C, dtype=float), np.asarray(p, dtype=float)
    grid, hits = comb_grid(p), 0
    for _ in track(range(n_power), desc=progress, enabled=progress is not None):
        planted, _, _ = inject_cascade(C, p, rng, lam=lam, jitter=jitter, jump=jump,
                                       direction=direction)
        hits += _found(planted, p, grid, alpha, n_null, n_boot, rng, report=False)[0]
    return hits / n_power


def detectable_jump(C: np.ndarray, p: np.ndarray, *, ladder: tuple[float, ...] = JUMP_LADDER,
                    target: float = POWER_TARGET, jump: float | None = None,
                    known: dict[float, float] | None = None, progress: str | None = None,
                    **power_kw) -> tuple[float, list[tuple[float, float]]]:
    """``(smallest detectable jump, [(multiple, power), ...])``: the power of
    :func:`injection_power` (``power_kw``: ``lam``, ``alpha``, ``n_power``, ``n_null``,
    ``n_boot``, ``seed``, ``jitter``) for injected jumps of ``multiple × jump`` (default: the
    data's median jump, :func:`typical_jump`), the multiples of ``ladder`` tried in increasing
    order until the power reaches ``target``. The first value is that jump, in the units of
    ``C``; ``inf`` when no multiple reached it. ``known``: powers already measured, by multiple
    (the verdict's own, at 1), reused rather than measured again.

    Why a ladder: the verdict's power is measured at the data's own jump size, the cascade the
    data would hold if its jumps were arranged in levels. In a record process (the largest
    cluster of random merging) most jumps are small and ``R`` is dominated by the few large late
    ones, so that power can be 0 at any number of runs; the detectable jump says what the test
    *could* have seen in the same runs, at the same size and α.
    """
    C = np.asarray(C, dtype=float)
    base = typical_jump(C) if jump is None else float(jump)
    tried = []
    for k in track(sorted(ladder), desc=progress, enabled=progress is not None):
        power = (known or {}).get(k)
        if power is None:
            power = injection_power(C, p, jump=k * base, **power_kw)
        tried.append((float(k), float(power)))
        if power >= target:
            return k * base, tried
    return float("inf"), tried


@dataclass
class RunsForPower:
    """``n_runs``: the fewest runs tried whose power reached ``target`` (None: none did);
    ``sizes`` and ``powers`` every size tried and its power."""

    n_runs: int | None
    sizes: list[int]
    powers: list[float]
    target: float


def runs_for_power(source: np.ndarray | Callable[[int, int], np.ndarray], p: np.ndarray, *,
                   sizes: tuple[int, ...] = (8, 16, 32, 64, 128, 256, 512),
                   target: float = POWER_TARGET, seed: int = 0, progress: str | None = None,
                   **power_kw) -> RunsForPower:
    """The number of runs at which :func:`injection_power` reaches ``target``.

    ``source`` is either a function ``(n_runs, seed) -> C`` (a model: fresh runs at each size) or
    an observed ``C`` whose runs are resampled with replacement to each size (an approximation:
    repeated runs make an ensemble look more regular than fresh ones would). Sizes are tried in
    increasing order and the search stops at the first that reaches ``target``.
    """
    rng = np.random.default_rng([seed, 2])
    tried, powers = [], []
    for n in track(sizes, desc=progress, enabled=progress is not None):
        C = source(n, seed) if callable(source) else finite_runs(source)
        if not callable(source):
            C = C[rng.integers(len(C), size=n)]
        tried.append(int(n))
        powers.append(injection_power(C, p, seed=seed + n, **power_kw))
        if powers[-1] >= target:
            return RunsForPower(int(n), tried, powers, target)
    return RunsForPower(None, tried, powers, target)


@dataclass
class CascadeVerdict:
    """The result of :func:`judge_cascade`; ``str()`` or :meth:`summary` is the line to print.

    ``verdict`` is ``"cascade"``, ``"no cascade"`` or ``"inconclusive"``; ``p_value`` the
    run-level permutation p-value (``n_null`` deals), ``power`` the injection power at
    ``lam_claimed`` (``n_power`` injections; NaN if not computed), ``lam ± lam_err`` and
    ``p_c ± p_c_err`` from the persistent ``peaks`` (NaN when fewer than 3 or not geometric),
    ``comb`` the best comb, ``statistic`` and ``null`` its score and the deals' scores,
    ``surrogate_p`` the seed's phase-randomised p-value (NaN unless asked for), ``note`` why the
    power could not be measured (empty when it was, or was not asked for). ``jump`` is the
    injected jump size; ``detectable`` the smallest injected jump on the ladder at which the
    power reaches ``POWER_TARGET`` (:func:`detectable_jump`; NaN: not searched, inf: none on
    ``ladder``, a list of ``(multiple of jump, power)``).
    """

    verdict: str
    p_value: float
    power: float
    alpha: float
    lam: float
    lam_err: float
    p_c: float
    p_c_err: float
    peaks: np.ndarray
    lam_claimed: float
    n_runs: int
    n_dropped: int
    n_points: int
    n_null: int
    n_power: int
    statistic: float
    comb: Comb | None = None
    null: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)
    surrogate_p: float = float("nan")
    note: str = ""
    jump: float = float("nan")
    detectable: float = float("nan")
    ladder: list = field(default_factory=list, repr=False)

    def detectable_text(self) -> str:
        """What the test could have seen: the smallest injected jump at which its power
        reaches ``POWER_TARGET`` (empty when not searched)."""
        if np.isnan(self.detectable):
            return ""
        if np.isinf(self.detectable):
            top = max(k for k, _ in self.ladder)
            return (f"power < {POWER_TARGET:g} for every injected jump up to {top:g} × the "
                    f"median jump {self.jump:.3g}")
        return (f"detectable jump (power ≥ {POWER_TARGET:g}): {self.detectable:.3g} = "
                f"{self.detectable / self.jump:g} × the median jump {self.jump:.3g}")

    def summary(self) -> str:
        """Verdict, p-value, power, λ and p_c, size: always with p-value and power."""
        fit = (f"λ = {self.lam:.2f} ± {self.lam_err:.2f}, p_c = {self.p_c:.4g} ± "
               f"{self.p_c_err:.2g} from {len(self.peaks)} peaks" if np.isfinite(self.lam)
               else f"{len(self.peaks)} persistent peak(s), no λ")
        why = (" (null rejected, but fewer than 4 persistent peaks on the comb)"
               if self.verdict != "cascade" and self.p_value <= self.alpha else "")
        seed = (f"; seed's surrogate p = {self.surrogate_p:.3f}"
                if np.isfinite(self.surrogate_p) else "")
        power = (f"power {self.power:.2f} at λ = {self.lam_claimed:g} ({self.n_power} "
                 "injections)" if np.isfinite(self.power) else
                 f"power not measured{' (' + self.note + ')' if self.note else ''}")
        seen = f"; {self.detectable_text()}" if self.detectable_text() else ""
        return (f"{self.verdict}{why}: p = {self.p_value:.3f} ({self.n_null} run-level deals), "
                f"{power}, α = {self.alpha:g}; {fit}; {self.n_runs} runs ({self.n_dropped} "
                f"diverged dropped), {self.n_points} points{seed}{seen}")

    __str__ = summary


def judge_cascade(C: np.ndarray, p: np.ndarray, *, alpha: float = 0.05, seed: int = 0,
                  lam: float = 2.0, n_null: int = 199, n_power: int = 100, n_boot: int = 200,
                  window: tuple[float, float] | None = None, jitter: float = 0.1,
                  jump: float | None = None, n_surrogates: int = 0,
                  progress: str | None = None, jump_ladder: tuple[float, ...] = ()
                  ) -> CascadeVerdict:
    """Is there a DSI cascade in the order parameter ``C`` ``(n_runs, n_points)`` over ``p``?

    Diverged runs (any NaN/inf) are dropped and counted. ``window=(lo, hi)`` restricts the
    search to ``lo ≤ p ≤ hi``. ``lam`` is the claimed λ at which power is measured
    (``n_power`` injections, each tested against ``min(n_null, 99)`` deals: resolution 0.01;
    ``n_power = 0`` skips it, and then no verdict can be "no cascade"; so does a window too
    coarse for four levels, with a ``note``). ``jitter`` and ``jump`` (the injected jump size;
    default the data's median jump) go to :func:`inject_cascade`. ``n_surrogates > 0``
    adds the seed's phase-randomised p-value for comparison. ``progress``: a label for a bar
    over the injections. ``jump_ladder`` (multiples of the injected jump, e.g.
    :data:`JUMP_LADDER`; empty: skipped) adds, when the power was measured and the verdict is
    not "cascade", the smallest injected jump the test detects with power ≥ 0.8
    (:func:`detectable_jump`, the same injections, size and α; it never changes the verdict,
    whose power stays the one at the data's own jump). Rules: module docstring.
    """
    C, p = np.asarray(C, dtype=float), np.asarray(p, dtype=float)
    if C.ndim != 2 or p.shape != (C.shape[1],):
        raise ValueError(f"C must be (n_runs, n_points) and p (n_points,), got {C.shape} and "
                         f"{p.shape}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
    if np.all(np.diff(p) < 0):
        C, p = C[:, ::-1], p[::-1]
    if not np.all(np.diff(p) > 0):
        raise ValueError("p must be strictly monotone")
    if window is not None:
        inside = (p >= window[0]) & (p <= window[1])
        C, p = C[:, inside], p[inside]
    kept = finite_runs(C)
    if len(kept) < 2 or len(p) < 8 * MIN_GAP:
        raise ValueError(f"need at least 2 finite runs and {8 * MIN_GAP} points, got "
                         f"{len(kept)} runs of {C.shape[0]} and {len(p)} points")
    rng = np.random.default_rng(seed)
    found, (p_value, statistic, null, comb), (peaks, spread) = _found(
        kept, p, comb_grid(p), alpha, n_null, n_boot, rng)
    est = (np.nan,) * 4
    if len(peaks) >= 3:
        try:
            e = estimate_lambda(peaks, sigma=spread)
            est = (e.lam, e.lam_err, e.p_c, e.p_c_err)
        except NoCascadeError:
            pass
    power, note = float("nan"), ""
    power_kw = {"lam": lam, "alpha": alpha, "n_power": n_power, "n_null": min(n_null, 99),
                "n_boot": min(n_boot, 100), "seed": seed, "jitter": jitter}
    if n_power:
        try:
            power = injection_power(kept, p, jump=jump, progress=progress, **power_kw)
        except ValueError as err:
            note = str(err)
    verdict = ("cascade" if found else
               "no cascade" if power >= POWER_TARGET else "inconclusive")
    base = typical_jump(kept) if jump is None else float(jump)
    detectable, ladder = float("nan"), []
    if jump_ladder and np.isfinite(power) and verdict != "cascade":
        detectable, ladder = detectable_jump(kept, p, ladder=tuple(jump_ladder), jump=base,
                                             known={1.0: power}, progress=progress, **power_kw)
    surrogate_p = (surrogate_test(relative_variance(kept), p, n_surrogates=n_surrogates,
                                  alpha=alpha, seed=seed).p_value if n_surrogates else np.nan)
    return CascadeVerdict(verdict, p_value, power, alpha, *map(float, est), np.sort(peaks),
                          lam, len(kept), C.shape[0] - len(kept), len(p), n_null, n_power,
                          statistic, comb, null, float(surrogate_p), note, base, detectable,
                          ladder)
