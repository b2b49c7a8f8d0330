"""II.7's full preset for the cascade claim: the delay preset's grokking ensemble (32 runs of
24,000 steps, recorded every 10 steps), its four ``C_max`` series judged with the full presets'
cascade test at the seed's λ = 2.11, Holm over them, and the ``grokking_cascade`` ledger row.

Declared (this module, with its rule, :mod:`flowlaws.percolation.grokking.cascade_claim`) before
the cascade of the 24,000-step run was ever judged. The training is the delay preset's run
(:data:`~flowlaws.percolation.presets.grokking_delay.GROKKING_RUN`): with the same run store
(``cache_dir``) it is loaded, not trained again, and the stored file says which.

Explained in: book/02_percolation/07_grokking.ipynb.
"""
from __future__ import annotations

from flowlaws.percolation.grokking.cascade_claim import (
    cascade_claim,
    cascade_series,
    judge_grokking_cascade,
)
from flowlaws.percolation.grokking.fourier import frequency_cmax
from flowlaws.percolation.presets.base import (
    FULL_JUDGE,
    SMOKE_JUDGE,
    FullPreset,
    claim_row,
    keep_fields,
)
from flowlaws.percolation.presets.grokking_delay import GROKKING_RUN, trained_run

__all__ = ["compute", "PRESET"]


def compute(params: dict, **where) -> tuple[dict, dict]:
    """The ensemble ``params["config"]`` (trained, or loaded from the run store ``cache_dir``),
    its grokking steps (``grok_threshold``), the frequency (``share_threshold``) and
    weight-space ``C_max`` series, each judged at ``lam`` with ``params["judge"]``
    (``n_surrogates`` phase-randomised surrogates beside it), and the claim's row."""
    cfg, run, delay = trained_run(params, **where)
    orders = {"frequency": frequency_cmax(run.freqs, params["share_threshold"]),
              "weight": run.c_max[:, :, 0]}
    series = cascade_series(run.steps, orders, delay.grokked)
    config = params["judge"].replace(alpha=params["alpha"], seed=params["seed"],
                                     lam_claimed=params["lam"],
                                     n_surrogates=params["n_surrogates"])
    rows = judge_grokking_cascade(series, config, cfg.log_every)
    claim = cascade_claim(rows, lam_claimed=params["lam"], n_runs=cfg.n_runs, modulus=cfg.p)
    verdicts = {r["name"]: (keep_fields(r["result"]) if r["result"] is not None else
                            {k: r[k] for k in ("verdict", "summary", "p_value", "power",
                                               "n_runs", "n_points")})
                | {"holm": r["holm"], "final": r["final"]} for r in rows}
    trained = (f"loaded from the run store (trained to step {run.resumed_from} before this call)"
               if run.resumed_from >= cfg.n_steps else
               f"trained from step {run.resumed_from} in this call")
    numbers = {"n_grokked": delay.n_grokked, "n_runs": cfg.n_runs,
               "last_step": int(run.steps[-1]), "training": trained,
               "train_cpu_s": float(run.train_cpu_seconds), "counts": claim.counts,
               "claims": {"grokking_cascade": claim_row(claim.verdict, claim.number,
                                                        claim.first_verdict)}}
    return verdicts, numbers


PRESET = FullPreset(
    chapter="07_grokking_cascade",
    decides="the cascade before the jump (II.7's four C_max series of the delay preset's 32 "
            "runs of 24,000 steps, judged at λ = 2.11)",
    compute=compute,
    full={"config": GROKKING_RUN, "mem_threshold": 0.99, "grok_threshold": 0.9,
          "share_threshold": 0.5, "lam": 2.11, "n_surrogates": 1000, "seed": 0, "alpha": 0.05,
          "judge": FULL_JUDGE, "device": "cpu"},
    smoke={"config": GROKKING_RUN | {"n_runs": 2, "n_steps": 440, "log_every": 2,
                                     "checkpoint_every": 220},
           "mem_threshold": 0.99, "grok_threshold": 0.9, "share_threshold": 0.5, "lam": 2.11,
           "n_surrogates": 20, "seed": 0, "alpha": 0.05, "judge": SMOKE_JUDGE, "device": "cpu"},
    modules=(__name__,), expected_minutes=30.0, claims=("grokking_cascade",))
