"""II.8's full preset: the Heart Disease and digits ensembles at the sizes that decide the
seed's UCI claim (λ = 1.71) and its image cascade, each judged at its claimed λ, Holm over
the two.

Explained in: book/02_percolation/08_real_data.ipynb.
"""
from __future__ import annotations

import numpy as np

from flowlaws.book.rules.percolation import first_cascade_verdict
from flowlaws.percolation.cascade.stats import holm
from flowlaws.percolation.cascade.verdicts import ledger_texts
from flowlaws.percolation.dynamics.seeded import data_ensemble_chunk
from flowlaws.percolation.presets.base import (
    FULL_JUDGE,
    SMOKE_JUDGE,
    FullPreset,
    claim_row,
    ensemble,
    judge_at,
    keep_fields,
)

__all__ = ["compute", "PRESET"]


def compute(params: dict, **where) -> tuple[dict, dict]:
    """The Heart Disease and digits ensembles (``params["sets"]``: name → chunk parameters with
    ``n_runs``, the claimed ``lam``, the power curve's ``sizes`` and the ledger's ``claim``),
    each judged at its claimed λ, Holm over the sets; ``numbers["claims"]`` holds each claim's
    ledger row (:func:`~flowlaws.percolation.cascade.verdicts.ledger_texts` after Holm, and the
    verdict under the first rule)."""
    verdicts, numbers, judged = {}, {}, {}
    for name, spec in params["sets"].items():
        chunk = {k: v for k, v in spec.items() if k not in ("n_runs", "lam", "sizes", "claim")}
        runs = ensemble(data_ensemble_chunk, spec["n_runs"], params["seed"], chunk,
                        params["chunk_size"], **where)
        judged[name] = judge_at(runs["C"], runs["steps"], params, spec["lam"], spec.get("sizes"))
        verdicts[name] = keep_fields(judged[name])
        numbers[name] = {"train_acc": float(np.mean(runs["acc"])),
                         "chunks": runs["report"].n_chunks}
    rejected = dict(zip(judged, map(bool, holm([v.p_value for v in judged.values()],
                                                params["alpha"])), strict=True))
    numbers["holm_rejected"] = rejected
    numbers["claims"] = {
        spec["claim"]: claim_row(*ledger_texts(judged[name], rejected[name]),
                                 first_cascade_verdict(judged[name], rejected=rejected[name]))
        for name, spec in params["sets"].items()}
    return verdicts, numbers


_HEART = {"data": "heart", "width": 16, "init_scale": 0.01, "lr": 0.1, "batch_size": 8,
          "n_steps": 2000, "record_every": 2, "lam": 1.71, "claim": "heart_lambda171"}
_DIGITS = {"data": "digits", "width": 16, "init_scale": 0.01, "lr": 0.1, "batch_size": 8,
           "n_steps": 2000, "record_every": 2, "n_images": 500, "lam": 2.11,
           "claim": "images_cascade"}

PRESET = FullPreset(
    chapter="08_real_data",
    decides="Heart Disease λ = 1.71 and the image cascade (the seed's UCI claim)",
    compute=compute,
    full={"sets": {"Heart Disease": _HEART | {"n_runs": 2048, "sizes": (256, 512, 1024, 2048)},
                   "digits (scikit-learn)": _DIGITS | {"n_runs": 512,
                                                       "sizes": (128, 256, 512)}},
          "seed": 0, "alpha": 0.05, "chunk_size": 64, "judge": FULL_JUDGE},
    smoke={"sets": {"Heart Disease": _HEART | {"n_runs": 8, "n_steps": 200},
                    "digits (scikit-learn)": _DIGITS | {"n_runs": 8, "n_steps": 200,
                                                        "n_images": 100}},
           "seed": 0, "alpha": 0.05, "chunk_size": 4, "judge": SMOKE_JUDGE},
    modules=(__name__,), expected_minutes=30.0,
    claims=("heart_lambda171", "images_cascade"))
