"""The experiments of chapter II.6 (Adam and AdamW): the joint-state check, the trapping runs
next to the permutation set, and the cascade runs from a small initialisation.

Every function takes what decides its result as arguments (no notebook globals), so
:func:`flowlaws.book.cache.calls.cached_call` keys it by them. Devices are given by name
(``"cpu"``, ``"cuda"``).

Explained in: book/02_percolation/06_adaptive.ipynb
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from flowlaws.percolation.cascade.config import CascadeConfig
from flowlaws.percolation.cascade.verdicts import EnsembleVerdict, ensemble_verdict
from flowlaws.percolation.dynamics.adaptive import train_ensemble
from flowlaws.percolation.dynamics.ensemble import (
    TwoLayerShape,
    ensemble_forward,
    ensemble_init,
    ensemble_loss,
)
from flowlaws.percolation.topology.clusters import cmax_curves, pair_distances
from flowlaws.percolation.toys.planted import merged_ensemble

__all__ = ["TRAP_COLUMNS", "TRAP_FORMATS", "AdamTask", "adam_task", "adam_verdict", "cascade_run",
           "joint_state_check", "trap_label", "trap_rows", "trap_run"]

MERGED = 0.05  # relative pair distance below which a pair counts as merged


@dataclass(frozen=True)
class AdamTask:
    """The data of both experiments. ``theta0`` ``(n_runs, dim)``: starts next to the
    permutation set (every neuron of a ``half_width`` network duplicated, then perturbed);
    ``shape``: the duplicated network; ``X`` ``(n_samples, n_in)``; ``Y`` ``(n_samples, 1)``:
    the merged network's outputs plus label noise; ``pairs``: the duplicated neurons;
    ``loss_merged``: the merged network's loss (its floor is ``label_noise² / 2``)."""

    theta0: torch.Tensor
    shape: TwoLayerShape
    X: torch.Tensor
    Y: torch.Tensor
    pairs: tuple[tuple[int, int], ...]
    loss_merged: float


def adam_task(n_in: int, half_width: int, n_runs: int, n_samples: int, *, label_noise: float,
              perturbation: float, seed: int) -> AdamTask:
    """The trapping experiment's task (:class:`AdamTask`), seeded by ``seed``."""
    half = TwoLayerShape(n_in, half_width, 1, "tanh")
    theta0, merged, shape = merged_ensemble(half, n_runs, perturbation=perturbation, seed=seed)
    gen = torch.Generator().manual_seed(seed + 2)
    X = torch.randn(n_samples, n_in, generator=gen)
    Y = ensemble_forward(merged, shape, X)[0] + label_noise * torch.randn(n_samples, 1,
                                                                          generator=gen)
    pairs = tuple((2 * i, 2 * i + 1) for i in range(half_width))
    return AdamTask(theta0, shape, X, Y, pairs, ensemble_loss(merged, shape, X, Y).item())


def joint_state_check(n_in: int, half_width: int, *, truncation: float, weight_decay: float,
                      seed: int) -> tuple[bool, bool]:
    """Both halves of the chapter's proposition, in float64: ``(stays, separates)``: a pair
    equal in (θ, m, v) stays within 1e-10 through 100 noisy steps (α = 1.2) of SGD, Adam and
    AdamW; a pair equal in θ only (one first moment 1e-3) is over 1e-6 apart after one Adam
    step."""
    small = TwoLayerShape(n_in, half_width, 1, "tanh")
    start, _, wide = merged_ensemble(small, 3, perturbation=0.0, seed=seed, dtype=torch.float64)
    g = torch.Generator().manual_seed(seed)
    Xc = torch.randn(16, n_in, dtype=torch.float64, generator=g)
    Yc = torch.randn(16, 1, dtype=torch.float64, generator=g)
    same = []
    for opt in ("sgd", "adam", "adamw"):
        p = train_ensemble(start, wide, Xc, Yc, optimizer=opt, lr=0.01, n_steps=100,
                           batch_size=2, alpha=1.2, truncation=truncation,
                           weight_decay=weight_decay)
        same.append(pair_distances(p.final, wide, [(0, 1)]).max().item() < 1e-10)
    m0 = torch.zeros_like(start)
    m0[:, 0] = 1e-3  # the moment of one input weight of neuron 0 only
    p = train_ensemble(start, wide, Xc, Yc, optimizer="adam", lr=0.01, n_steps=1,
                       batch_size=None, m0=m0)
    return all(same), bool(pair_distances(p.final, wide, [(0, 1)]).min() > 1e-6)


def trap_run(task: AdamTask, opt: str, lr: float, alpha: float, batch: int, *, n_steps: int,
             truncation: float, weight_decay: float, seed: int, device: str = "cpu") -> dict:
    """One trapping configuration, all runs at once: ``times`` ``(T,)`` (lr × step),
    ``d`` ``(T, n_runs, pairs)`` relative pair distances, ``eff_lr`` the median effective step
    lr/(√v̂ + ε) at the end (lr for SGD), ``loss`` the median final loss. ``batch`` 0: no
    noise; ``weight_decay`` applies to AdamW only."""
    X, Y = task.X.to(device), task.Y.to(device)
    p = train_ensemble(task.theta0.to(device), task.shape, X, Y, optimizer=opt, lr=lr,
                       n_steps=n_steps, batch_size=batch or None, alpha=alpha,
                       truncation=truncation, seed=seed,
                       weight_decay=weight_decay if opt == "adamw" else 0.0,
                       record_every=max(1, n_steps // 40))
    v_hat = p.v[-1] / (1 - 0.999**n_steps)
    return {"times": torch.tensor(p.times),
            "d": pair_distances(p.theta.cpu(), task.shape, list(task.pairs)),
            "eff_lr": (lr / (v_hat.sqrt() + 1e-8)).median().item() if opt != "sgd" else lr,
            "loss": ensemble_loss(p.final, task.shape, X, Y).median().item()}


def trap_label(config: dict) -> str:
    """``"adam, lr=0.01, alpha=1.2, B=4"`` (or ``"no noise"``) for a trapping configuration."""
    noise = ("no noise" if not config["batch"]
             else f"alpha={config['alpha']:g}, B={config['batch']}")
    return f"{config['opt']}, lr={config['lr']:g}, {noise}"


TRAP_COLUMNS = {"configuration": "configuration", "d0": "median d: start", "d1": "end",
                "merged": "pairs merged", "eff_lr": "lr/sqrt(v)", "loss": "loss"}
TRAP_FORMATS = {"d0": ".1e", "d1": ".1e", "merged": ".0%", "eff_lr": ".2g", "loss": ".4f"}


def trap_rows(traps: list[tuple[dict, dict]]) -> list[dict]:
    """One table row per ``(config, trap_run result)``: median pair distance at the start and
    the end, the fraction of pairs merged (d < 0.05) at the end, effective step, loss."""
    return [{"configuration": trap_label(c), "d0": float(r["d"][0].median()),
             "d1": float(r["d"][-1].median()),
             "merged": float((r["d"][-1] < MERGED).float().mean()),
             "eff_lr": r["eff_lr"], "loss": r["loss"]} for c, r in traps]


def cascade_run(task: AdamTask, opt: str, lr: float, runs: int, noise_seed: int, *, width: int,
                teacher_width: int, init_scale: float, n_steps: int, alpha: float,
                truncation: float, weight_decay: float, record_every: int, seed: int,
                device: str = "cpu") -> dict:
    """The cascade experiment: ``runs`` students of ``width`` tanh neurons learn a teacher of
    ``teacher_width`` (seed + 5, scale 2) on ``task.X`` from a small initialisation
    (``init_scale``, seed + 1), with batch-4 noise of tail index ``alpha`` (seed
    ``noise_seed``). Returns ``C`` ``(runs, T)`` (C_max at every record), ``steps`` ``(T,)``,
    the median final ``loss`` and the ``diverged`` report."""
    teach = TwoLayerShape(task.X.shape[1], teacher_width, 1, "tanh")
    student = TwoLayerShape(task.X.shape[1], width, 1, "tanh")
    teacher = ensemble_init(teach, 1, seed=seed + 5, scale=2.0, dtype=torch.float32)
    X = task.X.to(device)
    Yt = ensemble_forward(teacher, teach, task.X)[0].to(device)
    start = ensemble_init(student, runs, seed=seed + 1, scale=init_scale, dtype=torch.float32)
    p = train_ensemble(start.to(device), student, X, Yt, optimizer=opt, lr=lr, n_steps=n_steps,
                       batch_size=4, alpha=alpha, truncation=truncation,
                       weight_decay=weight_decay if opt == "adamw" else 0.0, seed=noise_seed,
                       record_every=record_every)
    return {"C": cmax_curves(p.theta, student), "steps": p.steps,
            "loss": ensemble_loss(p.final, student, X, Yt).median().item(),
            "diverged": p.divergence_report(lr)}


def adam_verdict(task: AdamTask, opt: str, lr: float, C: np.ndarray, steps: np.ndarray, *,
                 cascade_kw: dict, config: CascadeConfig, n_surrogates: int
                 ) -> EnsembleVerdict:
    """The cascade test's verdict on one setting's ``C`` ``(runs, T)`` at ``steps``, by
    :func:`flowlaws.percolation.cascade.verdicts.ensemble_verdict` with ``config`` (its
    ``lam_claimed``: the seed's λ); an inconclusive verdict measures the power again on fresh
    ensembles of ``config.sizes`` runs (:func:`cascade_run` with ``cascade_kw``, new noise
    seeds)."""
    def fresh(runs: int, s: int) -> np.ndarray:
        return cascade_run(task, opt, lr, runs, s + runs, **cascade_kw)["C"]

    return ensemble_verdict(C, steps, config, n_surrogates=n_surrogates, source=fresh)
