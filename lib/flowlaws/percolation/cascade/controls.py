"""The DSI chapter's controls and re-judged ensembles, as plain records a cache can keep.

:func:`judge_model` runs one of the merge models of
:mod:`flowlaws.percolation.toys.cascades` (hierarchical pairwise merging, random-pair merging,
the kinematic ring) and judges it with :func:`flowlaws.percolation.cascade.judge.judge_cascade`;
:func:`judged` does the same for any ensemble (SGD runs, say); :func:`model_power_size` asks
:func:`~flowlaws.percolation.cascade.judge.runs_for_power` how many runs of a model the test
needs to reach power 0.8. :func:`verdict_line` is the one printed line of a verdict (always with
its p-value and power), :func:`cascade_point` the slider figure's point (``R(p)``, the
cascade's peaks, the fitted ``p_c`` line and a caption badge), :func:`holm` the Holm–Bonferroni
correction over a grid of settings.

Power by injection plants ``N_TEETH`` levels at λ, the last at least ``2·MIN_GAP`` grid steps
from ``p_c`` and the first at least ``2·MIN_GAP·λ^{N_TEETH−1}`` steps; a grid too short for
that (:func:`power_fits`: fewer than 179 points at λ = 2) is judged without power, and its
verdict cannot be "no cascade"; the verdict line says so, with the number of points needed.
Fewer levels on a coarse grid were not adopted: the comb needs four teeth (three fit any
geometric law exactly), so a three-level cascade would be a different test, whose power has not
been measured. :func:`judged` with ``jump_ladder`` also records the smallest injected jump
the test detects with power 0.8 (:func:`~flowlaws.percolation.cascade.judge.detectable_jump`),
what an inconclusive verdict could have seen.

Explained in: book/02_percolation/05_dsi.ipynb.
"""
from __future__ import annotations

import numpy as np

from flowlaws.book.cache import cached_call
from flowlaws.book.sliders import SliderPoint
from flowlaws.percolation.cascade.judge import (
    judge_cascade,
    min_points_for_power,
    runs_for_power,
)
from flowlaws.percolation.cascade.statistic import N_TEETH
from flowlaws.percolation.cascade.variance import (
    find_variance_peaks,
    finite_runs,
    relative_variance,
)
from flowlaws.percolation.dynamics.sgd import sgd_order_parameter
from flowlaws.percolation.toys.cascades import (
    KinematicModel,
    asynchronous_runs,
    hierarchical_runs,
    kinematic_runs,
    merged_fraction,
)

__all__ = [
    "MODELS",
    "model_runs",
    "power_fits",
    "judged",
    "judge_model",
    "model_power_size",
    "control_verdict",
    "verdict_line",
    "detectable_text",
    "badge",
    "cascade_point",
    "unselected_maxima",
    "holm",
    "grid_summary",
    "sgd_verdict",
    "sgd_power_size",
    "synchronised_ratios",
    "lambda_claim",
    "grid_claim",
    "claim_numbers",
]

MODELS = ("hierarchical", "random-pair", "kinematic")


def model_runs(model: str, N: int, n_runs: int, *, spread: float = 0.5, seed: int = 0
               ) -> np.ndarray:
    """``(n_runs, N)`` the largest cluster's share ``C_max/N`` after ``m = 0 … N−1`` merges
    (read against :func:`~flowlaws.percolation.toys.cascades.merged_fraction`) in ``model``,
    one of :data:`MODELS`; ``spread`` is the hierarchical model's delay spread."""
    if model == "hierarchical":
        C = hierarchical_runs(N, n_runs, spread=spread, seed=seed)
    elif model == "random-pair":
        C = asynchronous_runs(N, n_runs, seed=seed)
    elif model == "kinematic":
        C = kinematic_runs(KinematicModel(N=N), n_runs, seed=seed)[:, ::-1]
    else:
        raise ValueError(f"model must be one of {MODELS}, got {model!r}")
    return C / N


def power_fits(n_points: int, lam: float = 2.0) -> bool:
    """Whether ``N_TEETH`` injected levels at ``lam`` fit on a grid of ``n_points`` (module
    docstring; :func:`~flowlaws.percolation.cascade.judge.min_points_for_power`)."""
    return n_points >= min_points_for_power(lam, N_TEETH)


def judged(C: np.ndarray, p: np.ndarray, *, alpha: float = 0.05, seed: int = 0,
           lam: float = 2.0, n_null: int = 99, n_power: int = 20, n_boot: int = 100,
           n_surrogates: int = 0, jump_ladder: tuple[float, ...] = ()) -> dict:
    """:func:`judge_cascade` of ``C`` ``(n_runs, n_points)`` over ``p`` as a plain dict.

    Keys: ``verdict``, ``p_value``, ``power`` (NaN when not measured or when the grid is too
    short, :func:`power_fits`), ``lam``, ``lam_err``, ``p_c``, ``p_c_err``, ``peaks``,
    ``alpha``, ``lam_claimed``, ``n_runs`` (finite runs), ``n_dropped``, ``n_points``, ``n_null``,
    ``n_power``, ``surrogate_p`` (the seed's phase-randomised p-value when ``n_surrogates``),
    ``summary`` (the verdict's line), ``x`` and ``R`` (the relative variance over the finite
    runs), ``jump`` (the injected jump), ``detectable`` (the smallest detectable jump with
    ``jump_ladder``, NaN without, inf when none on the ladder) and ``ladder`` (its
    ``(multiple, power)`` pairs).
    """
    C, p = np.asarray(C, dtype=float), np.asarray(p, dtype=float)
    n_power = n_power if power_fits(len(p), lam) else 0
    kept = finite_runs(C)
    if len(kept) < 2:  # nothing to judge: said so, never a number
        nan = float("nan")
        return {"verdict": "inconclusive", "p_value": nan, "power": nan, "lam": nan,
                "lam_err": nan, "p_c": nan, "p_c_err": nan, "peaks": [], "alpha": alpha,
                "lam_claimed": lam, "n_runs": len(kept), "n_dropped": len(C) - len(kept),
                "n_points": len(p), "n_null": n_null, "n_power": 0, "surrogate_p": nan,
                "summary": f"inconclusive: {len(kept)} finite run(s) of {len(C)}",
                "x": p.tolist(), "R": np.full(len(p), np.nan).tolist(), "jump": nan,
                "detectable": nan, "ladder": []}
    v = judge_cascade(C, p, alpha=alpha, seed=seed, lam=lam, n_null=n_null, n_power=n_power,
                      n_boot=n_boot, n_surrogates=n_surrogates, jump_ladder=jump_ladder)
    return {"verdict": v.verdict, "p_value": v.p_value, "power": v.power, "lam": v.lam,
            "lam_err": v.lam_err, "p_c": v.p_c, "p_c_err": v.p_c_err,
            "peaks": [float(x) for x in v.peaks], "alpha": alpha, "lam_claimed": lam,
            "n_runs": v.n_runs, "n_dropped": v.n_dropped, "n_points": v.n_points,
            "n_null": n_null, "n_power": n_power, "surrogate_p": v.surrogate_p,
            "summary": v.summary(), "x": p.tolist(),
            "R": relative_variance(kept).tolist(), "jump": v.jump, "detectable": v.detectable,
            "ladder": [list(t) for t in v.ladder]}


def judge_model(model: str, N: int, n_runs: int, *, spread: float = 0.5, seed: int = 0,
                **judge_kw) -> dict:
    """:func:`judged` on ``n_runs`` fresh runs of ``model`` with ``N`` units; the record also
    holds ``model``, ``N`` and ``spread``."""
    C = model_runs(model, N, n_runs, spread=spread, seed=seed)
    return judged(C, merged_fraction(N), seed=seed, **judge_kw) | {
        "model": model, "N": N, "spread": spread}


def model_power_size(model: str, N: int, *, spread: float = 0.5, seed: int = 0,
                     sizes: tuple[int, ...] = (64, 128, 256), lam: float = 2.0,
                     alpha: float = 0.05, n_null: int = 99, n_power: int = 20,
                     n_boot: int = 100) -> dict:
    """``{"n_runs", "sizes", "powers", "target"}``: the fewest runs of ``model`` (fresh runs at
    every size tried, in increasing order) at which the injection power at ``lam`` reaches 0.8
    (``n_runs`` None: none of ``sizes`` did)."""
    p = merged_fraction(N)
    r = runs_for_power(lambda n, s: model_runs(model, N, n, spread=spread, seed=s), p,
                       sizes=tuple(sizes), seed=seed, lam=lam, alpha=alpha, n_null=n_null,
                       n_power=n_power, n_boot=n_boot)
    return {"n_runs": r.n_runs, "sizes": r.sizes, "powers": r.powers, "target": r.target}


def control_verdict(model: str, N: int, n_runs: int, *, spread: float = 0.5, seed: int = 0,
                    power_sizes: tuple[int, ...] = (), **judge_kw) -> tuple[dict, dict | None]:
    """``(record, size)``: :func:`judged` on ``n_runs`` runs of ``model`` (:func:`model_runs`),
    runs and verdict cached on disk (:func:`flowlaws.book.cache.calls.cached_call`), and, when
    the verdict is inconclusive with a measured power and ``power_sizes`` are given, the runs at
    which the power reaches 0.8 (``size``, else None). The size search draws fresh runs at every
    size (:func:`model_power_size`), except for the kinematic ring, whose simulation is slow: its
    observed runs are resampled to each size (an approximation, see
    :func:`~flowlaws.percolation.cascade.judge.runs_for_power`; ``size["resampled"]`` says which).
    ``judge_kw``: ``alpha``, ``n_null``, ``n_power``, ``n_boot``, ``n_surrogates``,
    ``jump_ladder``."""
    C = cached_call(model_runs, model, N, n_runs, spread=spread, seed=seed)
    rec = cached_call(judged, C, merged_fraction(N), seed=seed, **judge_kw)
    rec = rec | {"model": model, "N": N, "spread": spread}
    if rec["verdict"] != "inconclusive" or not np.isfinite(rec["power"]) or not power_sizes:
        return rec, None
    size_kw = {k: v for k, v in judge_kw.items() if k in ("alpha", "n_null", "n_power", "n_boot")}
    sizes = tuple(int(n) for n in power_sizes)
    if model == "kinematic":
        def search() -> dict:
            r = runs_for_power(C, merged_fraction(N), sizes=sizes, seed=seed, **size_kw)
            return {"n_runs": r.n_runs, "sizes": r.sizes, "powers": r.powers,
                    "target": r.target, "resampled": True}
    else:
        def search() -> dict:
            return model_power_size(model, N, spread=spread, seed=seed, sizes=sizes,
                                    **size_kw) | {"resampled": False}
    return rec, cached_call(search)


def _lam_text(rec: dict) -> str:
    if not np.isfinite(rec["lam"]):
        return f"{len(rec['peaks'])} persistent peak(s), no λ"
    return f"λ = {rec['lam']:.2f} ± {rec['lam_err']:.2f} from {len(rec['peaks'])} peaks"


def _power_text(rec: dict) -> str:
    if not np.isfinite(rec["power"]):
        need = min_points_for_power(rec["lam_claimed"], N_TEETH)
        if rec["n_points"] < need:
            return (f"power not measured: grid of {rec['n_points']} points too coarse for "
                    f"{N_TEETH} injected levels at λ = {rec['lam_claimed']:g} (needs ≥ {need})")
        return "power not measured"
    return f"power {rec['power']:.2f} at λ = {rec['lam_claimed']:g}"


def detectable_text(rec: dict) -> str:
    """What an inconclusive verdict could have seen: the smallest injected jump at which the
    power reaches 0.8 (:func:`judged` with ``jump_ladder``), or the largest tried when none
    did; empty when not searched."""
    d, jump = rec.get("detectable", float("nan")), rec.get("jump", float("nan"))
    if d is None or np.isnan(d):
        return ""
    tried = ", ".join(f"{k:g}×: {pw:.2f}" for k, pw in rec["ladder"])
    what = (f"power < 0.8 for every injected jump up to {max(k for k, _ in rec['ladder']):g} × "
            f"the median jump {jump:.3g}" if np.isinf(d) else
            f"detectable jump (power ≥ 0.8): {d:.3g} = {d / jump:g} × the median jump {jump:.3g}")
    return f"{what} ({rec['n_power']} injections each; power by multiple: {tried})"


def verdict_line(label: str, rec: dict, size: dict | None = None) -> str:
    """``label: verdict, p-value, power, λ``; an inconclusive verdict adds "inconclusive at
    this size" and, given ``size`` (:func:`model_power_size`), the number of runs at which the
    power reached 0.8, or the largest tried where it did not."""
    line = (f"{label}: {rec['verdict']}, p = {rec['p_value']:.3f} ({rec['n_null']} deals), "
            f"{_power_text(rec)} ({rec['n_power']} injections), {_lam_text(rec)}; "
            f"{rec['n_runs']} runs, {rec['n_points']} points")
    if detectable_text(rec):
        line += f"\n    {detectable_text(rec)}"
    if rec["verdict"] != "inconclusive":
        return line
    line += f"\n    inconclusive at this size ({rec['n_runs']} runs)"
    if size is not None:
        tried = ", ".join(f"{n}: {pw:.2f}" for n, pw in zip(size["sizes"], size["powers"],
                                                             strict=True))
        reach = (f"power reaches {size['target']:g} at {size['n_runs']} runs" if size["n_runs"]
                 else f"power stays below {size['target']:g} up to {max(size['sizes'])} runs")
        how = "resampled runs" if size.get("resampled") else "fresh runs"
        line += f"; {reach} (measured by injection into {how}; runs: power = {tried})"
    return line


def badge(rec: dict) -> str:
    """The slider's caption: verdict, λ ± error, p-value and power."""
    return (f"{rec['verdict']}: {_lam_text(rec)} (mean field 2), p = {rec['p_value']:.3f}, "
            f"{_power_text(rec)}")


def unselected_maxima(rec: dict) -> np.ndarray:
    """``(J, 2)`` the local maxima ``(p, R)`` of a :func:`judged` record's ``R`` that the raw
    detector sees (:func:`~flowlaws.percolation.cascade.variance.find_variance_peaks`, its
    defaults) and that
    are not persistent peaks of the cascade (more than 2 grid steps from every one)."""
    x, R = np.asarray(rec["x"], dtype=float), np.asarray(rec["R"], dtype=float)
    if len(x) < 3 or not np.isfinite(R).all():
        return np.zeros((0, 2))
    found = find_variance_peaks(R, x)
    peaks = np.asarray(rec["peaks"], dtype=float)
    step = float(np.median(np.abs(np.diff(x))))
    far = [not len(peaks) or np.abs(peaks - q).min() > 2 * step for q in found.p]
    return np.c_[found.p[far], R[found.index[far]]] if any(far) else np.zeros((0, 2))


def cascade_point(rec: dict, *, prefix: str = "", label: str = "R") -> SliderPoint:
    """The slider figure's point for a :func:`judged` record: the curve ``R`` over ``x``, the
    cascade's persistent peaks as marks, the other local maxima of ``R``
    (:func:`unselected_maxima`) as a second mark set, the fitted ``p_c`` as a vertical line (a
    second curve through two points at ``x = p_c``, when a λ was fitted), and :func:`badge` as
    caption."""
    x, R = np.asarray(rec["x"], dtype=float), np.asarray(rec["R"], dtype=float)
    peaks = np.asarray(rec["peaks"], dtype=float)
    marks = np.c_[peaks, np.interp(peaks, x, R)] if len(peaks) else np.zeros((0, 2))
    others = unselected_maxima(rec)
    curves = {label: R}
    p_c = rec["p_c"]
    if np.isfinite(p_c):
        at = int(np.searchsorted(x, p_c))
        inside = np.interp(p_c, x, R, left=np.nan, right=np.nan)
        x = np.insert(x, at, [p_c, p_c])
        curves = {label: np.insert(R, at, [inside, inside]),
                  "fitted p_c": np.insert(np.full(len(R), np.nan), at, [0.0, float(R.max())])}
    return SliderPoint(x=x, curves=curves, marks=marks, caption=prefix + badge(rec),
                       others=others, mark_labels=("peaks of the cascade",
                                                   "other local maxima"))


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


def synchronised_ratios(N: int) -> np.ndarray:
    """Spacing ratios ``d_g/d_{g+1}`` of the jumps of ``C_max`` when generations are synchronised
    (every merge of generation ``g`` before any of ``g + 1``, so ``C_max`` reaches ``2^g`` at the
    first merge of generation ``g``): ``d_g = (N 2^{1−g} − 1)/(N − 1)`` is that merge's distance
    to ``p_c = N/(N − 1)``, and the ratio is ``2 + 1/(n − 1)`` with ``n = N 2^{−g}`` the number of
    nodes of generation ``g``. ``(L − 1,)`` values for ``g = 1 … L − 1``, ``N = 2^L``."""
    L = int(round(np.log2(N)))
    g = np.arange(1, L)
    n = N / 2.0**g
    return (2 * n - 1) / (n - 1)


def grid_summary(rows: list[dict], alpha: float = 0.05) -> tuple[str, np.ndarray]:
    """``(line, rejected)`` for the :func:`judged` records of a grid of settings: how many were
    tested, how many have ``p ≤ alpha`` each, how many survive :func:`holm` over the grid and
    are cascades, and how many the seed's surrogate test passes (``rejected``: Holm's, per row).
    """
    p = np.array([r["p_value"] for r in rows], dtype=float)
    rejected = holm(np.where(np.isfinite(p), p, 1.0), alpha)
    found = sum(bool(k) and r["verdict"] == "cascade" for k, r in zip(rejected, rows,
                                                                       strict=True))
    seed_p = np.array([r["surrogate_p"] for r in rows], dtype=float)
    line = (f"{len(rows)} settings tested; p <= {alpha:g} in {int(np.sum(p <= alpha))}, "
            f"{int(rejected.sum())} after Holm's correction over the {len(rows)}, of which "
            f"{found} with a cascade's persistent peaks; the seed's surrogate test passes "
            f"{int(np.sum(seed_p <= alpha))} (uncorrected)")
    return line, rejected


def sgd_verdict(lr: float, batch_size: int, runs: int, *, width: int, n_runs: int,
                n_steps: int, record_every: int, seed: int = 0, device: str = "cpu",
                **judge_kw) -> dict:
    """:func:`judged` on the first ``runs`` runs of the SGD ensemble of
    :func:`~flowlaws.percolation.dynamics.sgd.sgd_order_parameter` against the step, both
    cached on disk (the ensemble under the key ``sgd_order_parameter``, once for every
    ``runs``); the record adds ``lr``, ``B``, ``runs`` and ``C_end``, the mean final ``C_max``
    of the finite runs. ``judge_kw``: ``alpha``, ``n_null``, ``n_power``, ``n_boot``,
    ``n_surrogates``."""
    if not 2 <= runs <= n_runs:
        raise ValueError(f"runs must lie in [2, n_runs = {n_runs}] (the ensemble trained), "
                         f"got {runs}")
    params, C, x = _sgd_ensemble(lr, batch_size, width=width, n_runs=n_runs, n_steps=n_steps,
                                 record_every=record_every, seed=seed, device=device)
    C = C[:runs]
    rec = cached_call(judged, C, x, seed=seed, **judge_kw)
    kept = finite_runs(C)
    return rec | {"lr": lr, "B": batch_size, "runs": runs,
                  "C_end": float(kept[:, -1].mean()) if len(kept) else float("nan")}


def _sgd_ensemble(lr: float, batch_size: int, *, width: int, n_runs: int, n_steps: int,
                  record_every: int, seed: int, device: str) -> tuple[dict, np.ndarray, np.ndarray]:
    """``(cache parameters, C (n_runs, T), steps (T,))`` of the cached SGD ensemble."""
    params = {"lr": lr, "width": width, "n_runs": n_runs, "batch_size": batch_size,
              "n_steps": n_steps, "record_every": record_every, "seed": seed}
    out = cached_call(sgd_order_parameter, device=device, **params)
    return params, np.asarray(out["C"], dtype=float), np.asarray(out["steps"], dtype=float)


def sgd_power_size(lr: float, batch_size: int, *, width: int, n_runs: int, n_steps: int,
                   record_every: int, seed: int = 0, device: str = "cpu",
                   sizes: tuple[int, ...] = (64, 128, 256), alpha: float = 0.05,
                   n_null: int = 99, n_power: int = 20, n_boot: int = 100) -> dict:
    """Like :func:`model_power_size` for the SGD ensemble of :func:`sgd_verdict` (cached): the
    fewest runs at which the injection power at λ = 2 reaches 0.8, its finite runs resampled
    to each size (an approximation: ``"resampled": True``)."""
    params, C, x = _sgd_ensemble(lr, batch_size, width=width, n_runs=n_runs, n_steps=n_steps,
                                 record_every=record_every, seed=seed, device=device)
    sizes = tuple(int(n) for n in sizes)
    kw = {"alpha": alpha, "n_null": n_null, "n_power": n_power, "n_boot": n_boot}

    def search() -> dict:
        r = runs_for_power(C, x, sizes=sizes, seed=seed, **kw)
        return {"n_runs": r.n_runs, "sizes": r.sizes, "powers": r.powers, "target": r.target,
                "resampled": True}

    return cached_call(search)



LAM_TOL = 0.15  # "λ ≈ 2": within 15 % (issue 12's criterion for a recovered planted λ)


def lambda_claim(rec: dict, lam: float = 2.0) -> str:
    """The claims ledger's verdict on "this ensemble shows a DSI cascade with λ ≈ ``lam``" for a
    :func:`judged` record: ``"holds"`` for a cascade whose λ̂ is within ``LAM_TOL`` of ``lam``;
    ``"fails"`` for "no cascade" (power ≥ 0.8) or a cascade whose λ̂ is farther;
    ``"inconclusive at this size"`` otherwise (including a cascade without a fitted λ)."""
    if rec["verdict"] == "no cascade":
        return "fails"
    if rec["verdict"] == "cascade" and np.isfinite(rec["lam"]):
        return "holds" if abs(rec["lam"] - lam) <= LAM_TOL * lam else "fails"
    return "inconclusive at this size"


def grid_claim(rows: list[dict], rejected: np.ndarray) -> str:
    """The ledger's verdict on "these ensembles show a DSI cascade" over a grid of settings
    (:func:`grid_summary`'s ``rejected``): ``"holds"`` when some setting is a cascade after
    Holm's correction, ``"fails"`` when every setting is "no cascade", ``"inconclusive at this
    size"`` otherwise."""
    if any(bool(k) and r["verdict"] == "cascade" for k, r in zip(rejected, rows, strict=True)):
        return "holds"
    return "fails" if all(r["verdict"] == "no cascade" for r in rows) else (
        "inconclusive at this size")


def claim_numbers(rec: dict, *, with_claimed_lam: bool = False) -> str:
    """The deciding numbers of a :func:`judged` record, in one short line for the ledger
    (``with_claimed_lam``: the power says at which λ it was measured)."""
    fit = (f"λ = {rec['lam']:.2f} ± {rec['lam_err']:.2f}, " if np.isfinite(rec["lam"]) else "")
    power = f"power {rec['power']:.2f}" if np.isfinite(rec["power"]) else "power not measured"
    if with_claimed_lam and np.isfinite(rec["power"]):
        power += f" at λ = {rec['lam_claimed']:g}"
    return (f"{rec['verdict']}: {fit}p = {rec['p_value']:.3f}, {power}, {rec['n_runs']} runs × "
            f"{rec['n_points']:,} points")
