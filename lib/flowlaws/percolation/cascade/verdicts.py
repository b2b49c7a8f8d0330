"""A trained ensemble's cascade verdict, as the chapters on Adam and on real data state it.

:func:`ensemble_verdict` judges the order parameter ``C`` ``(n_runs, n_points)`` of an ensemble
with :func:`flowlaws.percolation.cascade.judge.judge_cascade` (through
:func:`flowlaws.percolation.cascade.controls.judged`, power at the seed's claimed λ), puts the
seed's test beside it (:func:`seed_test`: the phase-randomised surrogate p-value of ``R`` and
how often the raw detector :func:`flowlaws.percolation.cascade.variance.detect_cascade` fires on
those
surrogates) and, when the verdict is inconclusive with a measured power, the number of runs at
which the power reaches 0.8, measured by injection
(:func:`flowlaws.percolation.cascade.judge.runs_for_power`) into fresh runs (given a
``source``) or into the observed runs resampled. :func:`verdict_lines` prints all of it,
:func:`family_line` states how many settings were tested with Holm's correction over them, and
:func:`ledger_texts` gives the claims ledger's two strings, computed from the record.

Records are plain dicts, so :func:`flowlaws.book.cache.calls.cached_call` can keep them.

Explained in: book/02_percolation/08_real_data.ipynb.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from flowlaws.percolation.cascade.controls import (
    claim_numbers,
    grid_summary,
    judged,
    lambda_claim,
    verdict_line,
)
from flowlaws.percolation.cascade.judge import runs_for_power
from flowlaws.percolation.cascade.surrogates import surrogate_test
from flowlaws.percolation.cascade.variance import finite_runs, relative_variance

__all__ = [
    "seed_test",
    "ensemble_verdict",
    "size_text",
    "verdict_lines",
    "family_line",
    "ledger_texts",
]

def seed_test(C: np.ndarray, x: np.ndarray, *, n_surrogates: int, alpha: float = 0.05,
              seed: int = 0) -> dict:
    """The seed-style test of ``R = Var(C)/⟨C⟩²`` over the finite runs of ``C``
    ``(n_runs, n_points)``: :func:`flowlaws.percolation.cascade.surrogates.surrogate_test` with
    ``n_surrogates`` phase-randomised surrogates.

    Keys: ``seed_p`` (rank p-value), ``raw_rate`` (fraction of surrogates on which the raw
    detector reports a cascade), ``n_surrogates``, ``raw_found`` (whether it reports one on
    ``R``), ``raw_lam`` and ``raw_lam_err`` (its λ, NaN if none), ``raw_peaks`` (its peaks),
    ``seed_score`` and ``seed_scores`` (the observed score and the surrogates', in units of the
    noise scale of ``R``).
    """
    R = relative_variance(finite_runs(np.asarray(C, dtype=float)))
    t = surrogate_test(R, np.asarray(x, dtype=float), n_surrogates=n_surrogates, alpha=alpha,
                       seed=seed)
    c = t.cascade
    est = c.estimate if c.found and c.estimate is not None else None
    return {"seed_p": float(t.p_value), "raw_rate": float(t.detection_rate),
            "n_surrogates": int(n_surrogates), "raw_found": bool(c.found),
            "raw_lam": float(est.lam) if est else float("nan"),
            "raw_lam_err": float(est.lam_err) if est else float("nan"),
            "raw_peaks": [float(v) for v in c.peaks.p] if c.found else [],
            "seed_score": float(t.score), "seed_scores": [float(v) for v in t.scores]}


def ensemble_verdict(C: np.ndarray, x: np.ndarray, *, lam: float, alpha: float = 0.05,
                     seed: int = 0, n_null: int = 99, n_power: int = 20, n_boot: int = 100,
                     n_surrogates: int = 500, power_sizes: tuple[int, ...] = (),
                     source: Callable[[int, int], np.ndarray] | None = None) -> dict:
    """The verdict on ``C`` ``(n_runs, n_points)`` over the control ``x`` ``(n_points,)``.

    The :func:`flowlaws.percolation.cascade.controls.judged` record (power at ``lam``), plus
    :func:`seed_test` (``surrogate_p`` is its ``seed_p``), plus ``size``: when the verdict is
    inconclusive, its power was measured and ``power_sizes`` are given, the
    :func:`~flowlaws.percolation.cascade.judge.runs_for_power` search over them
    (``{"n_runs", "sizes", "powers", "target", "resampled"}``; ``n_runs`` None when no size
    reached 0.8), in fresh runs ``source(n_runs, seed) -> C`` if given, else in the observed
    finite runs resampled with replacement (``"resampled": True``); otherwise None.
    """
    rec = judged(C, x, alpha=alpha, seed=seed, lam=lam, n_null=n_null, n_power=n_power,
                 n_boot=n_boot)
    rec |= seed_test(C, x, n_surrogates=n_surrogates, alpha=alpha, seed=seed)
    rec["surrogate_p"] = rec["seed_p"]
    rec["size"] = None
    if rec["verdict"] == "inconclusive" and np.isfinite(rec["power"]) and power_sizes:
        r = runs_for_power(source if source is not None else finite_runs(C),
                           np.asarray(x, dtype=float), sizes=tuple(int(n) for n in power_sizes),
                           seed=seed, lam=lam, alpha=alpha, n_null=n_null, n_power=n_power,
                           n_boot=n_boot)
        rec["size"] = {"n_runs": r.n_runs, "sizes": r.sizes, "powers": r.powers,
                       "target": r.target, "resampled": source is None}
    return rec


def size_text(rec: dict) -> str:
    """Where the power reaches 0.8 (:func:`ensemble_verdict`'s ``size``), in one phrase."""
    size = rec.get("size")
    if size is None:
        return "no size search" if rec["verdict"] == "inconclusive" else ""
    how = "resampled" if size["resampled"] else "fresh"
    if size["n_runs"] is not None:
        return f"power reaches {size['target']:g} at {size['n_runs']} {how} runs"
    return (f"power below {size['target']:g} up to {max(size['sizes'])} {how} runs "
            f"({size['powers'][-1]:.2f} there)")


def verdict_lines(label: str, rec: dict) -> str:
    """:func:`flowlaws.percolation.cascade.controls.verdict_line` (verdict, p-value, power, λ,
    size, the runs at which the power reaches 0.8) and a line with the seed's test."""
    raw = (f"λ = {rec['raw_lam']:.2f} ± {rec['raw_lam_err']:.2f} from "
           f"{len(rec['raw_peaks'])} peaks" if rec["raw_found"] else "none")
    return (verdict_line(label, rec, rec.get("size"))
            + f"\n    the seed's test of R: surrogate p = {rec['seed_p']:.3f} "
            f"({rec['n_surrogates']} phase-randomised surrogates); raw detector's cascade on R: "
            f"{raw}; it fires on {rec['raw_rate']:.2f} of the surrogates")


def family_line(records: dict[str, dict], alpha: float = 0.05) -> tuple[str, dict[str, bool]]:
    """``(line, rejected)``: how many settings were tested, how many have ``p ≤ alpha``, how many
    survive Holm's correction over all of them and are cascades
    (:func:`flowlaws.percolation.cascade.controls.grid_summary`); ``rejected`` maps each label
    to Holm's decision."""
    line, rejected = grid_summary(list(records.values()), alpha)
    return line, {k: bool(r) for k, r in zip(records, rejected, strict=True)}


def ledger_texts(rec: dict, rejected: bool | None = None) -> tuple[str, str]:
    """The ledger's ``(verdict, number)`` for the claim "a cascade with λ ≈ the claimed λ",
    decided by ``rec``: :func:`~flowlaws.percolation.cascade.controls.lambda_claim` at
    ``rec["lam_claimed"]``, after Holm's correction when ``rejected`` is given (a cascade whose
    p-value does not survive it is inconclusive); the number is
    :func:`~flowlaws.percolation.cascade.controls.claim_numbers` with the claimed λ, and the
    size at which the power would reach 0.8."""
    if rec["verdict"] == "cascade" and rejected is False:
        rec = rec | {"verdict": "inconclusive"}
    number = claim_numbers(rec, with_claimed_lam=True)
    extra = size_text(rec)
    return lambda_claim(rec, rec["lam_claimed"]), number + (f"; {extra}" if extra else "")
