"""The cascade test measured on ensembles with a known answer: its false-positive rate on
staircases without a cascade (:func:`null_calibration`) and its power and λ̂ on planted λ = 2
cascades (:func:`planted_power`). The unit tests assert on these two functions at their sizes
(issue 12: a rejection rate within 0.02–0.08 with uniform p-values; power ≥ 0.8 and λ̂ within
15 % of 2); the DSI chapter prints them at its own, cached.

Explained in: book/02_percolation/05_dsi.ipynb.
"""
from __future__ import annotations

import numpy as np
from scipy import stats

from flowlaws.book.progress import track
from flowlaws.percolation.cascade.judge import judge_cascade
from flowlaws.percolation.cascade.statistic import N_TEETH, comb_grid, permutation_test
from flowlaws.percolation.toys.cascades import planted_ensemble, random_staircases

__all__ = ["CALIBRATION", "null_calibration", "planted_power"]

# (runs, grid points, timing of the jumps) of the staircases without a cascade
CALIBRATION = ((8, 256, "uniform"), (16, 1024, "clustered"), (32, 512, "late"),
               (64, 1024, "uniform"), (200, 128, "clustered"))


def null_calibration(settings: tuple = CALIBRATION, *, n_ensembles: int = 80, n_null: int = 19,
                     alpha: float = 0.05, seed: int = 12, progress: str | None = None) -> dict:
    """The permutation test's false-positive rate, measured: ``n_ensembles`` ensembles of
    :func:`~flowlaws.percolation.toys.cascades.random_staircases` (no cascade) at each of
    ``settings`` (runs, points, timing), each tested against ``n_null`` deals.

    Returns ``rows`` (per setting: ``runs``, ``points``, ``timing``, ``ensembles``,
    ``rejected`` with ``p ≤ alpha``, ``rate``) and, over all ensembles, ``rate``, ``rate_se``
    (its binomial standard error at the nominal α), ``binom_p`` (two-sided binomial test of
    the number rejected against α), ``chi2_p`` (χ² test that the ranks ``(n_null + 1)·p``,
    ``1 … n_null + 1``, are uniform: a valid p-value is uniform on them), ``n_ensembles``
    (total), ``n_null``. One generator runs through all settings in order."""
    rng = np.random.default_rng(seed)
    rows, ranks = [], []
    for M, n, timing in track(settings, desc=progress, enabled=progress is not None):
        grid = comb_grid(np.linspace(0, 1, n))
        ps = np.array([permutation_test(random_staircases(M, n, rng, timing)[0], grid, n_null,
                                        rng)[0] for _ in range(n_ensembles)])
        rows.append({"runs": M, "points": n, "timing": timing, "ensembles": n_ensembles,
                     "rejected": int(np.sum(ps <= alpha)), "rate": float(np.mean(ps <= alpha))})
        ranks.append(np.round(ps * (n_null + 1)).astype(int))
    ranks = np.concatenate(ranks)
    counts = np.bincount(ranks, minlength=n_null + 2)[1:]
    k, total = int(sum(r["rejected"] for r in rows)), len(ranks)
    return {"rows": rows, "rate": k / total, "rate_se": float(np.sqrt(alpha * (1 - alpha) / total)),
            "binom_p": float(stats.binomtest(k, total, alpha).pvalue),
            "chi2_p": float(stats.chisquare(counts).pvalue), "n_ensembles": total,
            "n_null": n_null, "alpha": alpha}


def planted_power(n_trials: int = 16, *, n_runs: int = 64, n_points: int = 1024,
                  lam: float = 2.0, n_levels: int = N_TEETH, jitter: float = 0.1,
                  n_null: int = 39, n_boot: int = 100, alpha: float = 0.05, seed: int = 0,
                  progress: str | None = None) -> dict:
    """The test's power and λ̂ on planted cascades: ``n_trials`` ensembles of
    :func:`~flowlaws.percolation.toys.cascades.planted_ensemble` (``n_runs`` runs,
    ``n_levels`` levels at ``lam`` from ``p = 0.4`` toward ``p_c = 0.8`` on ``n_points`` points
    of ``[0, 1]``, each run's level shifted by ``jitter`` × its distance to ``p_c``, i.e.
    ``jitter·λ/(λ − 1)`` of the spacing to the next level; ensemble seeds ``seed + 100 + s``),
    each judged by :func:`judge_cascade` (``n_null`` deals, seed ``seed + s``, no power).

    Returns ``power`` (the fraction judged "cascade"), ``lams`` (λ̂ of each, NaN without a
    fit), ``lam_median``, ``within_15`` (the fraction of λ̂ within 15 % of ``lam``),
    ``n_trials`` and the sizes."""
    p = np.linspace(0, 1, n_points)
    found, lams = [], []
    for s in track(range(n_trials), desc=progress, enabled=progress is not None):
        C = planted_ensemble(p, n_runs, p_c=0.8, lam=lam, first=0.4, n_levels=n_levels,
                             jitter=jitter, noise=0.0, seed=seed + 100 + s)
        v = judge_cascade(C, p, alpha=alpha, n_null=n_null, n_power=0, n_boot=n_boot,
                          seed=seed + s)
        found.append(v.verdict == "cascade")
        lams.append(float(v.lam))
    lams_a = np.array(lams)
    return {"power": float(np.mean(found)), "lams": lams,
            "lam_median": float(np.nanmedian(lams_a)) if np.isfinite(lams_a).any() else np.nan,
            "within_15": float(np.mean(np.abs(lams_a - lam) <= 0.15 * lam)),
            "n_trials": n_trials, "n_runs": n_runs, "n_points": n_points, "lam": lam,
            "n_levels": n_levels, "jitter": jitter, "n_null": n_null, "alpha": alpha}
