"""The DSI chapter's model controls and its SGD experiment, judged by the cascade test.

:func:`model_runs` runs one of the merge models of :mod:`flowlaws.percolation.toys.cascades`
(hierarchical pairwise merging, random-pair merging, the kinematic ring); :func:`control_verdict`
judges it, with the size search in fresh runs of the model (the kinematic ring, whose simulation
is slow, resamples its observed runs). :func:`sgd_verdict` judges the SGD ensemble of
:func:`~flowlaws.percolation.dynamics.sgd.sgd_order_parameter` at one learning rate and batch
size. Runs and verdicts are cached on disk (:func:`flowlaws.book.cache.cached_call`).

Explained in: book/02_percolation/05_dsi.ipynb.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np

from flowlaws.book.cache import cached_call, stored_type
from flowlaws.percolation.cascade.config import READER, CascadeConfig
from flowlaws.percolation.cascade.judge import CascadeVerdict, judge_cascade
from flowlaws.percolation.cascade.variance import finite_runs
from flowlaws.percolation.dynamics.sgd import sgd_order_parameter
from flowlaws.percolation.toys.cascades import (
    KinematicModel,
    asynchronous_runs,
    hierarchical_runs,
    kinematic_runs,
    merged_fraction,
)

__all__ = ["MODELS", "model_runs", "judge_model", "control_verdict", "synchronised_ratios",
           "SGDVerdict", "sgd_verdict", "CACHEABLE"]

MODELS = ("hierarchical", "random-pair", "kinematic")


def model_runs(model: str, N: int, n_runs: int, *, spread: float = 0.5, seed: int = 0
               ) -> np.ndarray:
    """``(n_runs, N)`` the largest cluster's share ``C_max/N`` after ``m = 0 … N−1`` merges
    (read against :func:`~flowlaws.percolation.toys.cascades.merged_fraction`) in ``model``,
    one of :data:`MODELS`; ``spread`` is the hierarchical model's delay spread."""
    if model == "hierarchical":
        C = hierarchical_runs(N, n_runs, spread=spread, seed=seed)
    elif model == "random-pair":
        C = asynchronous_runs(N, n_runs, seed=seed)
    elif model == "kinematic":
        C = kinematic_runs(KinematicModel(N=N), n_runs, seed=seed)[:, ::-1]
    else:
        raise ValueError(f"model must be one of {MODELS}, got {model!r}")
    return C / N


def _fresh(model: str, N: int, spread: float, n_runs: int, seed: int) -> np.ndarray:
    return model_runs(model, N, n_runs, spread=spread, seed=seed + n_runs)


def judge_model(model: str, N: int, n_runs: int, config: CascadeConfig = READER, *,
                spread: float = 0.5) -> CascadeVerdict:
    """:func:`judge_cascade` on ``n_runs`` runs of ``model`` (seed ``config.seed``); the size
    search of an inconclusive verdict draws fresh runs at every size, except for the kinematic
    ring (its observed runs resampled)."""
    C = model_runs(model, N, n_runs, spread=spread, seed=config.seed)
    source = None if model == "kinematic" else partial(_fresh, model, N, spread)
    return judge_cascade(C, merged_fraction(N), config, source=source)


def control_verdict(model: str, N: int, n_runs: int, config: CascadeConfig = READER, *,
                    spread: float = 0.5) -> CascadeVerdict:
    """:func:`judge_model`, cached on disk."""
    return cached_call(judge_model, model, N, n_runs, config, spread=spread)


def synchronised_ratios(N: int) -> np.ndarray:
    """Spacing ratios ``d_g/d_{g+1}`` of the jumps of ``C_max`` when generations are synchronised
    (every merge of generation ``g`` before any of ``g + 1``, so ``C_max`` reaches ``2^g`` at the
    first merge of generation ``g``): ``d_g = (N 2^{1−g} − 1)/(N − 1)`` is that merge's distance
    to ``p_c = N/(N − 1)``, and the ratio is ``2 + 1/(n − 1)`` with ``n = N 2^{−g}`` the number of
    nodes of generation ``g``. ``(L − 1,)`` values for ``g = 1 … L − 1``, ``N = 2^L``."""
    L = int(round(np.log2(N)))
    g = np.arange(1, L)
    n = N / 2.0**g
    return (2 * n - 1) / (n - 1)


@stored_type
@dataclass(frozen=True)
class SGDVerdict:
    """The cascade verdict of one SGD setting: ``cascade`` (the verdict), ``lr``, ``B`` (batch
    size), ``runs`` (ensemble size judged) and ``C_end`` (mean final ``C_max`` of the finite
    runs). ``v["key"]`` reads the setting's fields, then the verdict's."""

    cascade: CascadeVerdict
    lr: float
    B: int
    runs: int
    C_end: float

    def __getitem__(self, key: str):
        if key in ("lr", "B", "runs", "C_end"):
            return getattr(self, key)
        return self.cascade[key]

    def row(self) -> dict:
        """A flat dict for a table: the setting and the verdict's scalars."""
        v = self.cascade
        return {"lr": self.lr, "B": self.B, "runs": self.runs, "C_end": self.C_end,
                "n_runs": v.n_runs, "verdict": v.verdict, "p_value": v.p_value,
                "power": v.power, "power_low": v.power_low, "lam": v.lam,
                "surrogate_p": v.surrogate_p, "decision": v.decision}


def sgd_verdict(lr: float, batch_size: int, runs: int, config: CascadeConfig = READER, *,
                width: int, n_runs: int, n_steps: int, record_every: int,
                device: str = "cpu") -> SGDVerdict:
    """:func:`judge_cascade` on the first ``runs`` runs of the SGD ensemble of
    :func:`~flowlaws.percolation.dynamics.sgd.sgd_order_parameter` against the step, both
    cached on disk (the ensemble once for every ``runs``; seed ``config.seed``); the size
    search resamples the finite runs."""
    if not 2 <= runs <= n_runs:
        raise ValueError(f"runs must lie in [2, n_runs = {n_runs}] (the ensemble trained), "
                         f"got {runs}")
    params = {"lr": lr, "width": width, "n_runs": n_runs, "batch_size": batch_size,
              "n_steps": n_steps, "record_every": record_every, "seed": config.seed}
    out = cached_call(sgd_order_parameter, device=device, **params)
    C = np.asarray(out["C"], dtype=float)[:runs]
    x = np.asarray(out["steps"], dtype=float)
    v = cached_call(judge_cascade, C, x, config)
    kept = finite_runs(C)
    return SGDVerdict(v, float(lr), int(batch_size), int(runs),
                      float(kept[:, -1].mean()) if len(kept) else float("nan"))


CACHEABLE = (SGDVerdict,)
