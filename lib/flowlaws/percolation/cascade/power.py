"""The cascade test's power, measured by injection with the verdict's own settings, and the
ensemble size that decides an inconclusive verdict.

:func:`injection_power` plants cascades (:func:`flowlaws.percolation.cascade.detect.
inject_cascade`: as many levels as the data shows, at least the test's minimum, at the claimed
λ) into the observed runs and reruns the same test (same ``n_null``, ``n_boot``, α, geometry
rule, ``p_c`` if one was given): a :class:`Power` with its Clopper–Pearson 95 % interval.
"No cascade" needs that interval's lower bound at least
:data:`~flowlaws.percolation.cascade.config.POWER_TARGET`.

:func:`power_curve` measures the power at every size of ``config.sizes`` (fresh runs of a model,
or the observed runs resampled), in increasing order, stopping at the first whose lower bound
reaches the target: that size *decides* the test (for resampled runs, only a size above the
ensemble's own: at or below it the verdict's direct power is the better estimate).
:func:`decision_size` reads the curve: "decides at N runs", or "undecidable by this test" when
the curve is flat (its last power exceeds its first by less than
:data:`~flowlaws.percolation.cascade.config.FLAT_RISE`), with the reason measured on the data
(the injected jump against the run-to-run spread of ``C``), or "not decided up to N runs" with
the size a probit fit of the curve projects (:func:`projected_size`, an extrapolation).

Explained in: book/02_percolation/05_dsi.ipynb.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import optimize, stats

from flowlaws.book.cache import stored_type
from flowlaws.book.progress import track
from flowlaws.percolation.cascade.config import (
    FLAT_RISE,
    POWER_TARGET,
    CascadeConfig,
    power_interval,
)
from flowlaws.percolation.cascade.detect import (
    inject_cascade,
    require_room,
    run_test,
    test_grid,
    typical_jump,
)
from flowlaws.percolation.cascade.statistic import N_TEETH
from flowlaws.percolation.cascade.variance import finite_runs

__all__ = ["Power", "injection_power", "PowerCurve", "power_curve", "decision_size",
           "projected_size", "PROJECTED", "detectable_jump", "n_levels_for"]


@stored_type
@dataclass(frozen=True)
class Power:
    """``hits`` of ``n`` injected cascades found: ``power`` and its 95 % ``low``–``high``
    (Clopper–Pearson); ``n_levels`` and ``lam`` of the injected cascades."""

    hits: int
    n: int
    power: float
    low: float
    high: float
    n_levels: int
    lam: float


def n_levels_for(n_peaks: int, p_c: float | None) -> int:
    """Levels to inject: as many as the data shows, at least the test's minimum (four; three
    with an independent ``p_c``)."""
    return max(int(n_peaks), 3 if p_c is not None else N_TEETH)


def injection_power(C: np.ndarray, p: np.ndarray, config: CascadeConfig, *,
                    n_levels: int = N_TEETH, jump: float | None = None,
                    p_c: float | None = None, p_c_err: float | None = None,
                    seed: int | None = None, progress: str | None = None) -> Power:
    """The fraction of ``config.n_power`` cascades injected into ``C`` ``(n_runs, n_points)``
    (``n_levels`` levels at ``config.lam_claimed``, jump ``jump``, default the data's median
    jump) that the same test finds with the same settings. Raises ValueError, naming the room
    the levels need, when the window is too small for them
    (:func:`~flowlaws.percolation.cascade.detect.require_room`).
    """
    rng = np.random.default_rng([config.seed if seed is None else seed, 1])
    C, p = np.asarray(C, dtype=float), np.asarray(p, dtype=float)
    require_room(p, lam=config.lam_claimed, n_levels=n_levels, p_c=p_c)
    grid, hits = test_grid(p, p_c, p_c_err), 0
    for _ in track(range(config.n_power), desc=progress, enabled=progress is not None):
        planted, _, _ = inject_cascade(C, p, rng, lam=config.lam_claimed, n_levels=n_levels,
                                       jitter=config.jitter, jump=jump, p_c=p_c)
        hits += run_test(planted, p, grid, config, rng, report=False, p_c=p_c,
                         p_c_err=p_c_err).found
    n = config.n_power
    return Power(hits, n, hits / n if n else float("nan"), *power_interval(hits, n), n_levels,
                 config.lam_claimed)


@stored_type
@dataclass(frozen=True)
class PowerCurve:
    """The power at growing ensemble sizes: ``sizes`` ``(k,)``, ``powers``, ``lows``, ``highs``
    (95 % Clopper–Pearson), ``resampled`` (observed runs resampled, rather than fresh runs of a
    model), ``n_points`` (the grid), ``n_trials`` (injections per size) and ``n_observed`` (the
    observed runs a resampled curve draws from; 0 for fresh runs)."""

    sizes: tuple[int, ...]
    powers: tuple[float, ...]
    lows: tuple[float, ...]
    highs: tuple[float, ...]
    resampled: bool
    n_points: int
    n_trials: int = 0
    n_observed: int = 0


def power_curve(source: np.ndarray | Callable[[int, int], np.ndarray], p: np.ndarray,
                config: CascadeConfig, *, n_levels: int = N_TEETH, jump: float | None = None,
                p_c: float | None = None, p_c_err: float | None = None,
                progress: str | None = None) -> PowerCurve:
    """:func:`injection_power` at each size of ``config.sizes``, increasing, stopping at the
    first that decides (:func:`_decides`: its 95 % lower bound reaches ``POWER_TARGET``).
    ``source``: a model ``(n_runs, seed) -> C`` (fresh runs at each size) or an observed ``C``
    whose finite runs are resampled with replacement (an approximation: repeated runs look more
    regular than fresh ones)."""
    rng = np.random.default_rng([config.seed, 2])
    n_observed = 0 if callable(source) else len(finite_runs(source))
    out: list[tuple[int, Power]] = []
    for n in track(config.sizes, desc=progress, enabled=progress is not None):
        if callable(source):
            C = source(n, config.seed)
        else:
            kept = finite_runs(source)
            C = kept[rng.integers(len(kept), size=n)]
        pw = injection_power(C, p, config, n_levels=n_levels, jump=jump, p_c=p_c,
                             p_c_err=p_c_err, seed=config.seed + n)
        out.append((int(n), pw))
        if _decides(int(n), pw.low, n_observed):
            break
    return PowerCurve(tuple(n for n, _ in out), tuple(w.power for _, w in out),
                      tuple(w.low for _, w in out), tuple(w.high for _, w in out),
                      not callable(source), len(p), config.n_power, n_observed)


def _decides(n: int, low: float, n_observed: int) -> bool:
    """Whether a rung of ``n`` runs whose power has 95 % lower bound ``low`` decides the test:
    the bound reaches ``POWER_TARGET`` and, for runs resampled from ``n_observed`` observed ones,
    ``n`` exceeds them. At or below the ensemble's own size the verdict's direct power (measured
    on the observed runs themselves, below the target, or it would not be inconclusive) is the
    better estimate: resampled runs repeat, and repeated runs look more regular."""
    return low >= POWER_TARGET and (n_observed == 0 or n > n_observed)


def decision_size(curve: PowerCurve, C: np.ndarray, jump: float) -> tuple[int | None, str]:
    """``(n_runs, text)``: the size at which the power's lower bound reaches
    ``POWER_TARGET`` ("decides at N runs"), or None with "undecidable by this test" and why
    (a flat curve), or None with the largest size tried (the curve still rising)."""
    how = "resampled" if curve.resampled else "fresh"
    tried = ", ".join(f"{n}: {w:.2f}" for n, w in zip(curve.sizes, curve.powers, strict=True))
    for n, low in zip(curve.sizes, curve.lows, strict=True):
        if _decides(n, low, curve.n_observed):
            return n, (f"decides at {n} runs ({curve.n_points} grid points; power by {how} runs: "
                       f"{tried})")
    rise = curve.powers[-1] - curve.powers[0] if len(curve.powers) > 1 else 0.0
    if len(curve.powers) > 1 and rise < FLAT_RISE:
        kept = finite_runs(np.asarray(C, dtype=float))
        spread = float(np.median(kept.std(axis=0))) if len(kept) > 1 else float("nan")
        return None, (f"undecidable by this test: the power does not grow with the runs "
                      f"({tried}; rise {rise:.2f} < {FLAT_RISE:g}); the injected jump {jump:.3g} "
                      f"is {jump / spread:.2g} × the run-to-run spread of C ({spread:.3g})"
                      if spread > 0 else
                      f"undecidable by this test: the power does not grow with the runs ({tried})")
    trend = ", still rising" if len(curve.powers) > 1 else ", one size tried"
    own = ("; resampled runs at or below the ensemble's own size do not decide"
           if any(low >= POWER_TARGET for low in curve.lows) else "")
    size, why = projected_size(curve)
    ahead = (f"{PROJECTED} {size:,} runs (a probit fit of the power in √N, extrapolated)"
             if size else f"larger ensembles needed; no size can be projected: {why}")
    return None, (f"not decided up to {max(curve.sizes)} {how} runs (power {tried}{trend}{own}); "
                  f"{ahead}")


PROJECTED = "projected to decide at about"
"""The words before the projected size in a decision text (:func:`projected_size`)."""


def projected_size(curve: PowerCurve) -> tuple[int | None, str]:
    """``(size, why)``: the ensemble size at which the power, extrapolated from ``curve``,
    reaches the least hit rate of ``curve.n_trials`` injections whose 95 % lower bound is
    ``POWER_TARGET`` (38 of 40), rounded to two significant digits; or None and why not.

    The model is the probit of the power linear in √N (the normal approximation to a test whose
    signal-to-noise ratio grows as √N), fitted by maximum likelihood to the hits at each size
    (``scipy.optimize.minimize`` on the binomial likelihood; statsmodels, whose GLM does the
    same, is not a dependency of the library). It is an extrapolation, stated as one: a size to
    run, not a measurement."""
    if curve.n_trials < 1 or len(curve.sizes) < 2:
        return None, "fewer than two sizes measured"
    n = curve.n_trials
    hits = np.rint(np.asarray(curve.powers, dtype=float) * n)
    if hits.sum() == 0:
        return None, "no injected cascade was found at any size"
    root_n = np.sqrt(np.asarray(curve.sizes, dtype=float))

    def minus_log_likelihood(ab: np.ndarray) -> float:
        z = ab[0] + ab[1] * root_n
        return float(-(hits * stats.norm.logcdf(z) + (n - hits) * stats.norm.logsf(z)).sum())

    fit = optimize.minimize(minus_log_likelihood, x0=np.array([-2.0, 0.0]), method="Nelder-Mead",
                            options={"xatol": 1e-8, "fatol": 1e-10, "maxiter": 4000})
    a, b = fit.x
    if not fit.success or b <= 0:
        return None, "the fitted power does not rise with the runs"
    need = next(k for k in range(n + 1) if power_interval(k, n)[0] >= POWER_TARGET) / n
    size = float(((stats.norm.ppf(need) - a) / b) ** 2)
    if not np.isfinite(size) or size > _FARTHEST:
        return None, f"the fitted power rises too slowly (beyond {_FARTHEST:.0e} runs)"
    if size <= max(curve.sizes):
        return None, "the fit reaches the target within the sizes tried, the measured power did not"
    return int(float(f"{size:.2g}")), ""


_FARTHEST = 1e9  # runs: a projection beyond this is reported as none (no ensemble is that large)


def detectable_jump(C: np.ndarray, p: np.ndarray, config: CascadeConfig, *,
                    n_levels: int = N_TEETH, jump: float | None = None,
                    known: dict[float, float] | None = None, p_c: float | None = None,
                    p_c_err: float | None = None) -> tuple[float, list[tuple[float, float]]]:
    """``(smallest detectable jump, [(multiple, power), ...])`` over ``config.jump_ladder``
    (multiples of ``jump``, default the data's median jump), tried in increasing order until the
    power's lower bound reaches ``POWER_TARGET``; ``inf`` when none did. ``known``: powers
    already measured, by multiple. It says what the test could have seen and never changes a
    verdict."""
    base = typical_jump(np.asarray(C, dtype=float)) if jump is None else float(jump)
    tried = []
    for k in sorted(config.jump_ladder):
        if (known or {}).get(k) is not None:
            power, low = known[k]
        else:
            w = injection_power(C, p, config, n_levels=n_levels, jump=k * base, p_c=p_c,
                                p_c_err=p_c_err)
            power, low = w.power, w.low
        tried.append((float(k), float(power)))
        if low >= POWER_TARGET:
            return k * base, tried
    return float("inf"), tried
