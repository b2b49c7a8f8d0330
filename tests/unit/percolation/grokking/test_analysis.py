"""Tests of flowlaws.percolation.grokking.analysis: delay, alignment by grokking step, verdict
rows."""

from __future__ import annotations

import numpy as np
import pytest

from flowlaws.percolation.cascade.config import SMOKE
from flowlaws.percolation.grokking.analysis import align_to_grok, delay_summary, judge_series


def test_delay_summary_reads_first_crossings():
    steps = np.arange(0, 100, 10)
    train = np.array([[0.5, 0.5], [1.0, 0.5], [1.0, 1.0]] + [[1.0, 1.0]] * 7)
    test = np.full((10, 2), 0.05)
    test[6:, 0] = 0.95
    d = delay_summary(steps, train, test, mem_threshold=0.99, grok_threshold=0.9)
    np.testing.assert_array_equal(d.memorised, [10, 20])
    assert d.grokked[0] == 60 and np.isnan(d.grokked[1]) and d.n_grokked == 1
    assert d.ratio[0] == 6 and np.isnan(d.ratio[1])
    np.testing.assert_array_equal(d.test_at_memorised, [0.05, 0.05])
    assert "6.0" in d.line() and "1 of 2 runs" in d.line()


def test_align_to_grok_shifts_each_run_to_its_own_step():
    steps = np.arange(0, 200, 5)
    C = np.stack([steps - t for t in (100, 150, 60)], axis=1).astype(float)  # C = t − t_grok
    lags, aligned, kept = align_to_grok(steps, C, np.array([100, 150, np.nan]), before=50,
                                        after=20)
    np.testing.assert_array_equal(lags, np.arange(-50, 21, 5))
    np.testing.assert_array_equal(kept, [0, 1])
    np.testing.assert_array_equal(aligned, np.stack([lags, lags]))
    # a run whose window leaves the records is dropped
    _, _, kept = align_to_grok(steps, C, np.array([100, 190, 20]), before=50, after=20)
    np.testing.assert_array_equal(kept, [0])
    with pytest.raises(ValueError, match="evenly"):
        align_to_grok(np.array([0, 1, 3]), C[:3], np.array([1, 1, 1]), before=1)


def test_judge_series_marks_a_constant_order_parameter_and_corrects_for_the_rest():
    rng = np.random.default_rng(0)
    x = np.arange(120.0)  # too short for power at λ = 2.11: no runs_needed search
    stairs = 1 + np.cumsum(rng.random((16, 120)) < 0.03, axis=1)
    cfg = SMOKE.replace(n_null=19, n_power=17, n_boot=20, lam_claimed=2.11)
    rows = judge_series({"flat": (np.ones((16, 120)), x), "stairs": (stairs, x)}, cfg)
    assert [r["name"] for r in rows] == ["flat", "stairs"]
    assert rows[0]["constant"] and rows[0]["verdict"] == "inconclusive"
    assert not rows[1]["constant"] and rows[1]["verdict"] in ("cascade", "no cascade",
                                                               "inconclusive")
    assert all(isinstance(r["holm"], bool) and r["runs_needed"] is None for r in rows)
    assert [r["n_tests"] for r in rows] == [1, 1]  # the constant one is not a test
    assert rows[1]["final"] == ("inconclusive" if rows[1]["verdict"] == "cascade"
                                and not rows[1]["holm"] else rows[1]["verdict"])


def _delay(grok: list[float], at_mem: float = 0.02) -> object:
    steps = np.arange(0, 1001, 10)
    runs = len(grok)
    train = np.where(steps[:, None] >= 100, 1.0, 0.0) * np.ones((1, runs))
    test = np.full((len(steps), runs), at_mem)
    for r, g in enumerate(grok):
        if np.isfinite(g):
            test[steps >= g, r] = 1.0
    return delay_summary(steps, train, test)


def test_delay_verdicts_censor_runs_that_have_not_generalised_and_keep_the_first_rule():
    every = _delay([600.0] * 10)  # memorised at 100, generalised at 600: ratio 6
    assert every.verdicts(97) == ("holds", "holds")
    censored = _delay([600.0] * 5 + [np.nan] * 5)  # half never generalise by step 1000
    assert censored.verdicts(97) == ("inconclusive at this size", "fails")
    early = _delay([600.0] * 9 + [300.0])  # one run generalises 3x later: contradicts
    assert early.verdicts(97)[0] == "fails"
    assert _delay([600.0] * 10, at_mem=0.5).verdicts(97) == ("fails", "fails")  # not chance
    with pytest.raises(ValueError, match="modulus"):
        every.verdicts(1)
