"""Discrete optimisers on a model's parameters, recording the loss and the laws.

:func:`train` runs GD, mini-batch SGD, heavy-ball momentum, Adam or AdamW (the update rules of
:mod:`flowlaws.common.optim`), recording the loss and any conservation laws at every step;
:func:`gradient_descent` is its GD special case.

Explained in: book/01_conservation/05_discrete_steps.ipynb.
"""
from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch

from flowlaws.book.progress import track
from flowlaws.common.checks import as_int
from flowlaws.common.optim import DivergenceError, UpdateRule, check_run_args
from flowlaws.conservation.flow import Trajectory, _sq_norm
from flowlaws.conservation.losses import LawsFn, LossFn, Params, gradient_and_loss

__all__ = [
    "train",
    "gradient_descent",
]


def _batch_sampler(
    loss_fn: LossFn, optimizer: str, batch_size: int | None, seed: int, device: torch.device
) -> Callable[[], torch.Tensor | None]:
    """A function that draws the rows of the next step (``None``: the full batch)."""
    if optimizer == "gd" and batch_size is not None:
        raise ValueError("optimizer='gd' is full-batch; use optimizer='sgd' with batch_size")
    if optimizer == "sgd" and batch_size is None:
        raise ValueError("optimizer='sgd' needs a batch_size (optimizer='gd' is full-batch)")
    if batch_size is None:
        return lambda: None
    batch_size = as_int("batch_size", batch_size, minimum=1)
    n = getattr(loss_fn, "n_samples", None)
    if n is None:
        raise ValueError("mini-batches need a loss with n_samples, e.g. "
                         "flowlaws.conservation.losses.mse_loss")
    if not 1 <= batch_size <= n:
        raise ValueError(f"batch_size must be in [1, {n}], got {batch_size}")
    generator = torch.Generator().manual_seed(as_int("seed", seed))
    return lambda: torch.randperm(n, generator=generator)[:batch_size].to(device)


class _Recorder:
    """Collects the recorded steps, losses, laws and (optionally) parameters of a run."""

    def __init__(self, laws: LawsFn | None, record_params: bool) -> None:
        self.laws, self.record_params = laws, record_params
        self.steps: list[int] = []
        self.losses: list[float] = []
        self.law_values: list[dict[str, torch.Tensor]] = []
        self.params: list[Params] = []

    def add(self, step: int, params: Params, loss: float) -> None:
        self.steps.append(step)
        self.losses.append(loss)
        if self.laws is not None:
            with torch.no_grad():
                values = self.laws(params)
            self.law_values.append({k: v.detach().clone() for k, v in values.items()})
        if self.record_params:
            self.params.append({k: v.detach().clone() for k, v in params.items()})

    def trajectory(self, optimizer: str, lr: float, sq_norm0: float) -> Trajectory:
        steps = np.asarray(self.steps)
        return Trajectory(
            lr * steps.astype(float), _stack(self.params), np.asarray(self.losses),
            _stack(self.law_values), steps, optimizer, lr, sq_norm0,
        )


def _stack(records: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """A list of equal-keyed dicts → one dict of ``(T, ...)`` CPU tensors."""
    if not records:
        return {}
    return {k: torch.stack([r[k] for r in records]).cpu() for k in records[0]}


def train(
    loss_fn: LossFn,
    params0: Params,
    optimizer: str = "gd",
    lr: float = 1e-2,
    n_steps: int = 100,
    *,
    batch_size: int | None = None,
    momentum: float = 0.9,
    betas: tuple[float, float] = (0.9, 0.999),
    eps: float = 1e-8,
    weight_decay: float = 0.0,
    seed: int = 0,
    record_every: int = 1,
    laws: LawsFn | None = None,
    record_params: bool | None = None,
    progress: bool = False,
) -> Trajectory:
    """Run a discrete optimiser for ``n_steps`` steps and record the path.

    The update rules are those of :class:`flowlaws.common.optim.UpdateRule`, applied to
    every tensor of the parameter dict (they match ``torch.optim.SGD`` with ``momentum``,
    ``Adam`` and ``AdamW``; the tests check this).

    Args:
        loss_fn: ``θ -> L(θ)``; for mini-batches a :class:`DatasetLoss` (``mse_loss`` ...),
            called as ``loss_fn(θ, index)``.
        optimizer: ``"gd"`` (full batch), ``"sgd"`` (needs ``batch_size``), ``"momentum"``,
            ``"adam"``, ``"adamw"`` (these three use mini-batches when ``batch_size`` is set).
        lr: the step size ``τ``; the recorded time is ``t = τ k``.
        batch_size: rows per step, drawn without replacement, fresh each step, from ``seed``.
        momentum, betas, eps: the heavy-ball and Adam constants.
        weight_decay: ``λ``; added to the gradient as ``λθ`` (L2), decoupled for ``"adamw"``.
        record_every: record at steps ``0, r, 2r, ...`` and at the last step.
        laws: ``θ -> {name: h(θ)}``, evaluated at every recorded step (``Trajectory.laws``).
        record_params: store the parameters at every recorded step; by default only when no
            ``laws`` are given, so long runs keep just the (small) law values.
        progress: show a ``tqdm`` progress bar.

    Raises:
        DivergenceError: as soon as a loss is NaN or infinite, naming the step and ``lr``.
    """
    check_run_args(optimizer, lr, n_steps, record_every)
    params = {name: value.detach().clone() for name, value in params0.items()}
    device = next(iter(params.values())).device
    draw = _batch_sampler(loss_fn, optimizer, batch_size, seed, device)
    rule = UpdateRule(optimizer, lr, momentum, betas, eps, weight_decay)
    state = {name: rule.init_state(p) for name, p in params.items()}
    recorder = _Recorder(laws, laws is None if record_params is None else record_params)
    for step in track(range(n_steps + 1), enabled=progress, desc=f"{optimizer} lr={lr:g}"):
        g, loss = gradient_and_loss(loss_fn, params, draw())
        loss_value = float(loss)
        if not math.isfinite(loss_value):
            raise DivergenceError(step, lr, loss_value)
        if step % record_every == 0 or step == n_steps:
            recorder.add(step, params, loss_value)
        if step < n_steps:
            params = {n: rule.step(p, g[n], state[n], step + 1) for n, p in params.items()}
    return recorder.trajectory(optimizer, lr, _sq_norm(params0))


def gradient_descent(
    loss_fn: LossFn,
    params0: Params,
    lr: float,
    n_steps: int,
    *,
    record_every: int = 1,
    laws: LawsFn | None = None,
) -> Trajectory:
    """Full-batch gradient descent ``θ_{k+1} = θ_k − lr ∇L(θ_k)``, recorded every few steps.

    The parameters are always recorded; :func:`train` is the general loop.

    Raises:
        DivergenceError: as soon as the loss is NaN or infinite, naming the step and ``lr``.
    """
    return train(
        loss_fn, params0, "gd", lr, n_steps, record_every=record_every, laws=laws,
        record_params=True,
    )
