"""II.5's model controls at the size that decides them: hierarchical pairwise merging (the
positive control, claim ``dsi_pairwise_lambda2``), random-pair merging (the negative control)
and the kinematic ring (claim ``dsi_kinematic``), 256 runs of 256 units each, judged at the
full presets' settings with the size search at 64–512 runs and the detectable-jump ladder.

These are the sizes the chapter's parameter cell has named as its full preset since the controls
were written (``ctl_runs = kin_runs = 256``, ``power_sizes = [64, 128, 256, 512]``); the reader
preset judges 64 runs without the size search or the ladder, which took most of its time.

Explained in: book/02_percolation/05_dsi.ipynb.
"""
from __future__ import annotations

from flowlaws.book.rules.percolation import first_cascade_verdict
from flowlaws.percolation.cascade.config import JUMP_LADDER
from flowlaws.percolation.cascade.models import judge_model
from flowlaws.percolation.cascade.surrogates import surrogate_test
from flowlaws.percolation.cascade.verdicts import claim_numbers, detectable_text, lambda_claim
from flowlaws.percolation.presets.base import (
    FULL_JUDGE,
    SMOKE_JUDGE,
    FullPreset,
    claim_row,
    keep_fields,
)

__all__ = ["compute", "PRESET"]


def compute(params: dict, **where) -> tuple[dict, dict]:
    """Each model of ``params["models"]`` (label → ``(model, N, runs)``, one process: the ring's
    runs are one vectorised simulation, the other two take seconds) judged by
    :func:`~flowlaws.percolation.cascade.models.judge_model` at ``params["judge"]`` with the
    size search at ``params["sizes"]`` and the ladder ``params["jump_ladder"]``; the seed's
    phase-randomized surrogate test of the ring's ``R`` (``n_surrogates``) and each model's
    detectable jump beside them.
    ``numbers["claims"]`` holds the two claims' ledger rows; ``where`` is accepted for the
    common ``compute`` signature and unused."""
    config = params["judge"].replace(alpha=params["alpha"], seed=params["seed"],
                                     sizes=tuple(params["sizes"]),
                                     jump_ladder=tuple(params["jump_ladder"]),
                                     n_surrogates=params["n_surrogates"])
    judged = {label: judge_model(model, N, runs, config, spread=params["spread"])
              for label, (model, N, runs) in params["models"].items()}
    hier, pairs, ring = (judged[k] for k in ("hierarchical", "random-pair", "kinematic"))
    seed_test = surrogate_test(ring.R, ring.x, n_surrogates=params["n_surrogates"],
                               alpha=params["alpha"], seed=params["seed"])
    units = {k: f", N = {N}" for k, (_, N, _) in params["models"].items()}
    claims = {
        "dsi_pairwise_lambda2": claim_row(lambda_claim(hier),
                                          claim_numbers(hier) + units["hierarchical"],
                                          first_cascade_verdict(hier)),
        "dsi_kinematic": claim_row(lambda_claim(ring), claim_numbers(ring) + units["kinematic"],
                                   first_cascade_verdict(ring))}
    numbers = {"claims": claims, "random_pair": claim_numbers(pairs),
               "kinematic_seed_p": float(seed_test.p_value),
               "kinematic_raw_rate": float(seed_test.detection_rate),
               "detectable": {label: detectable_text(v) for label, v in judged.items()}}
    return {label: keep_fields(v) for label, v in judged.items()}, numbers


_MODELS = {"hierarchical": ("hierarchical", 256, 256), "random-pair": ("random-pair", 256, 256),
           "kinematic": ("kinematic", 256, 256)}

PRESET = FullPreset(
    chapter="05_controls",
    decides="the hierarchical model's λ = 2 and the kinematic ring's cascade (256 runs of each "
            "model, the size search at 64-512 runs and the detectable-jump ladder, on a CPU)",
    compute=compute,
    full={"models": _MODELS, "spread": 0.5, "seed": 0, "alpha": 0.05, "judge": FULL_JUDGE,
          "sizes": (64, 128, 256, 512), "jump_ladder": JUMP_LADDER, "n_surrogates": 1000},
    smoke={"models": {"hierarchical": ("hierarchical", 256, 16),
                      "random-pair": ("random-pair", 256, 16), "kinematic": ("kinematic", 256, 8)},
           "spread": 0.5, "seed": 0, "alpha": 0.05, "judge": SMOKE_JUDGE, "sizes": (16, 32),
           "jump_ladder": (1.0, 4.0), "n_surrogates": 19},
    modules=(__name__,), expected_minutes=20.0,
    claims=("dsi_pairwise_lambda2", "dsi_kinematic"))
