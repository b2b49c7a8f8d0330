"""Verdict texts, λ against a claim, and a trained ensemble's verdict with the seed's test."""

from __future__ import annotations

import dataclasses

import numpy as np

from flowlaws.percolation.cascade.config import SMOKE
from flowlaws.percolation.cascade.judge import judge_cascade
from flowlaws.percolation.cascade.surrogates import surrogate_test
from flowlaws.percolation.cascade.variance import relative_variance
from flowlaws.percolation.cascade.verdicts import (
    INCONCLUSIVE,
    UNDECIDABLE,
    claim_numbers,
    decision_tally,
    ensemble_verdict,
    family_line,
    grid_claim,
    lambda_claim,
    ledger_texts,
    seed_test,
    verdict_line,
    verdict_lines,
)
from flowlaws.percolation.toys.cascades import planted_ensemble

CFG = SMOKE.replace(n_power=17, n_null=19, n_boot=20, sizes=())


def _staircases(n_runs: int, n_points: int, seed: int) -> np.ndarray:
    """Integer staircases with three jumps at independent uniform times: no cascade."""
    rng = np.random.default_rng(seed)
    at = rng.integers(1, n_points, size=(n_runs, 3))
    return 1.0 + (np.arange(n_points)[None, :, None] >= at[:, None, :]).sum(axis=2)


def _planted():
    p = np.linspace(0.0, 1.0, 512)
    C = planted_ensemble(p, 64, p_c=0.9, lam=2.0, first=0.2, n_levels=4, jitter=0.05,
                         noise=0.0, seed=1)
    return C, p


def test_lambda_against_a_claim_is_judged_by_its_interval_and_the_margin():
    v = judge_cascade(*_planted(), CFG)
    assert v.verdict == "cascade"
    with_lam = {"lam_low": 1.85, "lam_high": 1.95, "lam": 1.9}
    assert lambda_claim(dataclasses.replace(v, **with_lam), 2.0) == "holds"  # inside 1.8–2.2
    assert lambda_claim(dataclasses.replace(v, **with_lam), 1.71) == INCONCLUSIVE  # 1.88 edge
    # issue 24: λ̂ = 1.81 ± 0.04 is not "λ ≈ 2": its interval straddles the margin's edge
    straddle = {"lam": 1.81, "lam_low": 1.81 - 0.08, "lam_high": 1.81 + 0.08}
    assert lambda_claim(dataclasses.replace(v, **straddle), 2.0) == INCONCLUSIVE
    far = {"lam": 1.5, "lam_low": 1.45, "lam_high": 1.55}
    assert lambda_claim(dataclasses.replace(v, **far), 2.0) == "fails"
    assert lambda_claim(dataclasses.replace(v, verdict="no cascade"), 2.0) == "fails"
    assert lambda_claim(dataclasses.replace(v, verdict="inconclusive"), 2.0) == INCONCLUSIVE
    assert claim_numbers(v).startswith("cascade: λ = ")


def test_a_planted_cascade_holds_and_its_record_carries_both_tests():
    C, p = _planted()
    ev = ensemble_verdict(C, p, CFG, n_surrogates=9)
    assert ev["verdict"] == "cascade" and ev["p_value"] <= 0.05 and ev.cascade.decides_at is None
    assert abs(ev["lam"] - 2.0) < 0.2
    assert ledger_texts(ev)[0] in ("holds", INCONCLUSIVE)
    assert ledger_texts(ev, rejected=False)[0] == INCONCLUSIVE
    assert "surrogate p" in verdict_lines("planted", ev)
    assert ev["surrogate_p"] == ev.seed.seed_p


def test_seed_test_is_the_surrogate_test_of_R():
    p = np.linspace(0.0, 1.0, 200)
    C = _staircases(16, 200, 0)
    t = surrogate_test(relative_variance(C), p, n_surrogates=9, alpha=0.05, seed=3)
    rec = seed_test(C, p, n_surrogates=9, seed=3)
    assert rec.seed_p == t.p_value and rec.raw_rate == t.detection_rate
    assert rec.raw_found == t.cascade.found


def test_an_inconclusive_verdict_searches_sizes_in_fresh_runs_when_given():
    p = np.linspace(0.0, 1.0, 256)
    C = _staircases(8, 256, 0)
    asked = []

    def fresh(n: int, seed: int) -> np.ndarray:
        asked.append(n)
        return _staircases(n, 256, seed + 1)

    ev = ensemble_verdict(C, p, CFG.replace(sizes=(8, 16)), n_surrogates=9, source=fresh)
    v = ev.cascade
    if v.verdict == "inconclusive" and v.curve is not None:
        assert not v.curve.resampled and asked[0] == 8
        assert v.decision and v.decision in verdict_line("stairs", v)
    flat = ev.cascade.decision.startswith(UNDECIDABLE)
    assert ledger_texts(ev)[0] == UNDECIDABLE if flat else ledger_texts(ev)[0] in (
        "fails", INCONCLUSIVE)


def test_family_line_counts_the_settings_and_applies_holm():
    recs = {k: {"p_value": pv, "verdict": v, "surrogate_p": 0.5} for k, pv, v in
            (("a", 0.01, "cascade"), ("b", 0.03, "cascade"), ("c", 0.5, "inconclusive"))}
    line, rejected = family_line(recs, 0.05)
    assert line.startswith("3 settings tested")
    assert rejected == {"a": True, "b": False, "c": False}  # 0.03 > 0.05/2
    rows = list(recs.values())
    assert grid_claim(rows, np.array([True, False, False])) == "holds"
    assert grid_claim(rows, np.array([False, False, False])) == INCONCLUSIVE
    assert grid_claim([{"verdict": "no cascade"}] * 2, np.array([False, False])) == "fails"


def test_grid_claim_is_undecidable_only_when_no_setting_could_be_decided_otherwise():
    flat = {"verdict": "inconclusive", "decision": UNDECIDABLE + ": the power does not grow"}
    rising = {"verdict": "inconclusive", "decision": "decides at 512 runs"}
    none = {"verdict": "no cascade", "decision": ""}
    found = {"verdict": "cascade", "decision": ""}
    assert grid_claim([none, none], np.array([False, False])) == "fails"
    assert grid_claim([none, flat], np.array([False, False])) == UNDECIDABLE
    assert grid_claim([flat, rising], np.array([False, False])) == INCONCLUSIVE
    assert grid_claim([flat, found], np.array([False, True])) == "holds"
    assert grid_claim([flat, found], np.array([False, False])) == INCONCLUSIVE


def test_decision_tally_counts_what_would_decide_each_inconclusive_setting():
    flat = {"verdict": "inconclusive", "decision": UNDECIDABLE + ": the power does not grow "
                                                                  "(64: 0.50, 128: 0.40)"}
    rising = {"verdict": "inconclusive", "decision": "not decided up to 512 resampled runs "
                                                     "(power 64: 0.03, 512: 0.28, still rising)"}
    decides = {"verdict": "inconclusive", "decision": "decides at 128 runs (251 grid points)"}
    unsearched = {"verdict": "inconclusive", "decision": ""}
    found = {"verdict": "cascade", "decision": "decides at 64 runs (not read: a cascade)"}
    rows = [rising, flat, decides, flat, unsearched, found, flat, rising]
    assert decision_tally(rows) == (f"3 {UNDECIDABLE}, 2 not decided up to 512 resampled "
                                    "runs, 1 decides at 128 runs")
    assert decision_tally([found, unsearched]) == ""
