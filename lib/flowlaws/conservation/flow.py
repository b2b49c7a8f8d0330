"""Gradient flow on a model's parameters, with a record of the path.

Parameters travel as a ``dict[str, Tensor]`` (the model's ``named_parameters``); the losses
are in :mod:`flowlaws.conservation.losses`. :func:`gradient_flow` integrates ``dθ/dt = −∇L(θ)`` to
high accuracy (the reference path); :func:`conservation_error` measures how far a law moved.

Explained in: book/01_conservation/01_gradient_flow.ipynb.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch
from scipy.integrate import solve_ivp

from flowlaws.conservation.flat_params import Params, flatten, unflatten
from flowlaws.conservation.losses import LawsFn, LossFn, gradient_and_loss

__all__ = [
    "Trajectory",
    "conservation_error",
    "gradient_flow",
]


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
