"""The grokking cascade claim ("the relative variance peaks in a DSI cascade before the jump"):
the four series II.7 judges, the cascade test on each with Holm's correction over them, and the
claim's ledger row. One implementation for the chapter's reader run and its stored full preset
(:mod:`flowlaws.percolation.presets.grokking_cascade`).

The series are the largest-cluster order parameter ``C_max`` of the MLP neurons, by key
frequency and in weight space (the library's first tolerance), each read by raw training step
(up to the last run's grokking step, or the whole run when some run never grokked) and aligned
to each run's own grokking step (lag 0 is an independently measured critical point, given to the
test with an error of one grid step).

Explained in: book/02_percolation/07_grokking.ipynb.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from flowlaws.book.ledger import verdict_of_any
from flowlaws.book.rules.percolation import first_cascade_verdict
from flowlaws.percolation.cascade.config import CascadeConfig
from flowlaws.percolation.cascade.verdicts import decision_tally, lambda_claim
from flowlaws.percolation.grokking.analysis import align_to_grok, judge_series

__all__ = ["cascade_series", "judge_grokking_cascade", "CascadeClaim", "cascade_claim"]


def cascade_series(steps: np.ndarray, orders: Mapping[str, np.ndarray],
                   grokked: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """``name: (C (n_runs, n_points), x (n_points,))`` for each order parameter of ``orders``
    (``name: C`` of shape ``(records, runs)`` on the record steps ``steps``): ``"<name>, raw
    step"`` over the steps up to the last run's grokking step (all steps when some run never
    grokked, ``grokked`` NaN), and, when at least two runs grokked, ``"<name>, aligned"`` on the
    lags from each run's grokking step (:func:`~flowlaws.percolation.grokking.analysis.
    align_to_grok`)."""
    grokked = np.asarray(grokked, dtype=float)
    n_grokked = int(np.isfinite(grokked).sum())
    last_grok = np.nanmax(grokked) if n_grokked == len(grokked) else steps[-1]
    window = steps <= last_grok
    series = {}
    for name, C in orders.items():
        series[f"{name}, raw step"] = (C[window].T, steps[window].astype(float))
        if n_grokked >= 2:
            lags, aligned, _ = align_to_grok(steps, C, grokked, before=np.nanmin(grokked),
                                             after=steps[-1] - np.nanmax(grokked))
            series[f"{name}, aligned"] = (aligned, lags.astype(float))
    return series


def judge_grokking_cascade(series: Mapping[str, tuple[np.ndarray, np.ndarray]],
                           config: CascadeConfig, log_every: int) -> list[dict]:
    """:func:`~flowlaws.percolation.grokking.analysis.judge_series` over ``series`` with
    ``config``; each aligned series gets the grokking step as its critical point, lag 0 with an
    error of one record interval ``log_every`` (steps)."""
    p_c = {name: (0.0, float(log_every)) for name in series if name.endswith("aligned")}
    return judge_series(dict(series), config, p_c=p_c)


@dataclass(frozen=True)
class CascadeClaim:
    """The claim's ledger row and the numbers the chapter pastes: ``verdict``, ``number``,
    ``first_verdict`` (under the first rule), ``tested`` (the rows actually tested), ``best``
    (the smallest p-value's row, None when none), ``measured`` (the powers measured),
    ``counts`` (final verdicts by kind) and ``tally`` (what would decide them)."""

    verdict: str
    number: str
    first_verdict: str
    tested: list
    best: dict | None
    measured: list
    counts: dict
    tally: str


def cascade_claim(rows: Sequence[dict], *, lam_claimed: float, n_runs: int,
                  modulus: int) -> CascadeClaim:
    """The ``grokking_cascade`` row from ``rows`` (:func:`judge_grokking_cascade`): "holds"
    when some tested series shows a cascade whose λ interval lies within the declared margin of
    ``lam_claimed`` after Holm (:func:`~flowlaws.percolation.cascade.verdicts.lambda_claim`),
    by :func:`~flowlaws.book.ledger.verdict_of_any` over the series; its number gives the
    smallest p-value, the power at ``lam_claimed``, the size and what would decide the
    inconclusive series."""
    tested = [r for r in rows if not r["constant"]]
    verdict = verdict_of_any(lambda_claim(r["result"]) for r in tested)
    first = verdict_of_any(first_cascade_verdict(r["result"], rejected=r["holm"],
                                                 check_lam=False) for r in tested)
    measured = [r["power"] for r in tested if np.isfinite(r["power"])]
    best = min(tested, key=lambda r: r["p_value"]) if tested else None
    tally = decision_tally([r["result"] for r in tested])
    decides = f"; what would decide them: {tally}" if tally else ""
    if best and measured:
        number = (f"{len(tested)} tests (Holm): smallest p = {best['p_value']:.3f} "
                  f"({best['name']}); power at λ = {lam_claimed:g} at most {max(measured):.2f} "
                  f"({len(measured)} of {len(tested)} measurable); {n_runs} runs, up to "
                  f"{max(r['n_points'] for r in tested)} points, modulus {modulus}{decides}")
    else:
        number = (f"{len(tested)} tests, power not measurable; {n_runs} runs, modulus "
                  f"{modulus}{decides}")
    counts = {v: sum(r["final"] == v for r in tested) for v in ("cascade", "no cascade")}
    counts["inconclusive"] = len(tested) - sum(counts.values())
    return CascadeClaim(verdict=verdict, number=number, first_verdict=first, tested=tested,
                        best=best, measured=measured, counts=counts, tally=tally)
