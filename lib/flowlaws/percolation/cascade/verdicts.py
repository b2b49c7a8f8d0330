"""A cascade verdict in words: the printed line, the seed's test beside it, and the claims
ledger's texts, among them λ judged against a claimed value by its interval
(:func:`lambda_claim`, margin :data:`~flowlaws.percolation.cascade.config.LAM_MARGIN`).

:func:`ensemble_verdict` judges a trained ensemble (the chapters on Adam and on real data) and
puts the seed's phase-randomised test (:func:`seed_test`) beside the verdict, as an
:class:`EnsembleVerdict`.

Explained in: book/02_percolation/08_real_data.ipynb.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from flowlaws.book.cache import stored_type
from flowlaws.percolation.cascade.config import READER, CascadeConfig
from flowlaws.percolation.cascade.judge import CascadeVerdict, judge_cascade
from flowlaws.percolation.cascade.power import PROJECTED
from flowlaws.percolation.cascade.stats import grid_summary
from flowlaws.percolation.cascade.surrogates import surrogate_test
from flowlaws.percolation.cascade.variance import finite_runs, relative_variance

__all__ = [
    "INCONCLUSIVE", "UNDECIDABLE", "lambda_claim", "grid_claim", "decision_tally",
    "claim_numbers", "detectable_text",
    "verdict_line",
    "SeedTest", "seed_test", "EnsembleVerdict", "ensemble_verdict", "verdict_lines",
    "family_line", "ledger_texts", "CACHEABLE",
]


INCONCLUSIVE = "inconclusive at this size"  # the claims ledger's word (flowlaws.book.ledger)
UNDECIDABLE = "undecidable by this test"  # ledger: the power curve is flat, no size decides


def _undecidable(v: CascadeVerdict) -> bool:
    """An inconclusive verdict whose power curve over growing ensembles is flat
    (:func:`~flowlaws.percolation.cascade.power.decision_size`)."""
    return v.verdict == "inconclusive" and v.decision.startswith(UNDECIDABLE)


def lambda_claim(v: CascadeVerdict, lam: float | None = None) -> str:
    """The ledger's verdict on "a DSI cascade with λ ≈ ``lam``" (default the verdict's
    ``config.lam_claimed``), with the margin ``m = config.lam_margin`` declared in
    :mod:`~flowlaws.percolation.cascade.config`: ``"holds"`` for a cascade whose λ̂ 95 %
    interval lies inside ``lam·(1 ± m)``; ``"fails"`` for "no cascade", or a cascade whose
    interval misses ``lam·(1 ± m)`` entirely; :data:`INCONCLUSIVE` otherwise (the interval
    straddles the band's edge, or the verdict is inconclusive); :data:`UNDECIDABLE` for an
    inconclusive verdict whose power does not grow with the runs."""
    lam = v.config.lam_claimed if lam is None else float(lam)
    lo, hi = lam * (1 - v.config.lam_margin), lam * (1 + v.config.lam_margin)
    if v.verdict == "no cascade":
        return "fails"
    if _undecidable(v):
        return UNDECIDABLE
    if v.verdict != "cascade" or not np.isfinite(v.lam_low):
        return INCONCLUSIVE
    if lo <= v.lam_low and v.lam_high <= hi:
        return "holds"
    if v.lam_high < lo or v.lam_low > hi:
        return "fails"
    return INCONCLUSIVE


def _decision(row) -> str:
    """A row's ``decision`` text (empty when the row has none)."""
    try:
        return row["decision"] or ""
    except KeyError:
        return ""


def grid_claim(rows: Sequence, rejected: np.ndarray) -> str:
    """The ledger's verdict on "these ensembles show a DSI cascade" over a grid of settings
    (:func:`~flowlaws.percolation.cascade.stats.grid_summary`'s ``rejected``): ``"holds"``
    when some setting is a cascade after Holm's correction, ``"fails"`` when every setting is
    "no cascade", :data:`UNDECIDABLE` when every setting is "no cascade" or undecidable (its
    power curve flat) and some is undecidable, ``"inconclusive at this size"`` otherwise."""
    if any(bool(k) and r["verdict"] == "cascade" for k, r in zip(rejected, rows, strict=True)):
        return "holds"
    if all(r["verdict"] == "no cascade" for r in rows):
        return "fails"
    flat = [r["verdict"] == "inconclusive" and str(_decision(r)).startswith(UNDECIDABLE)
            for r in rows]
    if any(flat) and all(f or r["verdict"] == "no cascade" for f, r in zip(flat, rows,
                                                                            strict=True)):
        return UNDECIDABLE
    return INCONCLUSIVE


def decision_tally(rows: Sequence) -> str:
    """What would decide the inconclusive rows of a grid, counted by kind: ``"19 undecidable
    by this test, 4 not decided up to 512 resampled runs (projected to decide at about 2,100 to
    9,800 runs), 1 decides at 256 runs"`` (the head of each row's ``decision``,
    :func:`~flowlaws.percolation.cascade.power.decision_size`'s text without its power curve,
    with the range of the sizes projected for that kind), most frequent first; empty when no
    inconclusive row has a decision."""
    decisions = [_decision(r) for r in rows if r["verdict"] == "inconclusive" and _decision(r)]
    heads = Counter(_head(d) for d in decisions)
    projected: dict[str, list[int]] = {}
    for d in decisions:
        if PROJECTED in d:
            size = d.split(PROJECTED, 1)[1].split(" runs", 1)[0]
            projected.setdefault(_head(d), []).append(int(size.replace(",", "")))
    parts = []
    for head, n in heads.most_common():
        sizes = sorted(projected.get(head, []))
        span = (f"{sizes[0]:,}" if sizes and sizes[0] == sizes[-1]
                else f"{sizes[0]:,} to {sizes[-1]:,}" if sizes else "")
        some = f"{len(sizes)} " if len(sizes) < n else ""
        parts.append(f"{n} {head}" + (f" ({some}{PROJECTED} {span} runs)" if span else ""))
    return ", ".join(parts)


def _head(decision: str) -> str:
    """The kind of a decision text: "undecidable by this test", "decides at 256 runs", "not
    decided up to 512 resampled runs"."""
    return UNDECIDABLE if decision.startswith(UNDECIDABLE) else decision.split(" (")[0]


def claim_numbers(v: CascadeVerdict, *, with_claimed_lam: bool = False) -> str:
    """The deciding numbers of a verdict, in one short line for the ledger: verdict, λ̂ with
    its 95 % interval, p-value, power with its interval, size, and what decides an
    inconclusive verdict."""
    fit = (f"λ = {v.lam:.2f} [{v.lam_low:.2f}, {v.lam_high:.2f}], " if np.isfinite(v.lam)
           and v.verdict == "cascade" else "")
    power = (f"power {v.power:.2f} [{v.power_low:.2f}, {v.power_high:.2f}]"
             if np.isfinite(v.power) else "power not measured")
    if with_claimed_lam and np.isfinite(v.power):
        power += f" at λ = {v.lam_claimed:g}"
    why = f" ({v.reason})" if v.verdict == "inconclusive" and v.reason else ""
    line = (f"{v.verdict}{why}: {fit}p = {v.p_value:.3f}, {power}, {v.n_runs} runs × "
            f"{v.n_points:,} points")
    return line + (f"; {v.decision}" if v.decision else "")


def detectable_text(v: CascadeVerdict) -> str:
    """What an inconclusive verdict could have seen: the smallest injected jump at which the
    power's lower bound reaches 0.8 (``config.jump_ladder``), or the largest tried when none
    did; empty when not searched."""
    if not np.isfinite(v.detectable) and not np.isinf(v.detectable):
        return ""
    tried = ", ".join(f"{k:g}×: {pw:.2f}" for k, pw in v.ladder)
    what = (f"power < 0.8 for every injected jump up to {max(k for k, _ in v.ladder):g} × "
            f"the median jump {v.jump:.3g}" if np.isinf(v.detectable) else
            f"detectable jump (power ≥ 0.8): {v.detectable:.3g} = {v.detectable / v.jump:g} × "
            f"the median jump {v.jump:.3g}")
    return f"{what} ({v.config.n_power} injections each; power by multiple: {tried})"


def verdict_line(label: str, v: CascadeVerdict) -> str:
    """``label: verdict (reason), p-value, power, λ, size``; an inconclusive verdict adds what
    decides it (the ensemble size or grid, or "undecidable by this test" and why)."""
    why = f" ({v.reason})" if v.verdict != "cascade" and v.reason else ""
    line = (f"{label}: {v.verdict}{why}, p = {v.p_value:.3f} ({v.n_null} deals), "
            f"{v.power_text()}, {v.lam_text()}; {v.n_runs} runs, {v.n_points} points")
    if detectable_text(v):
        line += f"\n    {detectable_text(v)}"
    if v.verdict == "inconclusive":
        line += f"\n    {v.decision or 'no size search (config.sizes empty)'}"
    return line


@stored_type
@dataclass(frozen=True)
class SeedTest:
    """The seed-style test of ``R``: ``seed_p`` (phase-randomised surrogates' rank p-value),
    ``raw_rate`` (fraction of surrogates on which the raw detector reports a cascade),
    ``n_surrogates``, ``raw_found``, ``raw_lam ± raw_lam_err``, ``raw_peaks``, ``seed_score``
    and ``seed_scores`` (in units of the noise scale of ``R``)."""

    seed_p: float
    raw_rate: float
    n_surrogates: int
    raw_found: bool
    raw_lam: float
    raw_lam_err: float
    raw_peaks: tuple[float, ...]
    seed_score: float
    seed_scores: np.ndarray


def seed_test(C: np.ndarray, x: np.ndarray, *, n_surrogates: int, alpha: float = 0.05,
              seed: int = 0) -> SeedTest:
    """The seed-style test of ``R = Var(C)/⟨C⟩²`` over the finite runs of ``C``
    ``(n_runs, n_points)``: :func:`flowlaws.percolation.cascade.surrogates.surrogate_test` with
    ``n_surrogates`` phase-randomised surrogates."""
    R = relative_variance(finite_runs(np.asarray(C, dtype=float)))
    t = surrogate_test(R, np.asarray(x, dtype=float), n_surrogates=n_surrogates, alpha=alpha,
                       seed=seed)
    c = t.cascade
    est = c.estimate if c.found and c.estimate is not None else None
    return SeedTest(float(t.p_value), float(t.detection_rate), int(n_surrogates), bool(c.found),
                    float(est.lam) if est else float("nan"),
                    float(est.lam_err) if est else float("nan"),
                    tuple(float(q) for q in c.peaks.p) if c.found else (), float(t.score),
                    np.asarray(t.scores, dtype=float))


@stored_type
@dataclass(frozen=True)
class EnsembleVerdict:
    """A trained ensemble's ``cascade`` verdict and the seed's test (``seed``) beside it;
    ``v["key"]`` reads the seed test's fields, then the verdict's."""

    cascade: CascadeVerdict
    seed: SeedTest

    def __getitem__(self, key: str):
        if key == "surrogate_p":
            return self.seed.seed_p
        if hasattr(self.seed, key):
            return getattr(self.seed, key)
        return self.cascade[key]


def ensemble_verdict(C: np.ndarray, x: np.ndarray, config: CascadeConfig = READER, *,
                     n_surrogates: int = 500,
                     source: Callable[[int, int], np.ndarray] | None = None) -> EnsembleVerdict:
    """The verdict on ``C`` ``(n_runs, n_points)`` over the control ``x`` ``(n_points,)``
    (:func:`judge_cascade`; ``source(n_runs, seed) -> C``: fresh runs for the size search,
    else the observed runs resampled) with the seed's test beside it (``n_surrogates``)."""
    v = judge_cascade(C, x, config, source=source)
    return EnsembleVerdict(v, seed_test(C, x, n_surrogates=n_surrogates, alpha=config.alpha,
                                        seed=config.seed))


def verdict_lines(label: str, ev: EnsembleVerdict) -> str:
    """:func:`verdict_line` and a line with the seed's test."""
    s = ev.seed
    raw = (f"λ = {s.raw_lam:.2f} ± {s.raw_lam_err:.2f} from {len(s.raw_peaks)} peaks"
           if s.raw_found else "none")
    return (verdict_line(label, ev.cascade)
            + f"\n    the seed's test of R: surrogate p = {s.seed_p:.3f} "
            f"({s.n_surrogates} phase-randomised surrogates); raw detector's cascade on R: "
            f"{raw}; it fires on {s.raw_rate:.2f} of the surrogates")


def family_line(records: Mapping[str, EnsembleVerdict | CascadeVerdict], alpha: float = 0.05
                ) -> tuple[str, dict[str, bool]]:
    """``(line, rejected)``: how many settings were tested, how many have ``p ≤ alpha``, how many
    survive Holm's correction over all of them and are cascades; ``rejected`` maps each label
    to Holm's decision."""
    line, rejected = grid_summary(list(records.values()), alpha)
    return line, {k: bool(r) for k, r in zip(records, rejected, strict=True)}


def ledger_texts(v: EnsembleVerdict | CascadeVerdict, rejected: bool | None = None
                 ) -> tuple[str, str]:
    """The ledger's ``(verdict, number)`` for the claim "a cascade with λ ≈ the claimed λ":
    :func:`lambda_claim`, after Holm's correction when ``rejected`` is given (a cascade whose
    p-value does not survive it is inconclusive); the number is :func:`claim_numbers`."""
    v = v.cascade if isinstance(v, EnsembleVerdict) else v
    if v.verdict == "cascade" and rejected is False:
        return INCONCLUSIVE, (claim_numbers(v, with_claimed_lam=True)
                                + "; its p-value does not survive Holm's correction")
    return lambda_claim(v), claim_numbers(v, with_claimed_lam=True)


CACHEABLE = (SeedTest, EnsembleVerdict)
