"""Gradient flow on a model's parameters, with a record of the path.

Parameters travel as a ``dict[str, Tensor]`` (the model's ``named_parameters``), so the same
loss works for :func:`torch.func.functional_call`, the ODE solver and the discrete loops of
:mod:`flowlaws.conservation.training`. :func:`gradient_flow` integrates ``dθ/dt = −∇L(θ)`` to
high accuracy (the reference path); :func:`conservation_error` measures how far a law moved.

Explained in: book/01_conservation/01_gradient_flow.ipynb.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch
from scipy.integrate import solve_ivp
from torch import nn
from torch.func import functional_call
from torch.nn import functional as F

from flowlaws.conservation.flat_params import Params, flatten, unflatten

__all__ = [
    "Params",
    "LossFn",
    "LawsFn",
    "parameters_of",
    "DatasetLoss",
    "mse_loss",
    "cross_entropy_loss",
    "Trajectory",
    "conservation_error",
    "gradient_and_loss",
    "gradient_flow",
]



LossFn = Callable[[Params], torch.Tensor]


LawsFn = Callable[[Params], dict[str, torch.Tensor]]


def parameters_of(model: nn.Module) -> Params:
    """A detached copy of the model's parameters, keyed by their names."""
    return {name: p.detach().clone() for name, p in model.named_parameters()}


class DatasetLoss:
    """A loss over a whole data set that can also be evaluated on a mini-batch of rows.

    ``loss(params)`` is the full-batch loss; ``loss(params, index)`` the same loss on the rows
    ``index`` (an int64 tensor), which is what mini-batch SGD differentiates.
    ``n_samples`` is the number of rows ``N``, the range :func:`train` draws indices from.

    Args:
        criterion: ``(output, target) -> scalar``, averaged over the rows it is given.
    """

    def __init__(
        self,
        model: nn.Module,
        X: torch.Tensor,
        Y: torch.Tensor,
        criterion: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    ) -> None:
        for name, data in (("X", X), ("Y", Y)):
            if not isinstance(data, torch.Tensor) or data.dim() == 0:
                raise TypeError(f"{name} must be a tensor with one row per sample, got "
                                f"{type(data).__name__}")
        if X.shape[0] != Y.shape[0]:
            raise ValueError(
                f"X and Y need the same number of rows, got {X.shape[0]} and {Y.shape[0]}"
            )
        if X.shape[0] == 0:
            raise ValueError("X and Y hold no rows: a loss over no samples is 0/0")
        self.model, self.X, self.Y, self.criterion = model, X, Y, criterion
        self.n_samples = int(X.shape[0])

    def __call__(self, params: Params, index: torch.Tensor | None = None) -> torch.Tensor:
        X, Y = (self.X, self.Y) if index is None else (self.X[index], self.Y[index])
        return self.criterion(functional_call(self.model, params, (X,)), Y)


def _half_squared_error(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    if output.shape != target.shape:  # (n, 1) against (n,) would broadcast to an n x n loss
        raise ValueError(
            f"the targets Y have shape {tuple(target.shape)} but the model's output has shape "
            f"{tuple(output.shape)}; give Y the output's shape (e.g. Y.reshape(-1, 1))"
        )
    return 0.5 * (output - target).pow(2).sum() / output.shape[0]


def _token_cross_entropy(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(output.reshape(-1, output.shape[-1]), target.reshape(-1))


def mse_loss(model: nn.Module, X: torch.Tensor, Y: torch.Tensor) -> DatasetLoss:
    """``L(θ) = (1/2N) Σ_n ‖f(θ, x_n) − y_n‖²`` as a function of the parameter dict.

    Shapes: ``X`` is ``(N, ...)`` (the model's input), ``Y`` has exactly the model's output
    shape: ``(N,)`` targets for an ``(N, 1)`` output are a ``ValueError`` naming both shapes
    (they would broadcast to an ``N × N`` loss).
    The result also accepts an index tensor for mini-batches (see :class:`DatasetLoss`).
    """
    return DatasetLoss(model, X, Y, _half_squared_error)


def cross_entropy_loss(model: nn.Module, X: torch.Tensor, Y: torch.Tensor) -> DatasetLoss:
    """Mean cross-entropy of the model's logits against integer targets.

    Shapes: logits ``(N, C)`` with ``Y`` ``(N,)`` (a classifier), or ``(N, T, V)`` with ``Y``
    ``(N, T)`` (a language model: every position of every sequence counts once).

    Explained in: book/01_conservation/06_real_data.ipynb.
    """
    return DatasetLoss(model, X, Y, _token_cross_entropy)


@dataclass
class Trajectory:
    """A recorded optimisation path.

    Attributes:
        times: ``(T,)`` continuous times; a discrete run with step ``lr`` records ``t = lr·k``.
        params: name → ``(T, *shape)`` tensor of the parameters at those times (empty when a
            run recorded only its laws).
        losses: ``(T,)`` loss values (for mini-batch runs: the loss of the batch of that step).
        laws: name → ``(T, ...)`` tensor of each recorded law ``h(θ)`` at those times.
        steps: ``(T,)`` step numbers ``k`` of a discrete run (``None`` for the flow).
        optimizer: ``"flow"``, ``"gd"``, ``"sgd"``, ``"momentum"``, ``"adam"`` or ``"adamw"``.
        lr: the step size of a discrete run.
        param_sq_norm0: ``‖θ_0‖²``, the scale :func:`conservation_error` divides by.
    """

    times: np.ndarray
    params: dict[str, torch.Tensor]
    losses: np.ndarray
    laws: dict[str, torch.Tensor] = field(default_factory=dict)
    steps: np.ndarray | None = None
    optimizer: str | None = None
    lr: float | None = None
    param_sq_norm0: float | None = None

    def __len__(self) -> int:
        return len(self.times)

    def at(self, index: int) -> Params:
        """The parameter dict at recorded time ``index``."""
        if not self.params:
            raise ValueError("this trajectory recorded no parameters; rerun with record_params")
        return {name: value[index] for name, value in self.params.items()}

    def map(self, fn: Callable[[Params], torch.Tensor]) -> torch.Tensor:
        """Evaluate ``fn`` at every recorded time; the result is stacked as ``(T, ...)``."""
        return torch.stack([fn(self.at(i)) for i in range(len(self))])


def conservation_error(
    trajectory: Trajectory,
    law: Callable[[Params], torch.Tensor] | str,
    *,
    relative: bool = True,
) -> np.ndarray:
    """``‖h(θ_t) − h(θ_0)‖_F / ‖θ_0‖²`` at every recorded time, shape ``(T,)``.

    Quadratic laws scale like ``‖θ‖²``, so dividing by it makes the error dimensionless
    and comparable across initialisation scales (``h(θ_0)`` itself may be zero).

    Args:
        law: a function of the parameters, or the name of a law the run recorded
            (``train(..., laws=...)``), which needs no recorded parameters.
        relative: ``False`` gives the plain ``‖h(θ_t) − h(θ_0)‖_F``.
    """
    values = trajectory.laws[law] if isinstance(law, str) else trajectory.map(law)
    error = (values - values[0]).flatten(1).norm(dim=1).cpu().double().numpy()
    if not relative:
        return error
    if trajectory.param_sq_norm0 is not None:
        return error / trajectory.param_sq_norm0
    return error / float(sum(v.double().pow(2).sum() for v in trajectory.at(0).values()))


def _sq_norm(params: Params) -> float:
    return float(sum(v.detach().double().pow(2).sum() for v in params.values()))


def gradient_and_loss(
    loss_fn: LossFn, params: Params, index: torch.Tensor | None = None
) -> tuple[Params, torch.Tensor]:
    """``(∇L(θ), L(θ))`` at the parameter dict ``θ`` (on the rows ``index`` when given).

    Plain :func:`torch.autograd.grad` on detached copies: for the book's small models it has
    a few times less overhead per call than :func:`torch.func.grad`, and gives the same numbers.
    A parameter the loss does not use gets a zero gradient.
    """
    leaves = {k: v.detach().requires_grad_(True) for k, v in params.items()}
    loss = loss_fn(leaves) if index is None else loss_fn(leaves, index)
    grads = torch.autograd.grad(loss, list(leaves.values()), allow_unused=True,
                                materialize_grads=True)
    return dict(zip(leaves, grads, strict=True)), loss.detach()


def _stack_laws(laws: LawsFn | None, states: list[Params]) -> dict[str, torch.Tensor]:
    if laws is None:
        return {}
    values = [laws(s) for s in states]
    return {name: torch.stack([v[name] for v in values]) for name in values[0]}


def gradient_flow(
    loss_fn: LossFn,
    params0: Params,
    t_eval: np.ndarray,
    *,
    rtol: float = 1e-11,
    atol: float = 1e-13,
    method: str = "DOP853",
    laws: LawsFn | None = None,
) -> Trajectory:
    """Integrate ``dθ/dt = −∇L(θ)`` with :func:`scipy.integrate.solve_ivp`, in float64 on the CPU.

    The parameters are integrated in float64 whatever ``params0``'s dtype, so the model's
    inputs (``X`` inside ``loss_fn``) must be float64 too.

    Args:
        t_eval: ``(T,)`` increasing times at which to record the state, starting at 0.
        rtol, atol: the solver's tolerances; the defaults keep quadratic laws to ~1e-10.
        method: any explicit ``solve_ivp`` method; DOP853 (8th order) is the default.
        laws: optional ``θ -> {name: h(θ)}``; its values are stored in ``Trajectory.laws``.
    """
    t_eval = np.asarray(t_eval, dtype=float)
    if t_eval.ndim != 1 or t_eval[0] != 0 or np.any(np.diff(t_eval) <= 0):
        raise ValueError("t_eval must be a 1-D increasing array that starts at 0")
    theta0, layout = flatten(params0)
    y0 = theta0.cpu().numpy()

    def rhs(_t: float, y: np.ndarray) -> np.ndarray:
        g, _ = gradient_and_loss(loss_fn, unflatten(y, layout))
        return -torch.cat([v.reshape(-1) for v in g.values()]).numpy()

    sol = solve_ivp(rhs, (0.0, t_eval[-1]), y0, t_eval=t_eval, rtol=rtol, atol=atol, method=method)
    if not sol.success:
        raise RuntimeError(f"solve_ivp failed: {sol.message}")
    states = [unflatten(y, layout) for y in sol.y.T]
    params = {name: torch.stack([s[name] for s in states]) for name, _ in layout}
    with torch.no_grad():
        losses = np.array([float(loss_fn(s)) for s in states])
    return Trajectory(
        sol.t, params, losses, _stack_laws(laws, states), optimizer="flow",
        param_sq_norm0=_sq_norm(params0),
    )
