"""The cascade test's settings, typed and in one place: :class:`CascadeConfig`, its presets
(:data:`SMOKE`, :data:`READER`, :data:`FULL`) and every decision rule's threshold, declared here
before any run it decides (issue 24).

Every function of :mod:`flowlaws.percolation.cascade` that runs the test takes ``config:
CascadeConfig`` rather than loose keywords; :meth:`CascadeConfig.replace` gives a variant
(``READER.replace(seed=3)``). ``__post_init__`` refuses a bad field with an error that names it,
including an ``alpha`` below the p-value floor ``1/(n_null + 1)`` (such a test can never reject)
and an ``n_power`` too small for the power's 95 % lower bound ever to reach ``power_target``.

**Declared thresholds** (module constants; the reasons are in the comments beside them):
``LAM_GEOM`` (the λ a geometric verdict may report), ``PC_REACH`` (how far beyond the levels a
fitted ``p_c`` may lie), ``GOF_LEVEL`` (goodness of fit of geometric spacing), ``LAM_MARGIN``
(judging λ against a claimed value), ``FLAT_RISE`` (a power curve that does not grow),
``LEVEL_FRAC`` (how strong a level off the ladder must be to refuse the ladder),
``POWER_TARGET`` (the power "no cascade" needs, by its 95 % lower bound).

Explained in: book/02_percolation/05_dsi.ipynb.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace

from scipy import stats

from flowlaws.book.cache import stored_type

__all__ = [
    "POWER_TARGET", "LAM_GEOM", "PC_REACH", "GOF_LEVEL", "LEVEL_FRAC", "LAM_MARGIN",
    "FLAT_RISE", "CI_LEVEL", "JUMP_LADDER",
    "CascadeConfig", "SMOKE", "READER", "FULL", "min_injections", "power_interval",
]

POWER_TARGET = 0.8  # "no cascade" needs the power's 95 % lower bound at least this (the brief)
CI_LEVEL = 0.95  # every interval the test reports (power: Clopper–Pearson; λ, p_c: ±1.96 σ)
# A geometric verdict reports λ in this range: below 1.25 consecutive levels differ by less than
# a quarter of a spacing (indistinguishable from even spacing at the jitter of a real ensemble),
# above 5 four levels span more than two decades of |p − p_c| and no chapter's grid resolves them.
LAM_GEOM = (1.25, 5.0)
# The fitted p_c lies beyond the last level by at most PC_REACH times the levels' own span: a
# p_c farther out is an extrapolation the levels cannot support (evenly spaced levels fit with
# λ → 1 and p_c → ∞). A geometric cascade of 4 levels has p_c within 1/(λ³ − 1) spans (0.42 at
# λ = 1.5), so 1.0 refuses no cascade the test claims power for.
PC_REACH = 1.0
# Geometric spacing must fit the levels: χ² of the weighted residuals (bootstrap spreads of the
# peaks) with n − 3 degrees of freedom (n − 2 when p_c is given) at this level; 0.05 spends 5 %
# of a true cascade's power on the fit, the usual level of a goodness-of-fit test.
GOF_LEVEL = 0.05
# Rule 5 of the geometry test: a local maximum of R at least this fraction of the weakest fitted
# level's prominence is a shared level of the same kind, and must sit on the fitted ladder.
LEVEL_FRAC = 0.5
# λ against a claimed value holds when λ̂'s 95 % interval lies inside claim·(1 ± LAM_MARGIN),
# fails when it misses that band: 10 % is the accuracy the test must show on planted cascades
# (issue 24: λ̂ within 10 %), so no claim is judged more finely than the method recovers λ.
LAM_MARGIN = 0.10
# A power curve over growing ensembles is flat when its last power exceeds its first by less
# than this: the power does not grow with the runs, so no size decides (about the binomial
# spread of a power estimated from ~40 injections).
FLAT_RISE = 0.10
JUMP_LADDER = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0)  # multiples of the data's median jump


def power_interval(hits: int, n: int, level: float = CI_LEVEL) -> tuple[float, float]:
    """Clopper–Pearson interval ``(low, high)`` of a power measured as ``hits`` of ``n``
    injections (``scipy.stats.binomtest``); ``(nan, nan)`` when ``n = 0``."""
    if n == 0:
        return float("nan"), float("nan")
    ci = stats.binomtest(int(hits), int(n)).proportion_ci(confidence_level=level,
                                                          method="exact")
    return float(ci.low), float(ci.high)


def min_injections(target: float = POWER_TARGET, level: float = CI_LEVEL) -> int:
    """The fewest injections at which the power's lower bound can reach ``target`` at all
    (every injection found): 17 at 0.8 and 95 %."""
    n = 1
    while power_interval(n, n, level)[0] < target:
        n += 1
    return n


_MIN_INJECTIONS = min_injections()


@stored_type
@dataclass(frozen=True)
class CascadeConfig:
    """Settings of one cascade test (``judge_cascade`` and everything that runs it).

    ``alpha``: level of the run-level null (≥ ``1/(n_null + 1)``, the smallest p-value);
    ``n_null``: deals of the null; ``n_power``: injected cascades per power (0: no power, so no
    "no cascade"; else ≥ 17, the fewest at which its 95 % lower bound can reach 0.8);
    ``n_boot``: bootstrap replicates of the persistent peaks; ``seed``; ``lam_claimed``: the λ
    at which power is measured and claims are judged; ``lam_margin``: :data:`LAM_MARGIN`;
    ``jitter``: per-run jitter of injected levels (fraction of the spacing); ``window``:
    ``(lo, hi)`` of ``p`` searched, None for all; ``sizes``: the ladder of ensemble sizes at
    which an inconclusive verdict's power is measured (empty: not searched);
    ``n_surrogates``: the seed's phase-randomised test beside the verdict (0: not run);
    ``jump_ladder``: multiples of the data's jump for the detectable jump (empty: not searched).
    """

    alpha: float = 0.05
    n_null: int = 99
    n_power: int = 40
    n_boot: int = 100
    seed: int = 0
    lam_claimed: float = 2.0
    lam_margin: float = LAM_MARGIN
    jitter: float = 0.1
    window: tuple[float, float] | None = None
    sizes: tuple[int, ...] = (64, 128, 256, 512)
    n_surrogates: int = 0
    jump_ladder: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        for name in ("n_null", "n_power", "n_boot", "seed", "n_surrogates"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"CascadeConfig.{name} must be an integer ≥ 0, got {value!r}")
        for name in ("n_null", "n_boot"):
            if getattr(self, name) < 1:
                raise ValueError(f"CascadeConfig.{name} must be ≥ 1, got {getattr(self, name)}")
        if not (isinstance(self.alpha, (int, float)) and 0 < self.alpha < 1):
            raise ValueError(f"CascadeConfig.alpha must lie in (0, 1), got {self.alpha!r}")
        floor = 1 / (self.n_null + 1)
        if self.alpha < floor:
            need = math.ceil(1 / self.alpha) - 1
            raise ValueError(f"CascadeConfig.alpha = {self.alpha:g} is below the p-value floor "
                             f"1/(n_null + 1) = {floor:.3g} of n_null = {self.n_null}: the test "
                             f"could never reject; raise n_null to ≥ {need}")
        if 0 < self.n_power < _MIN_INJECTIONS:
            raise ValueError(f"CascadeConfig.n_power = {self.n_power}: the power's 95 % lower "
                             f"bound cannot reach {POWER_TARGET} with fewer than "
                             f"{_MIN_INJECTIONS} injections; give 0 (no power) or ≥ "
                             f"{_MIN_INJECTIONS}")
        if not (isinstance(self.lam_claimed, (int, float)) and math.isfinite(self.lam_claimed)
                and self.lam_claimed > 1):
            raise ValueError(f"CascadeConfig.lam_claimed must be a finite number > 1, got "
                             f"{self.lam_claimed!r}")
        if not (isinstance(self.lam_margin, (int, float)) and 0 < self.lam_margin < 1):
            raise ValueError(f"CascadeConfig.lam_margin must lie in (0, 1), got "
                             f"{self.lam_margin!r}")
        if not (isinstance(self.jitter, (int, float)) and 0 <= self.jitter < 1):
            raise ValueError(f"CascadeConfig.jitter must lie in [0, 1), got {self.jitter!r}")
        if self.window is not None:
            lo, hi = self.window
            if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
                raise ValueError(f"CascadeConfig.window must be (lo, hi) with lo < hi, got "
                                 f"{self.window!r}")
            object.__setattr__(self, "window", (float(lo), float(hi)))
        sizes = tuple(self.sizes)
        if any(isinstance(n, bool) or int(n) != n or n < 2 for n in sizes) or list(
                sizes) != sorted(set(sizes)):
            raise ValueError(f"CascadeConfig.sizes must be increasing integers ≥ 2, got "
                             f"{self.sizes!r}")
        object.__setattr__(self, "sizes", tuple(int(n) for n in sizes))
        ladder = tuple(float(k) for k in self.jump_ladder)
        if any(not (math.isfinite(k) and k > 0) for k in ladder):
            raise ValueError(f"CascadeConfig.jump_ladder must hold finite multiples > 0, got "
                             f"{self.jump_ladder!r}")
        object.__setattr__(self, "jump_ladder", ladder)

    def replace(self, **changes) -> CascadeConfig:
        """A copy with ``changes`` (validated again); an unknown name is refused by name."""
        known = {f.name for f in fields(self)}
        unknown = sorted(set(changes) - known)
        if unknown:
            raise TypeError(f"CascadeConfig has no field(s) {unknown}; fields: {sorted(known)}")
        return replace(self, **changes)

    @property
    def p_floor(self) -> float:
        """The smallest p-value the null can give, ``1/(n_null + 1)``."""
        return 1 / (self.n_null + 1)


# Smoke: the book's smoke build and unit tests (p floor 0.05 = α; 17 injections, the fewest at
# which "no cascade" is reachable). Reader: the chapters. Full: a publication run.
SMOKE = CascadeConfig(n_null=19, n_power=17, n_boot=30, sizes=(32, 64))
READER = CascadeConfig(n_null=99, n_power=40, n_boot=100, sizes=(64, 128, 256, 512))
FULL = CascadeConfig(n_null=199, n_power=100, n_boot=200, sizes=(64, 128, 256, 512, 1024))
