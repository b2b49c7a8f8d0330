"""II.7's full preset for the delay claim: the chapter's grokking ensemble trained three times
as long (24,000 steps), its memorisation and grokking steps, and the declared rule's verdict.

Explained in: book/02_percolation/07_grokking.ipynb.
"""
from __future__ import annotations

import numpy as np

from flowlaws.percolation.grokking.analysis import Delay, delay_summary
from flowlaws.percolation.grokking.model import GrokConfig
from flowlaws.percolation.grokking.training import GrokRun, train_grokking
from flowlaws.percolation.presets.base import FullPreset, claim_row

__all__ = ["compute", "trained_run", "PRESET", "GROKKING_RUN"]


def trained_run(params: dict, **where) -> tuple[GrokConfig, GrokRun, Delay]:
    """The ensemble ``params["config"]`` (a :class:`GrokConfig` as a dict) trained to its
    ``n_steps``, or loaded from (or resumed in) the run store ``where["cache_dir"]``, with its
    :func:`delay_summary` at ``params["mem_threshold"]`` and ``params["grok_threshold"]``; a
    progress bar when ``where["progress"]`` is set. Both II.7 presets start here."""
    cfg = GrokConfig(**params["config"])
    run = train_grokking(cfg, device=params.get("device", "cpu"), cache_dir=where.get("cache_dir"),
                         progress=where.get("progress") is not None)
    delay = delay_summary(run.steps, run.train_acc, run.test_acc,
                          mem_threshold=params["mem_threshold"],
                          grok_threshold=params["grok_threshold"])
    return cfg, run, delay


def compute(params: dict, **where) -> tuple[dict, dict]:
    """The chapter's ensemble (``params["config"]``, a
    :class:`~flowlaws.percolation.grokking.model.GrokConfig` as a dict) trained to ``n_steps``
    (resumed from a shorter stored run of the same trajectory), its memorisation and grokking
    steps, and the verdict of the declared rule (``grokking_delayed``). ``where``: ``cache_dir``
    of the run store (workers and scheduler are not used: the ensemble is one batched
    computation)."""
    cfg, run, delay = trained_run(params, **where)
    verdict, first = delay.verdicts(cfg.p)
    late = delay.ratio[np.isfinite(delay.ratio)]
    spread = f" (range {late.min():.1f}–{late.max():.1f})" if len(late) else ""
    median = f"{np.median(late):.1f}" if len(late) else "n/a"
    number = (f"grokking/memorisation step ratio median {median}{spread}, {delay.n_grokked} of "
              f"{cfg.n_runs} runs grokked by step {int(run.steps[-1])} (deciding needs 90 %), "
              f"modulus {cfg.p}, {run.train_cpu_seconds / 60:.1f} CPU min")
    numbers = {"line": delay.line(), "n_grokked": delay.n_grokked, "n_runs": cfg.n_runs,
               "last_step": int(run.steps[-1]), "ratio": [float(r) for r in delay.ratio],
               "memorised": [float(m) for m in delay.memorised],
               "grokked": [float(g) for g in delay.grokked],
               "claims": {"grokking_delayed": claim_row(verdict, number, first)}}
    return {"delay": {"verdict": verdict, "p_value": float("nan"), "power": float("nan"),
                      "n_runs": cfg.n_runs, "summary": number}}, numbers


# The grokking chapter's reader ensemble (II.7's parameters as of this preset's declaration),
# trained three times as long: 23 of 32 runs had grokked by step 8,000, and the declared rule
# needs 90 % before it decides; 24,000 steps cost about 16 CPU minutes.
GROKKING_RUN = {"p": 23, "fraction": 0.4, "d_model": 32, "n_heads": 4, "d_mlp": 64, "lr": 2e-2,
                "weight_decay": 1.0, "betas": (0.9, 0.98), "n_runs": 32, "seed": 0,
                "data_seed": 0, "n_steps": 24_000, "log_every": 10, "checkpoint_every": 500,
                "tols": (0.05, 0.1, 0.2, 0.3)}

PRESET = FullPreset(
    chapter="07_grokking",
    decides="the grokking delay (32 runs of the reader's ensemble, 24,000 steps on a CPU)",
    compute=compute,
    full={"config": GROKKING_RUN, "mem_threshold": 0.99, "grok_threshold": 0.9, "device": "cpu"},
    smoke={"config": GROKKING_RUN | {"n_runs": 2, "n_steps": 40, "checkpoint_every": 20},
           "mem_threshold": 0.99, "grok_threshold": 0.9, "device": "cpu"},
    modules=(__name__,), expected_minutes=20.0, claims=("grokking_delayed",))
