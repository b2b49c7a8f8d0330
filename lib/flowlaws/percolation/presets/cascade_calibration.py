"""II.5's full calibration preset: the cascade test's false-cascade rate on every null family
(200 ensembles each) and its power on planted cascades (100 each), at the full presets' judge.

Explained in: book/02_percolation/05_dsi.ipynb.
"""
from __future__ import annotations

from flowlaws.percolation.cascade.calibration import (
    CALIBRATION_LEVEL,
    calibration_table,
    power_table,
)
from flowlaws.percolation.cascade.config import POWER_TARGET
from flowlaws.percolation.presets.base import FULL_JUDGE, SMOKE_JUDGE, FullPreset

__all__ = ["compute", "PRESET"]


def compute(params: dict, **where) -> tuple[dict, dict]:
    """:func:`~flowlaws.percolation.cascade.calibration.calibration_table` and
    :func:`~flowlaws.percolation.cascade.calibration.power_table` with the full presets' judge
    (issue 24: at least 200 ensembles per null family). Rules, declared with this preset: a null
    family *holds* (the false-cascade rate is at most α) when the one-sided binomial test of
    "rate ≤ α" gives p > ``CALIBRATION_LEVEL`` (0.01), the chapter's printed check; a planted
    setting *holds* when the power is at least ``POWER_TARGET`` (0.8) and λ̂ is within 10 % of
    the planted λ in at least ``POWER_TARGET`` of the trials. ``where`` is not used (one
    process)."""
    config = params["judge"].replace(alpha=params["alpha"], seed=params["seed"])
    cal = calibration_table(config, n_ensembles=params["n_ensembles"], n_runs=params["n_runs"],
                            n_points=params["n_points"], progress=where.get("progress"))
    power = power_table(config, n_trials=params["n_trials"], n_runs=params["n_runs"],
                        n_points=params["n_points"], progress=where.get("progress"))
    verdicts = {}
    for r in cal:
        verdicts[f"null: {r['family']}"] = {
            "verdict": "holds" if r["binom_p"] > CALIBRATION_LEVEL else "fails",
            "p_value": r["binom_p"],
            "power": float("nan"), "n_runs": r["n_runs"],
            "summary": (f"{r['cascades']} false cascades of {r['ensembles']} (rate "
                        f"{r['rate']:.3f}, 95 % upper bound {r['rate_high']:.3f}, binomial p "
                        f"{r['binom_p']:.3f})")}
    for r in power:
        ok = r["power"] >= POWER_TARGET and r["within_10"] >= POWER_TARGET
        verdicts[f"planted: λ = {r['lam']:g}, {r['levels']} levels"] = {
            "verdict": "holds" if ok else "fails", "p_value": float("nan"),
            "power": r["power"], "n_runs": r["n_runs"],
            "summary": (f"{r['found']} of {r['trials']} found (power {r['power']:.2f}, 95 % "
                        f"lower bound {r['power_low']:.2f}), median λ̂ {r['lam_median']:.3f}, "
                        f"λ̂ within 10 % in {r['within_10']:.2f}")}
    return verdicts, {"calibration": cal, "power": power, "claims": {}}


PRESET = FullPreset(
    chapter="05_calibration",
    decides="the cascade test's false-cascade rate on every null family (200 ensembles each) "
            "and its power on planted cascades (100 each), at the full presets' judge",
    compute=compute,
    full={"n_ensembles": 200, "n_trials": 100, "n_runs": 64, "n_points": 1024, "seed": 0,
          "alpha": 0.05, "judge": FULL_JUDGE},
    smoke={"n_ensembles": 2, "n_trials": 2, "n_runs": 16, "n_points": 512, "seed": 0,
           "alpha": 0.05, "judge": SMOKE_JUDGE},
    modules=(__name__,), expected_minutes=30.0)
