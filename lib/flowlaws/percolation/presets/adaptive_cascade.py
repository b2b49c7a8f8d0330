"""II.6's full preset: SGD, Adam and AdamW at the size that decides whether adaptive optimizers
keep the DSI cascade (1,024 runs of 20,000 steps per optimizer on a CPU).

Explained in: book/02_percolation/06_adaptive.ipynb.
"""
from __future__ import annotations

from flowlaws.book.ledger import verdict_of_all
from flowlaws.book.rules.percolation import first_cascade_verdict
from flowlaws.percolation.cascade.stats import holm
from flowlaws.percolation.cascade.verdicts import ledger_texts
from flowlaws.percolation.dynamics.seeded import teacher_ensemble_chunk
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
    """SGD, Adam and AdamW from a small initialisation on teacher data, heavy-tailed noise, one
    judged ensemble each, Holm over the three; an inconclusive verdict's power curve resamples
    the runs at ``params["sizes"]`` (up to the ensemble's own size, as II.8's). The data are
    :func:`flowlaws.percolation.toys.planted.teacher_data` (the chapter's reader preset builds
    its teacher inline: same sizes, another draw)."""
    verdicts, judged = {}, {}
    for name, opt in params["optimizers"].items():
        chunk = params["chunk"] | opt
        runs = ensemble(teacher_ensemble_chunk, params["n_runs"], params["seed"], chunk,
                        params["chunk_size"], **where)
        judged[name] = judge_at(runs["C"], runs["steps"], params, params["lam"],
                                params.get("sizes"))
        verdicts[name] = keep_fields(judged[name])
    rejected = dict(zip(judged, map(bool, holm([v.p_value for v in judged.values()],
                                                params["alpha"])), strict=True))
    parts = {o: ledger_texts(judged[o], rejected[o]) for o in ("adam", "adamw") if o in judged}
    claim = claim_row(verdict_of_all(v for v, _ in parts.values()),
                      "; ".join(f"{o}: {n}" for o, (_, n) in parts.items()),
                      verdict_of_all(first_cascade_verdict(judged[o], rejected=rejected[o])
                                     for o in parts))
    return verdicts, {"holm_rejected": rejected, "claims": {"adam_cascade": claim}}


_CHUNK = {"init": "small", "n_in": 4, "width": 8, "n_teacher": 2, "n_data": 64,
          "label_noise": 0.1, "init_scale": 0.1, "batch_size": 4, "n_steps": 20_000,
          "record_every": 20, "alpha": 1.5, "truncation": 10.0, "device": "cpu"}
_OPTIMIZERS = {"sgd": {"optimizer": "sgd", "lr": 0.1},
               "adam": {"optimizer": "adam", "lr": 0.005},
               "adamw": {"optimizer": "adamw", "lr": 0.005, "weight_decay": 0.01}}

PRESET = FullPreset(
    chapter="06_adaptive",
    decides="Adam and AdamW keep the DSI cascade (1,024 runs of 20,000 steps per optimizer on a "
            "CPU; the stored file records its wall and CPU time)",
    compute=compute,
    full={"n_runs": 1024, "seed": 0, "alpha": 0.05, "lam": 2.0, "chunk_size": 256,
          "chunk": _CHUNK, "optimizers": _OPTIMIZERS, "judge": FULL_JUDGE,
          "sizes": (128, 256, 512, 1024)},
    smoke={"n_runs": 8, "seed": 0, "alpha": 0.05, "lam": 2.0, "chunk_size": 4,
           "chunk": _CHUNK | {"n_steps": 400, "record_every": 2},
           "optimizers": _OPTIMIZERS, "judge": SMOKE_JUDGE},
    modules=(__name__,), expected_minutes=30.0, claims=("adam_cascade",))
