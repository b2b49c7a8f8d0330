"""Tests of flowlaws.percolation.cascade.calibration: the false-"cascade" rate on every null
family (level-free and level-structured) and the power on planted cascades, measured with
enough trials to fail. Each test prints what it measured (run pytest with ``-s``).

Sizes (measured on 2 shared cores): 60 ensembles per null family of 32 runs × 512 points at
the smoke preset, ~0.12 s each; a family whose true false-"cascade" rate were 0.15 (three times
α) would fail the one-sided binomial test (p < 0.01) with probability about 0.8. The chapter
prints the same tables at the reader preset (20 ensembles per family of 64 runs × 1,024
points) and beside them the stored full preset, 200 per family, which the last test checks.
"""

from __future__ import annotations

from flowlaws.percolation.cascade import calibration
from flowlaws.percolation.cascade.config import SMOKE

ALPHA = 0.05


def test_the_run_level_null_is_calibrated_on_staircases_without_a_cascade():
    """40 ensembles at each of the five settings, 19 deals each: p-values k/20."""
    cal = calibration.null_calibration(n_ensembles=40, n_null=19, alpha=ALPHA, seed=12)
    print(f"\nall {cal['n_ensembles']}: rejection {cal['rate']:.3f}, chi-square p "
          f"{cal['chi2_p']:.3f}")
    assert cal["n_ensembles"] == 40 * len(calibration.CALIBRATION)
    assert cal["binom_p"] > 0.01 and cal["chi2_p"] > 0.01


def test_no_null_family_is_called_a_cascade_more_often_than_alpha():
    rows = calibration.calibration_table(SMOKE, n_ensembles=60, n_runs=32, n_points=512)
    for r in rows:
        print(f"\n{r['family']:22s} cascades {r['cascades']:3d}/{r['ensembles']} "
              f"(≤ {r['rate_high']:.3f}), binomial p {r['binom_p']:.3f}, null rejected "
              f"{r['null_rejected']:.2f}, {r['seconds']:.1f} s", end="")
    assert [r["family"] for r in rows] == list(calibration.NULL_FAMILIES)
    assert all(r["binom_p"] > 0.01 for r in rows)
    # the level-structured families do reject the run-level null: the geometry refuses them
    level = {r["family"]: r["null_rejected"] for r in rows}
    assert level["arithmetic"] > 0.5 and level["crowding"] > 0.5


def test_planted_cascades_are_found_with_lambda_within_10_percent():
    """λ from 1.5 to 3, four levels, 64 runs, 1,024 points: power ≥ 0.8, λ̂ within 10 %."""
    rows = calibration.power_table(SMOKE, n_trials=20, planted=((1.5, 4), (2.0, 4), (3.0, 4)))
    for r in rows:
        print(f"\nλ = {r['lam']}, {r['levels']} levels: found {r['found']}/{r['trials']} "
              f"[{r['power_low']:.2f}, {r['power_high']:.2f}], λ̂ median {r['lam_median']:.3f}, "
              f"within 10 %: {r['within_10']:.2f}, {r['seconds']:.1f} s", end="")
    assert all(r["power"] >= 0.8 and r["within_10"] >= 0.8 for r in rows)


def test_the_stored_full_calibration_has_200_ensembles_per_family_and_passes():
    """The stored full preset (``make full CHAPTER=05_calibration``: 200 ensembles per null family
    of 64 runs × 1,024 points, 100 planted cascades per row, the full presets' judge): every
    family's one-sided binomial test of "rate ≤ α" gives p > 0.01 and every planted row has
    power ≥ 0.8 with λ̂ within 10 % in ≥ 80 % of its trials. The file is checked against the
    code that computes it by tests/unit/test_full.py; a missing file fails here."""
    from pathlib import Path

    from flowlaws.common.stored import read_stored

    root = Path(__file__).resolve().parents[4]
    record = read_stored(root / "book" / "02_percolation" / "stored" / "05_calibration_full.json")
    cal, power = record["numbers"]["calibration"], record["numbers"]["power"]
    assert [r["family"] for r in cal] == list(calibration.NULL_FAMILIES)
    assert all(r["ensembles"] >= 200 and r["n_runs"] == 64 for r in cal)
    for r in cal:
        print(f"\n{r['family']:22s} {r['cascades']}/{r['ensembles']} (≤ {r['rate_high']:.3f}),"
              f" binomial p {r['binom_p']:.3f}", end="")
    assert all(r["binom_p"] > 0.01 for r in cal)
    assert {(r["lam"], r["levels"]) for r in power} == set(calibration.PLANTED)
    assert all(r["trials"] >= 100 for r in power)
    assert all(r["power"] >= 0.8 and r["within_10"] >= 0.8 for r in power)
