"""Reading a grokking ensemble: its delay, runs aligned by their own grokking step, the verdicts.

**Delay.** A run's *memorisation step* is the first recorded step at which its train accuracy
reaches ``mem_threshold`` and its *grokking step* the first at which its test accuracy reaches
``grok_threshold`` (:func:`flowlaws.percolation.grokking.training.first_step_above`); the *delay
ratio*
is grokking step over memorisation step. :func:`delay_summary` gathers them with the test
accuracy at memorisation.

**Alignment.** Runs grok at different steps, and the spread of those steps alone makes variance
(runs that grokked earlier have moved on). :func:`align_to_grok` reads each run's order parameter
at ``t − t_grok`` of that run, on lags common to every run that grokked.

**Verdicts.** :func:`judge_series` judges every order parameter × alignment with the book's one
cascade test (:func:`flowlaws.percolation.cascade.judge.judge_cascade`, one
:class:`~flowlaws.percolation.cascade.config.CascadeConfig`), corrects the p-values for the number
of tests with Holm's method; an inconclusive verdict names the number of runs that decides it
(its ``decides_at``, measured by injection into the observed runs resampled: an approximation)
or says that this test cannot decide it.

Explained in: book/02_percolation/07_grokking.ipynb
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from flowlaws.book.cache import stored_type
from flowlaws.book.progress import track
from flowlaws.percolation.cascade.config import READER, CascadeConfig
from flowlaws.percolation.cascade.judge import judge_cascade
from flowlaws.percolation.cascade.statistic import MIN_GAP
from flowlaws.percolation.cascade.stats import holm
from flowlaws.percolation.grokking.training import first_step_above

__all__ = ["Delay", "delay_summary", "align_to_grok", "judge_series"]


@stored_type
@dataclass
class Delay:
    """``memorised``, ``grokked``, ``ratio`` and ``test_at_memorised`` ``(R,)`` (NaN where a run
    never reached the threshold); ``n_runs``, ``n_grokked``; thresholds as given."""

    memorised: np.ndarray
    grokked: np.ndarray
    ratio: np.ndarray
    test_at_memorised: np.ndarray
    n_runs: int
    n_grokked: int
    mem_threshold: float
    grok_threshold: float

    def line(self) -> str:
        """One line: medians and ranges of the steps and of the ratio."""
        def rng(a: np.ndarray, fmt: str) -> str:
            a = a[np.isfinite(a)]
            return (f"median {np.median(a):{fmt}} (range {a.min():{fmt}}–{a.max():{fmt}})"
                    if len(a) else "none")
        return (f"memorisation step {rng(self.memorised, '.0f')}; grokking step "
                f"{rng(self.grokked, '.0f')} ({self.n_grokked} of {self.n_runs} runs); delay "
                f"ratio {rng(self.ratio, '.1f')}; test accuracy at memorisation "
                f"{rng(self.test_at_memorised, '.3f')}")

    def verdicts(self, modulus: int, *, share: float = 0.9, factor: float = 5.0,
                 chance: float = 3.0) -> tuple[str, str]:
        """``(verdict, first_verdict)`` on "memorises long before it generalises", by the rules
        declared in ``flowlaws.book.rules`` (``grokking_delayed``).

        Declared rule: "fails" when the median test accuracy at memorisation is not below
        ``chance / modulus`` or some run generalised less than ``factor`` times later than it
        memorised; "holds" when at least ``share`` of the runs generalised; else "inconclusive at
        this size" (a run that has not generalised by the last step is censored: its delay can
        only be longer). First rule (before the censoring was written, after the stored runs had
        shown runs that did not generalise): "holds" when at least ``share`` of the runs
        generalised, the median ratio is at least ``factor`` and accuracy is near chance, else
        "fails".
        """
        if modulus < 2:
            raise ValueError(f"modulus must be at least 2, got {modulus}")
        near_chance = bool(np.nanmedian(self.test_at_memorised) < chance / modulus)
        late = self.ratio[np.isfinite(self.ratio)]
        decided = self.n_grokked >= share * self.n_runs
        if not near_chance or bool((late < factor).any()):
            verdict = "fails"
        else:
            verdict = "holds" if decided else "inconclusive at this size"
        median = float(np.median(late)) if len(late) else float("nan")
        first = "holds" if decided and median >= factor and near_chance else "fails"
        return verdict, first


def delay_summary(steps: np.ndarray, train_acc: np.ndarray, test_acc: np.ndarray, *,
                  mem_threshold: float = 0.99, grok_threshold: float = 0.9) -> Delay:
    """The :class:`Delay` of the records ``train_acc``, ``test_acc`` ``(T, R)`` at ``steps``."""
    steps = np.asarray(steps)
    mem = first_step_above(steps, train_acc, mem_threshold)
    grok = first_step_above(steps, test_acc, grok_threshold)
    at_mem = np.array([np.asarray(test_acc)[steps == m, r][0] if np.isfinite(m) else np.nan
                       for r, m in enumerate(mem)])
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = grok / mem
    return Delay(mem, grok, ratio, at_mem, len(mem), int(np.isfinite(grok).sum()),
                 mem_threshold, grok_threshold)


def align_to_grok(steps: np.ndarray, C: np.ndarray, t_grok: np.ndarray, *,
                  before: float, after: float = 0.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(lags, aligned, kept)``: the order parameter ``C`` ``(T, R)`` (records at ``steps``
    ``(T,)``, evenly spaced) of every run that grokked and whose window lies inside the
    records, read at ``t_grok[r] + lag`` for the recorded lags ``−before ≤ lag ≤ after``;
    ``aligned`` ``(n_kept, n_lags)``, ``kept`` the runs' indices."""
    steps, C, t_grok = np.asarray(steps), np.asarray(C, dtype=float), np.asarray(t_grok)
    dt = steps[1] - steps[0]
    if not np.all(np.diff(steps) == dt):
        raise ValueError("the records must be evenly spaced")
    lags = np.arange(-np.floor(before / dt), np.floor(after / dt) + 1) * dt
    kept, rows = [], []
    for r, tg in enumerate(t_grok):
        if not np.isfinite(tg):
            continue
        idx = np.searchsorted(steps, tg + lags)
        if idx[0] < 0 or idx[-1] >= len(steps) or steps[idx[0]] != tg + lags[0]:
            continue
        kept.append(r)
        rows.append(C[idx, r])
    return lags, np.array(rows).reshape(len(rows), len(lags)), np.array(kept, dtype=int)


def judge_series(series: dict[str, tuple[np.ndarray, np.ndarray]],
                 config: CascadeConfig = READER, *,
                 p_c: dict[str, tuple[float, float]] | None = None) -> list[dict]:
    """Judge each ``name: (C (n_runs, n_points), x (n_points,))`` of ``series`` with ``config``
    (its ``lam_claimed``: 2.11 for the seed's claim), seed ``config.seed + k`` for the ``k``-th.

    ``p_c``: an independently measured critical point ``(value, error)`` per name (for an
    aligned series, the lag of the grokking step: 0), given to the test.

    Each row holds ``name``, ``verdict`` (the :class:`~flowlaws.percolation.cascade.judge.
    CascadeVerdict`, None for a constant series), its scalars (``p_value``, ``power``,
    ``power_low``, ``lam``, ``lam_err``, ``surrogate_p``, ``n_runs``, ``n_points``, ``reason``,
    ``decision``, ``runs_needed``: its ``decides_at``), ``holm`` (rejected after Holm's correction
    over the ``n_tests`` rows actually tested), ``final`` (a cascade whose p-value does not
    survive it is "inconclusive") and ``constant`` (nothing to judge: the order parameter never
    varies, fewer than 2 finite runs, or fewer points than the test needs). A progress bar
    counts the series (a full preset's judge takes minutes per series).
    """
    rows = []
    judged = track(series.items(), desc="judging the C_max series", total=len(series))
    for k, (name, (C, x)) in enumerate(judged):
        C = np.asarray(C, dtype=float)
        finite = C[np.isfinite(C).all(1)]
        why = ("the order parameter never varies (R ≡ 0)" if len(finite) >= 2
               and np.ptp(finite) == 0 else f"{len(finite)} finite run(s)" if len(finite) < 2
               else f"{C.shape[1]} points, fewer than the test's {8 * MIN_GAP}"
               if C.shape[1] < 8 * MIN_GAP else "")
        if why:
            nan = float("nan")
            rows.append({"name": name, "verdict": "inconclusive", "result": None,
                         "p_value": nan, "power": nan, "power_low": nan, "lam": nan,
                         "lam_err": nan, "surrogate_p": nan, "constant": True,
                         "n_runs": len(finite), "n_points": C.shape[1], "reason": why,
                         "decision": "", "runs_needed": None,
                         "summary": f"inconclusive: {why}"})
            continue
        given = (p_c or {}).get(name)
        v = judge_cascade(C, x, config.replace(seed=config.seed + k),
                          p_c=given[0] if given else None, p_c_err=given[1] if given else None)
        rows.append({"name": name, "verdict": v.verdict, "result": v, "p_value": v.p_value,
                     "power": v.power, "power_low": v.power_low, "lam": v.lam,
                     "lam_err": v.lam_err, "surrogate_p": v.surrogate_p, "constant": False,
                     "n_runs": v.n_runs, "n_points": v.n_points, "reason": v.reason,
                     "decision": v.decision, "runs_needed": v.decides_at,
                     "summary": v.summary()})
    run = [r for r in rows if not r["constant"]]  # Holm over the tests actually run
    p = np.array([r["p_value"] for r in run], dtype=float)
    rejected = holm(np.where(np.isfinite(p), p, 1.0), config.alpha) if run else []
    for r in rows:
        r["holm"], r["n_tests"] = False, len(run)
    for r, rej in zip(run, rejected, strict=True):
        r["holm"] = bool(rej)
    for r in rows:  # a cascade counts only when its p-value survives the correction
        r["final"] = ("inconclusive" if r["verdict"] == "cascade" and not r["holm"]
                      else r["verdict"])
    return rows
