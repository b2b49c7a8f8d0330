"""The optimisers' update rules, written once for every training loop of the book.

SGD (with L2 weight decay), heavy-ball momentum, Adam and AdamW, each one explicit update of a
tensor, matching ``torch.optim.SGD`` (with ``momentum``), ``Adam`` and ``AdamW`` (the tests
check each against ``torch.optim``). The rules are written out rather than taken from
``torch.optim``: ``torch.optim`` mutates leaf tensors in place and hides its state, while the
book wants the update visible, the state a plain dict that a checkpoint can hold, and one rule
for every shape of parameters: a model's parameter dict (:mod:`flowlaws.conservation.training`),
an ensemble's ``(n_runs, dim)`` state (:mod:`flowlaws.percolation.dynamics.adaptive`) or the batched
Transformers of :mod:`flowlaws.percolation.grokking.training`. Every update is elementwise, so a
leading
ensemble dimension needs nothing special, and ``lr`` may be a tensor that broadcasts (one
learning rate per run).

One step of each rule, at step ``t ≥ 1`` with gradient ``g`` and weight decay ``λ``:

- ``"sgd"``: ``θ ← θ − lr (g + λθ)`` (``"gd"`` is the same rule on the full batch);
- ``"momentum"``: ``b ← μ b + g + λθ``, ``θ ← θ − lr b``;
- ``"adam"``: ``g ← g + λθ``; ``m ← β₁m + (1−β₁)g``, ``v ← β₂v + (1−β₂)g²``,
  ``θ ← θ − lr/(1−β₁ᵗ) · m / (√v/√(1−β₂ᵗ) + ε)``;
- ``"adamw"``: as Adam without ``λθ`` in ``g``, after the decoupled decay ``θ ← θ(1 − lr λ)``.

The argument check and the divergence error that every training loop shares live here too.

Explained in: book/01_conservation/05_discrete_steps.ipynb and
book/02_percolation/06_adaptive.ipynb.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from flowlaws.common.checks import (
    as_betas,
    check_nonnegative,
    check_positive,
    check_positive_ints,
)

__all__ = [
    "OPTIMIZERS",
    "UpdateRule",
    "DivergenceError",
    "EnsembleDivergenceError",
    "check_run_args",
]

OPTIMIZERS = ("gd", "sgd", "momentum", "adam", "adamw")

State = dict[str, torch.Tensor]


@dataclass(frozen=True)
class UpdateRule:
    """One optimiser and its constants; :meth:`step` applies it to one tensor.

    Attributes:
        name: one of :data:`OPTIMIZERS`.
        lr: the step size (a float, or a tensor that broadcasts against the parameters).
        momentum: heavy-ball ``μ`` (``"momentum"`` only).
        betas, eps: Adam's constants (``"adam"``, ``"adamw"``).
        weight_decay: ``λ``: L2 in the gradient, decoupled for ``"adamw"``.
    """

    name: str
    lr: float | torch.Tensor
    momentum: float = 0.9
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    weight_decay: float = 0.0

    def __post_init__(self) -> None:
        if self.name not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {self.name!r}")
        if not isinstance(self.lr, torch.Tensor):  # a tensor lr (one per run) is the caller's
            check_positive(lr=self.lr)
        check_nonnegative(momentum=self.momentum, weight_decay=self.weight_decay)
        check_positive(eps=self.eps)
        object.__setattr__(self, "betas", as_betas("betas", self.betas))  # frozen dataclass

    def init_state(self, param: torch.Tensor) -> State:
        """The rule's state for one tensor: zeros shaped like ``param`` (empty for SGD)."""
        keys = {"momentum": ("buffer",), "adam": ("m", "v"), "adamw": ("m", "v")}
        return {k: torch.zeros_like(param) for k in keys.get(self.name, ())}

    def step(self, param: torch.Tensor, grad: torch.Tensor, state: State, t: int,
             lr: float | torch.Tensor | None = None) -> torch.Tensor:
        """The parameter after step ``t`` (``t ≥ 1``); ``state`` is updated (new tensors).

        ``lr`` overrides :attr:`lr` for this step (a warm-up schedule, say). Nothing is
        modified in place, so ``param`` may be a leaf that autograd tracks.
        """
        lr = self.lr if lr is None else lr
        wd = self.weight_decay
        if self.name in ("gd", "sgd"):
            return param - lr * (grad + wd * param)
        if self.name == "momentum":
            state["buffer"] = self.momentum * state["buffer"] + grad + wd * param
            return param - lr * state["buffer"]
        return self._adam(param, grad, state, t, lr)

    def _adam(self, param: torch.Tensor, grad: torch.Tensor, state: State, t: int,
              lr: float | torch.Tensor) -> torch.Tensor:
        (b1, b2), wd = self.betas, self.weight_decay
        if self.name == "adamw":
            param = param * (1 - lr * wd)
        else:
            grad = grad + wd * param
        state["m"] = torch.lerp(state["m"], grad, 1 - b1)
        state["v"] = torch.addcmul(b2 * state["v"], grad, grad, value=1 - b2)
        denominator = state["v"].sqrt() / math.sqrt(1 - b2**t) + self.eps
        return param - (lr / (1 - b1**t)) * state["m"] / denominator


class DivergenceError(RuntimeError):
    """A discrete run produced a NaN or infinite loss; carries the step and the step size."""

    def __init__(self, step: int, lr: float, loss: float) -> None:
        super().__init__(
            f"training diverged at step {step} with lr={lr:g} (loss={loss}); "
            "lower the learning rate or shorten the run"
        )
        self.step, self.lr, self.loss = step, lr, loss


class EnsembleDivergenceError(DivergenceError):
    """Runs of an ensemble whose loss became NaN or infinite.

    ``runs`` their indices, ``steps`` the step after which each loss was first non-finite,
    ``step`` the earliest of them and ``lr`` the step size then.
    """

    def __init__(self, runs: list[int], steps: list[int], n_runs: int, lr: float,
                 note: str = "") -> None:
        detail = ", ".join(f"run {r} after step {s}" for r, s in zip(runs[:10], steps[:10],
                                                                      strict=True))
        more = f" (and {len(runs) - 10} more)" if len(runs) > 10 else ""
        RuntimeError.__init__(
            self, f"{len(runs)} of {n_runs} runs diverged (non-finite loss) with lr={lr:g}: "
            f"{detail}{more}; lower the learning rate{note}")
        self.runs, self.steps, self.step, self.lr = runs, steps, min(steps), lr
        self.loss = float("nan")


def check_run_args(
    optimizer: str, lr: float, n_steps: int, record_every: int,
    allowed: tuple[str, ...] = OPTIMIZERS,
) -> None:
    """Refuse an unknown optimizer, a non-positive or non-finite ``lr``, or empty runs.

    ``lr`` is a number (numpy scalars included), ``n_steps`` and ``record_every`` positive
    integers (``np.int64`` included; a float such as ``10.0`` is refused); every message names
    the argument (:mod:`flowlaws.common.checks`).
    """
    if not isinstance(optimizer, str) or optimizer not in allowed:
        raise ValueError(f"optimizer must be one of {allowed}, got {optimizer!r}")
    check_positive(lr=lr)
    check_positive_ints(n_steps=n_steps, record_every=record_every)
