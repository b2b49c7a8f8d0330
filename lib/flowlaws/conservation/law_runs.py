"""Conservation laws recorded along training runs on real data: a block's laws, runs that
record them, the one-step ``τ²`` identity, optimizer sweeps and their tables.

The laws are those of :func:`~flowlaws.conservation.laws.invariants` for the block they are
about (the attention of :class:`~flowlaws.common.models.CharLM`, the whole
:class:`~flowlaws.common.models.SwiGLU` or :class:`~flowlaws.common.models.MoE` classifier).
They stay laws inside a larger model: the time derivative of ``h`` is ``−⟨∇h, ∇L⟩`` and only
the block's own parameters enter it, whatever comes before the block (an embedding) or after
it (a readout and a softmax cross-entropy). Runs train with the one Part I loop,
:func:`flowlaws.conservation.training.train`. The models are in :mod:`flowlaws.common.models`,
the data loaders in :mod:`flowlaws.data.text` and :mod:`flowlaws.data.images`, the figure in
:mod:`flowlaws.conservation.figures`.

Explained in: book/01_conservation/06_real_data.ipynb.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from flowlaws.book.runtime import one_thread
from flowlaws.conservation.laws import invariants
from flowlaws.conservation.losses import LawsFn, LossFn, Params, gradient_and_loss
from flowlaws.conservation.training import train

__all__ = [
    "block_laws",
    "law_groups",
    "block_sq_norm",
    "LawRun",
    "train_with_laws",
    "one_step_gap",
    "optimizer_sweep",
    "error_at",
    "law_table",
]


def block_laws(model: nn.Module, block: str = "") -> LawsFn:
    """``θ ↦`` :func:`invariants` of the submodule ``block`` of ``model``.

    ``θ`` is a parameter dict of the whole model (or any dict with its keys, e.g. a gradient);
    its entries ``"{block}.{name}"`` are copied into a private copy of the block and the
    block's invariants returned under names ``"{block}.{law}"`` (``block=""``: the model).
    Explained in: book/01_conservation/06_real_data.ipynb
    """
    probe = copy.deepcopy(model.get_submodule(block))
    prefix = f"{block}." if block else ""

    def laws(params: Params) -> dict[str, torch.Tensor]:
        with torch.no_grad():
            for name, p in probe.named_parameters():
                p.copy_(params[prefix + name])
        return {prefix + k: v.clone() for k, v in invariants(probe).items()}

    return laws


def law_groups(names: list[str]) -> dict[str, list[str]]:
    """Law names grouped by kind (their last part): ``"QK"``, ``"VO"``, ``"units"``, ``"sum"``."""
    groups: dict[str, list[str]] = {}
    for name in names:
        groups.setdefault(name.rsplit(".", 1)[-1], []).append(name)
    return groups


def block_sq_norm(params: Params, block: str = "") -> float:
    """``‖θ_block‖²``, the squared norm of the parameters whose names start with ``block``."""
    prefix = f"{block}." if block else ""
    return float(sum(v.detach().double().pow(2).sum() for k, v in params.items()
                     if k.startswith(prefix)))


@dataclass
class LawRun:
    """One training run with its laws: steps, losses and the relative error of each law kind.

    Attributes:
        errors: kind → ``(T,)`` array ``‖h(θ_k) − h(θ_0)‖_F / ‖θ_{0,block}‖²``, where ``h``
            stacks every law of that kind (all heads, all units) and the scale is the squared
            norm of the block's parameters at the start.
        laws: law name → ``(T, ...)`` recorded values.
    """

    optimizer: str
    lr: float
    steps: np.ndarray
    losses: np.ndarray
    errors: dict[str, np.ndarray]
    laws: dict[str, torch.Tensor]


def train_with_laws(
    loss_fn: LossFn, params0: Params, model: nn.Module, block: str = "",
    optimizer: str = "gd", lr: float = 0.1, n_steps: int = 100, *,
    batch_size: int | None = None, record_every: int = 1, seed: int = 0, progress: bool = False,
) -> LawRun:
    """Train with :func:`train`, recording the block's laws every few steps.

    Returns a :class:`LawRun` with the relative conservation error of each kind of law
    (:func:`law_groups`). Explained in: book/01_conservation/06_real_data.ipynb
    """
    run = train(loss_fn, params0, optimizer, lr, n_steps, batch_size=batch_size, seed=seed,
                record_every=record_every, laws=block_laws(model, block), progress=progress)
    scale = block_sq_norm(params0, block)
    errors = {kind: _group_error(run.laws, names) / scale
              for kind, names in law_groups(list(run.laws)).items()}
    return LawRun(optimizer, lr, run.steps, run.losses, errors, run.laws)


def _group_error(laws: dict[str, torch.Tensor], names: list[str]) -> np.ndarray:
    values = torch.cat([laws[n].flatten(1) for n in names], dim=1).double()
    return (values - values[0]).norm(dim=1).cpu().numpy()


def one_step_gap(loss_fn: LossFn, params0: Params, laws: LawsFn, lr: float,
                 optimizer: str = "gd", index: torch.Tensor | None = None,
                 kinds: list[str] | None = None) -> float:
    """How far one step is from the exact identity ``h(θ_1) − h(θ_0) = τ² h(g)``.

    ``g`` is the gradient of the full loss, or of the rows ``index`` (a mini-batch). The step
    is ``θ_1 = θ_0 − τ g`` for ``"gd"``/``"sgd"``; for another optimizer (``"adam"`` …) it is
    that optimizer's first full-batch step from :func:`train`. Returns
    ``max_h ‖Δh − τ² h(g)‖_F / ‖τ² h(g)‖_F`` over the laws (NaN when some ``h(g)`` is exactly
    zero): rounding level for true laws under GD and SGD. ``kinds`` keeps only the laws of
    those kinds (:func:`law_groups`): a *linear* law such as the MoE gate sum has
    ``h(g) = 0``, so it has no relative gap (GD keeps it to rounding).
    Explained in: book/01_conservation/06_real_data.ipynb
    """
    g, _ = gradient_and_loss(loss_fn, params0, index)
    if optimizer in ("gd", "sgd"):
        params1 = {k: v - lr * g[k] for k, v in params0.items()}
    elif index is None:
        params1 = train(loss_fn, params0, optimizer, lr, 1, record_params=True).at(1)
    else:
        raise ValueError(f"index (a mini-batch) is only for 'gd'/'sgd', not {optimizer!r}")
    before, after, of_g = laws(params0), laws(params1), laws(g)
    keys = [k for k in before if kinds is None or k.rsplit(".", 1)[-1] in kinds]
    gaps = [float((after[k] - before[k] - lr**2 * of_g[k]).norm() / (lr**2 * of_g[k]).norm())
            for k in keys]
    return float(np.max(gaps))  # NaN (0/0) propagates


def optimizer_sweep(
    loss_fn: LossFn, params0: Params, model: nn.Module, block: str, lrs: dict[str, float],
    n_steps: int, *, batch_size: int | None = None, record_every: int = 1, seed: int = 0,
) -> list[LawRun]:
    """Each optimizer of ``lrs`` (``"gd"``, ``"sgd"``, ``"adam"`` …) at ``lr`` and at ``lr/2``.

    All runs start at ``params0`` and take ``n_steps`` steps; ``"sgd"`` uses mini-batches of
    ``batch_size`` rows (the same sequence of batches at both step sizes, from ``seed``), the
    others the full batch. Returns the :class:`LawRun` s in the order ``lr, lr/2`` per optimizer.
    Runs on one CPU thread (the GPU, when the tensors are there, is not affected).
    Explained in: book/01_conservation/06_real_data.ipynb
    """
    runs = []
    with one_thread():  # small tensors: CPU threads cost more than they gain
        for optimizer, lr in lrs.items():
            for step in (lr, lr / 2):
                runs.append(train_with_laws(
                    loss_fn, params0, model, block, optimizer, step, n_steps, seed=seed,
                    batch_size=batch_size if optimizer == "sgd" else None,
                    record_every=record_every, progress=True))
    return runs


def error_at(run: LawRun, kind: str, k: int) -> float:
    """The relative error of the law kind ``kind`` recorded at step ``k`` of ``run``."""
    hits = np.flatnonzero(run.steps == k)
    if hits.size == 0:
        raise ValueError(f"step {k} was not recorded (recorded: {run.steps[:5]} ...)")
    return float(run.errors[kind][hits[0]])


def _ratio(a: float, b: float) -> float:
    return a / b if b != 0 else float("nan")


def law_table(runs: list[LawRun], kinds: list[str], ks: list[int]) -> str:
    """A text table: per run its loss and each law kind's error at the steps ``ks``; per pair
    of runs (``lr``, ``lr/2``, as :func:`optimizer_sweep` orders them) the ratio of their
    errors at the same step ``k`` and at the same time ``t = lr·k`` (step ``2k`` of the
    ``lr/2`` run, for the ``k`` whose double was recorded).
    Explained in: book/01_conservation/06_real_data.ipynb
    """
    lines = []
    for big, small in zip(runs[0::2], runs[1::2], strict=True):
        for r in (big, small):
            errors = "  ".join(f"{kind} " + " ".join(f"{error_at(r, kind, k):.2e}" for k in ks)
                               for kind in kinds)
            lines.append(f"{r.optimizer:<5} lr={r.lr:<7g} loss {r.losses[0]:.3f} -> "
                         f"{r.losses[-1]:.3f} | error at k={ks}: {errors}")
        same_k = "  ".join(f"{kind} " + " ".join(
            f"{_ratio(error_at(big, kind, k), error_at(small, kind, k)):.2f}" for k in ks)
            for kind in kinds)
        lines.append(f"{'':5} error(lr) / error(lr/2), same k={ks}: {same_k}")
        doubled = [k for k in ks if 2 * k in small.steps]
        same_t = "  ".join(f"{kind} " + " ".join(
            f"{_ratio(error_at(big, kind, k), error_at(small, kind, 2 * k)):.2f}" for k in doubled)
            for kind in kinds)
        lines.append(f"{'':5} error(lr, k) / error(lr/2, 2k), same time, k={doubled}: {same_t}")
    return "\n".join(lines)
