"""The statistics of the cascade test: a null built from the runs and a comb that tests
discrete scale invariance. The test itself, with peaks, power and verdict, is
:mod:`flowlaws.percolation.cascade.judge`.

**Null (run level).** Each run's order parameter ``C_r(p)`` is split into *jumps* (increments
larger than ``JUMP_FACTOR`` times the robust scale of all increments: every nonzero increment of
an integer staircase) and the small rest, which stays in place. A null ensemble deals the pooled
jump positions back to the runs at random, each run receiving as many as it had, and puts the
run's own jump sizes on them in their original order (:func:`deal_jumps`). The null hypothesis:
each run is an ordered sequence of jump sizes placed at times drawn independently from one
common law, with no level structure inside a run. Under it the observed ensemble is one of the
equally likely deals, so the rank p-value is exact at any ``n_runs`` and grid (a permutation
test). A cascade is the opposite: every run jumps once per level, so ``C`` is nearly the same in
all runs between levels and ``R = Var(C)/⟨C⟩²`` drops to almost zero there; dealt runs keep the
levels' positions but not the one-jump-per-level order, and their ``R`` has no such peaks. Runs
whose jumps depend on each other in time (a record process such as ``C_max`` of random-pair
merging) are not covered exactly: the null can then be rejected without any cascade, which is
why a verdict of cascade also needs persistent peaks (:mod:`flowlaws.percolation.cascade.judge`).

**Statistic.** ``σ_R(p)`` is the run-bootstrap standard error of ``R(p)``, by the delta method
(the infinitesimal jackknife, the bootstrap's large-sample value; a test checks it against
resampling). The *peak excess* ``u = R − max(min_{q≤p} R, min_{q≥p} R)`` is zero for a monotone
``R`` and the height above the higher side's lowest point in a peak; ``z = u / max(σ_R,
median σ_R)`` (the median over the points where ``σ_R > 0``). Against ``x = ln|p − p_c|`` a DSI
cascade is a periodic comb of period ``ln λ``. For ``p_c`` on a grid on both sides (``N_PC``
each, from 0.3 to 1.3 window spans from the far end) and ``λ`` in ``LAM_RANGE``, a comb of
``N_TEETH = 4`` teeth (three points fit any geometric law exactly; the fourth is the test)
scores the lowest tooth minus the highest trough between teeth, each the mean of ``z`` within
``±TOOTH_TOL`` of a period: all four levels must stand out *and* the gaps between them must be
low, so a single broad peak, a step or rough noise scores little. The statistic is the best
score over all combs, ties broken by the mean of ``z``.

Explained in: book/02_percolation/05_dsi.ipynb.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from flowlaws.common.threads import map_in_threads
from flowlaws.percolation.cascade.variance import LAM_RANGE

__all__ = [
    "JUMP_FACTOR", "N_TEETH", "TOOTH_TOL", "MIN_GAP",
    "split_jumps", "deal_jumps", "relative_variance_se", "peak_excess", "standardized_excess",
    "Comb", "comb_grid", "comb_statistic", "permutation_test",
]

JUMP_FACTOR = 5.0
N_TEETH = 4
TOOTH_TOL = 0.25
N_PC = 32
PC_REACH = (0.3, 1.3)
MIN_GAP = 10  # the nearest distance to p_c that a comb reads, in grid steps
DX = 0.03  # resolution in ln|p − p_c|
N_LAM = 40
CHUNK = 32


def split_jumps(C: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(rest, is_jump)``, both ``(n_runs, n_points − 1)``: the increments of each run that are
    not jumps, and where the jumps are (``|ΔC| > JUMP_FACTOR · 1.4826 · MAD(ΔC)``, or any
    nonzero increment when that scale is 0, as for an integer staircase)."""
    d, is_jump = _increments(C)
    return np.where(is_jump, 0.0, d), is_jump


def _increments(C: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(ΔC, is_jump)``, both ``(n_runs, n_points − 1)``: the rule of :func:`split_jumps`."""
    d = np.diff(C, axis=1)
    scale = 1.4826 * np.median(np.abs(d - np.median(d)))
    return d, np.abs(d) > max(JUMP_FACTOR * scale, 1e-9 * max(np.ptp(C), 1e-300))


@dataclass(frozen=True)
class _Jumps:
    """A run ensemble split once for dealing: first values ``start`` ``(M, 1)``, the rest of
    the increments ``rest`` ``(M, T − 1)``, and each jump's ``run``, ``col`` and ``size``."""

    start: np.ndarray
    rest: np.ndarray
    runs: np.ndarray
    cols: np.ndarray
    sizes: np.ndarray


def _split(C: np.ndarray) -> _Jumps:
    C = np.asarray(C, dtype=float)
    d, is_jump = _increments(C)
    runs, cols = np.nonzero(is_jump)
    return _Jumps(C[:, :1], np.where(is_jump, 0.0, d), runs, cols, d[runs, cols])


def _deal(jumps: _Jumps, orders: list[np.ndarray | None]) -> np.ndarray:
    """``(len(orders), M, T)`` float32: one ensemble per order of the pooled jump positions
    (``None``: every jump where it was)."""
    M, T1 = jumps.rest.shape
    runs, cols = jumps.runs, jumps.cols
    out = np.empty((len(orders), M, T1 + 1), dtype=np.float32)
    out[:, :, 0] = jumps.start[:, 0]
    for k, order in enumerate(orders):
        dealt = cols if order is None else cols[order]
        slots = runs * T1 + dealt[np.lexsort((dealt, runs))]
        inc = jumps.rest + np.bincount(slots, weights=jumps.sizes,
                                       minlength=M * T1).reshape(M, T1)
        out[k, :, 1:] = jumps.start + np.cumsum(inc, axis=1)
    return out


def deal_jumps(C: np.ndarray, n: int, rng: np.random.Generator | None) -> np.ndarray:
    """``(n, n_runs, n_points)`` float32 null ensembles: the pooled jumps of ``C`` dealt back to
    the runs at random (each run gets as many positions as it had, and its own sizes on them in
    order). ``rng=None`` deals every jump back where it was: ``C`` rebuilt by the same path."""
    jumps = _split(C)
    return _deal(jumps, [None if rng is None else rng.permutation(len(jumps.cols))
                         for _ in range(n)])


def relative_variance_se(C: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``R`` and its run-bootstrap standard error ``σ_R`` over axis ``−2`` (runs), by the delta
    method: ``σ_R² = mean(IF²)/M`` with the influence ``IF = ((c−m)² − v)/m² − 2R(c−m)/m``,
    from the central moments: ``mean(IF²) = (μ₄ − v²)/m⁴ − 4Rμ₃/m³ + 4R²v/m²``."""
    C = np.asarray(C)
    m = C.mean(axis=-2)
    dev = C - m[..., None, :]
    dev2 = dev * dev
    v = dev2.mean(axis=-2)
    mu3 = np.multiply(dev, dev2, out=dev).mean(axis=-2)  # in place: no third array
    mu4 = np.multiply(dev2, dev2, out=dev2).mean(axis=-2)
    safe = np.where(m == 0, 1.0, m)
    R = np.where(m == 0, 0.0, v / safe**2)
    ms = (mu4 - v**2) / safe**4 - 4 * R * mu3 / safe**3 + 4 * R**2 * v / safe**2
    se = np.sqrt(np.maximum(ms, 0.0) / C.shape[-2])
    return R, np.where(m == 0, 0.0, se)


def peak_excess(R: np.ndarray) -> np.ndarray:
    """``R − max(min_{q≤p} R, min_{q≥p} R)`` along the last axis: 0 for a monotone signal."""
    left = np.minimum.accumulate(R, axis=-1)
    right = np.flip(np.minimum.accumulate(np.flip(R, -1), axis=-1), -1)
    return R - np.maximum(left, right)


def standardized_excess(C: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(z, R, scale)`` over axis ``−2`` (runs): ``z = peak_excess(R)/scale``."""
    R, se = relative_variance_se(C)
    pos = np.where(se > 0, se, np.nan)
    floor = np.nan_to_num(np.nanmedian(pos, axis=-1, keepdims=True), nan=1.0) if np.isfinite(
        pos).any() else np.ones(se.shape[:-1] + (1,))
    scale = np.maximum(se, floor)
    return peak_excess(R) / scale, R, scale


@dataclass
class _Grid:
    p: np.ndarray
    x: np.ndarray  # (nx,) ln|p − p_c|
    direction: np.ndarray  # (G,) +1: p grows toward p_c
    p_c: np.ndarray  # (G,)
    i0: np.ndarray  # (G, nx) left grid index of each comb point
    w: np.ndarray  # (G, nx) interpolation weight
    valid: np.ndarray  # (G, nx)
    shifts: np.ndarray  # periods in samples of x
    n_teeth: int = N_TEETH
    # (period, window) in samples of x for each shift: a tooth averages 2·TOOTH_TOL periods,
    # at least 2 samples
    widths: list[tuple[int, int]] = field(init=False)

    def __post_init__(self) -> None:
        self.widths = [(int(s), max(2, int(np.round(2 * TOOTH_TOL * s)))) for s in self.shifts]


def comb_grid(p: np.ndarray, *, n_teeth: int = N_TEETH,
              p_c: tuple[float, float] | None = None) -> _Grid:
    """The combs searched over the grid ``p``: computed once, used for data and nulls.

    ``p_c = (value, error)``: an independently measured critical point; the combs then put
    their ``p_c`` only at ``value + error · (−2, −1, 0, 1, 2)``, both directions, and
    ``n_teeth = 3`` suffices (three teeth at a known ``p_c`` test geometry)."""
    dp, span = float(np.median(np.diff(p))), float(p[-1] - p[0])
    if p_c is None:
        reach = span * np.linspace(*PC_REACH, N_PC)
        direction = np.repeat([1, -1], N_PC)
        p_c = np.concatenate([p[0] + reach, p[-1] - reach])
    else:
        at = p_c[0] + p_c[1] * np.arange(-2.0, 3.0)
        direction = np.repeat([1, -1], len(at))
        p_c = np.concatenate([at, at])
    x = np.arange(np.log(MIN_GAP * dp), np.log(span * PC_REACH[1]) + DX, DX)
    q = p_c[:, None] - direction[:, None] * np.exp(x)[None, :]
    fi = np.interp(q, p, np.arange(len(p), dtype=float), left=np.nan, right=np.nan)
    valid = np.isfinite(fi)
    fi = np.where(valid, fi, 0.0)
    i0 = np.minimum(np.floor(fi).astype(int), len(p) - 2)
    shifts = np.unique(np.round(np.log(np.geomspace(*LAM_RANGE, N_LAM)) / DX).astype(int))
    shifts = shifts[(shifts >= 2) & ((n_teeth - 1) * shifts < len(x))]
    return _Grid(p, x, direction, p_c, i0, (fi - i0).astype(np.float32), valid, shifts,
                 int(n_teeth))


@dataclass
class Comb:
    """The best comb: ``direction`` (+1: ``p`` grows toward ``p_c``), ``p_c``, ``lam``, the
    ``N_TEETH`` tooth positions ``teeth`` (nearest ``p_c`` first) and its ``score``."""

    direction: int
    p_c: float
    lam: float
    teeth: np.ndarray
    score: float


def _running_sums(a: np.ndarray, valid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Running sums along the last axis, with a leading 0: of ``a`` ``(B, G, nx)`` where
    ``valid`` ``(G, nx)`` (0 elsewhere), and of ``valid`` itself."""
    zero = np.zeros(a.shape[:-1] + (1,), dtype=a.dtype)
    total = np.concatenate([zero, np.cumsum(np.where(valid, a, 0), axis=-1)], axis=-1)
    count = np.concatenate([np.zeros((valid.shape[0], 1), int), np.cumsum(valid, -1)], -1)
    return total, count


def _window_means(total: np.ndarray, count: np.ndarray, w: int
                  ) -> tuple[np.ndarray, np.ndarray]:
    """``(mean, inside)`` over windows of ``w`` samples from the running sums of
    :func:`_running_sums`: ``mean[..., j]`` averages samples ``j … j + w − 1`` (the window
    centred on sample ``j + w // 2``), ``(B, G, nx − w + 1)``; ``inside`` ``(G, nx − w + 1)``:
    the whole window is valid. Only windows that fit are computed: a comb with a tooth outside
    them scores −∞ whatever its mean."""
    inside = (count[:, w:] - count[:, :-w]) == w
    return (total[..., w:] - total[..., :-w]) / w, inside


def _comb_contrast(mean: np.ndarray, inside: np.ndarray, s: int, n_teeth: int
                   ) -> np.ndarray | None:
    """``(B, G, n)`` lowest tooth minus highest trough of the combs of period ``s`` whose first
    tooth is window ``i < n = L − (n_teeth − 1)·s`` of ``mean`` ``(B, G, L)`` (troughs halfway
    between teeth), −∞ where a tooth's window is not ``inside``; None when no comb fits."""
    n, h = mean.shape[-1] - (n_teeth - 1) * s, s // 2
    if n <= 0:
        return None
    teeth, troughs, ok = mean[..., :n].copy(), mean[..., h:h + n].copy(), inside[:, :n].copy()
    for k in range(1, n_teeth):
        np.minimum(teeth, mean[..., k * s:k * s + n], out=teeth)
        ok &= inside[:, k * s:k * s + n]
        if k < n_teeth - 1:
            np.maximum(troughs, mean[..., k * s + h:k * s + h + n], out=troughs)
    np.subtract(teeth, troughs, out=teeth)
    teeth[:, ~ok] = -np.inf
    return teeth


def comb_statistic(z: np.ndarray, grid: _Grid, *, best: bool = False
                   ) -> np.ndarray | tuple[np.ndarray, Comb | None]:
    """``(B,)`` best comb score of each row of ``z`` ``(B, n_points)`` (module docstring); with
    ``best=True`` also the :class:`Comb` of the first row.

    A tooth is the mean of ``z`` read along ``x`` over a window of ``2·TOOTH_TOL`` periods
    (at least 2 samples), centred on the tooth; combs whose windows leave the valid part of
    ``x`` (beyond the grid, or nearer ``p_c`` than ``MIN_GAP`` steps) score −∞."""
    z = np.asarray(z, dtype=np.float32)
    n_teeth = grid.n_teeth
    zx = z[:, grid.i0] * (1 - grid.w) + z[:, grid.i0 + 1] * grid.w  # (B, G, nx)
    total, count = _running_sums(zx, grid.valid)
    windows: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    score, where = np.full(z.shape[0], -np.inf), None
    for s, w in grid.widths:
        if w not in windows:
            windows[w] = _window_means(total, count, w)
        contrast = _comb_contrast(*windows[w], s, n_teeth)
        if contrast is None:
            continue
        n = contrast.shape[-1]
        top_row = contrast.reshape(z.shape[0], -1).max(axis=1)
        if best and top_row[0] > score[0]:
            g, i = np.unravel_index(int(np.argmax(contrast[0])), (len(grid.p_c), n))
            where = (int(grid.direction[g]), float(grid.p_c[g]), s, int(i) + w // 2,
                     top_row[0])
        score = np.maximum(score, top_row)
    if not best:
        return score
    if where is None:
        return score, None
    direction, p_c, s, i, top = where
    teeth = p_c - direction * np.exp(grid.x[i + s * np.arange(n_teeth)])
    return score, Comb(direction, p_c, float(np.exp(s * DX)), teeth, float(top))


def _statistics(ensembles: np.ndarray, grid: _Grid) -> np.ndarray:
    z = standardized_excess(ensembles)[0]
    return np.stack([comb_statistic(z, grid), z.mean(axis=-1)], axis=-1)


def _null_statistics(jumps: _Jumps, grid: _Grid, n_null: int, rng: np.random.Generator
                     ) -> np.ndarray:
    """``(n_null, 2)`` statistics of ``n_null`` deals, in chunks of ``CHUNK`` scored on threads
    (:func:`~flowlaws.common.threads.map_in_threads`); the deals' orders are drawn from ``rng``
    in sequence, so the result does not depend on the number of threads."""
    sizes = [min(CHUNK, n_null - k) for k in range(0, n_null, CHUNK)]
    orders = ([rng.permutation(len(jumps.cols)) for _ in range(m)] for m in sizes)
    scored = map_in_threads(lambda o: _statistics(_deal(jumps, o), grid), orders,
                            n_items=len(sizes))
    return np.concatenate(scored)


def permutation_test(C: np.ndarray, grid: _Grid, n_null: int, rng: np.random.Generator
                   ) -> tuple[float, float, np.ndarray, Comb | None]:
    """``(p_value, score, null scores, best Comb)`` of ``C`` against ``n_null`` deals.

    The rank p-value ``(1 + #{null ≥ observed})/(1 + n_null)`` of the comb score, ties broken
    by the mean of ``z`` (a few runs' quantised ``R`` can tie)."""
    jumps = _split(C)
    z = standardized_excess(_deal(jumps, [None]))[0]
    observed, comb = comb_statistic(z, grid, best=True)
    null = _null_statistics(jumps, grid, n_null, rng)
    at_least = (null[:, 0] > observed[0]) | (
        (null[:, 0] == observed[0]) & (null[:, 1] >= z.mean()))
    return float((1 + at_least.sum()) / (1 + n_null)), float(observed[0]), null[:, 0], comb
