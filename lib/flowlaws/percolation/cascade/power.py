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
reaches the target: that size *decides* the test. :func:`decision_size` reads the curve: "decides
at N runs", or "undecidable by this test" when the curve is flat (its last power exceeds its
first by less than :data:`~flowlaws.percolation.cascade.config.FLAT_RISE`), with the reason
measured on the data (the injected jump against the run-to-run spread of ``C``).

Explained in: book/02_percolation/05_dsi.ipynb.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

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
           "detectable_jump", "n_levels_for"]


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
    model), ``n_points`` (the grid)."""

    sizes: tuple[int, ...]
    powers: tuple[float, ...]
    lows: tuple[float, ...]
    highs: tuple[float, ...]
    resampled: bool
    n_points: int


def power_curve(source: np.ndarray | Callable[[int, int], np.ndarray], p: np.ndarray,
                config: CascadeConfig, *, n_levels: int = N_TEETH, jump: float | None = None,
                p_c: float | None = None, p_c_err: float | None = None,
                progress: str | None = None) -> PowerCurve:
    """:func:`injection_power` at each size of ``config.sizes``, increasing, stopping at the
    first whose 95 % lower bound reaches ``POWER_TARGET``. ``source``: a model ``(n_runs, seed)
    -> C`` (fresh runs at each size) or an observed ``C`` whose finite runs are resampled with
    replacement (an approximation: repeated runs look more regular than fresh ones)."""
    rng = np.random.default_rng([config.seed, 2])
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
        if pw.low >= POWER_TARGET:
            break
    return PowerCurve(tuple(n for n, _ in out), tuple(w.power for _, w in out),
                      tuple(w.low for _, w in out), tuple(w.high for _, w in out),
                      not callable(source), len(p))


def decision_size(curve: PowerCurve, C: np.ndarray, jump: float) -> tuple[int | None, str]:
    """``(n_runs, text)``: the size at which the power's lower bound reaches
    ``POWER_TARGET`` ("decides at N runs"), or None with "undecidable by this test" and why
    (a flat curve), or None with the largest size tried (the curve still rising)."""
    how = "resampled" if curve.resampled else "fresh"
    tried = ", ".join(f"{n}: {w:.2f}" for n, w in zip(curve.sizes, curve.powers, strict=True))
    for n, low in zip(curve.sizes, curve.lows, strict=True):
        if low >= POWER_TARGET:
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
    return None, (f"not decided up to {max(curve.sizes)} {how} runs (power {tried}{trend}); "
                  f"larger ensembles needed")


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
