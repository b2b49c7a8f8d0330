"""Gradient flow and gradient descent on a model's parameters, with a record of the path.

Parameters travel as a ``dict[str, Tensor]`` (the model's ``named_parameters``), so the same
loss works for :func:`torch.func.functional_call`, the ODE solver and the discrete loops.

Explained in: book/01_conservation/01_gradient_flow.ipynb.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from scipy.integrate import solve_ivp
from torch import nn
from torch.func import functional_call, grad

Params = dict[str, torch.Tensor]
LossFn = Callable[[Params], torch.Tensor]


class DivergenceError(RuntimeError):
    """A discrete run produced a NaN or infinite loss; carries the step and the step size."""

    def __init__(self, step: int, lr: float, loss: float) -> None:
        super().__init__(
            f"training diverged at step {step} with lr={lr:g} (loss={loss}); "
            "lower the learning rate or shorten the run"
        )
        self.step, self.lr, self.loss = step, lr, loss


def parameters_of(model: nn.Module) -> Params:
    """A detached copy of the model's parameters, keyed by their names."""
    return {name: p.detach().clone() for name, p in model.named_parameters()}


def mse_loss(model: nn.Module, X: torch.Tensor, Y: torch.Tensor) -> LossFn:
    """``L(θ) = (1/2N) Σ_n ‖f(θ, x_n) − y_n‖²`` as a function of the parameter dict.

    Shapes: ``X`` is ``(N, ...)`` (the model's input), ``Y`` matches the model's output.
    """
    if X.shape[0] != Y.shape[0]:
        raise ValueError(f"X and Y need the same number of rows, got {X.shape[0]} and {Y.shape[0]}")

    def loss(params: Params) -> torch.Tensor:
        residual = functional_call(model, params, (X,)) - Y
        return 0.5 * residual.pow(2).sum() / X.shape[0]

    return loss


@dataclass
class Trajectory:
    """A recorded optimisation path.

    Attributes:
        times: ``(T,)`` continuous times; a discrete run with step ``lr`` records ``t = lr·k``.
        params: name → ``(T, *shape)`` tensor of the parameters at those times.
        losses: ``(T,)`` loss values.
    """

    times: np.ndarray
    params: dict[str, torch.Tensor]
    losses: np.ndarray

    def __len__(self) -> int:
        return len(self.times)

    def at(self, index: int) -> Params:
        """The parameter dict at recorded time ``index``."""
        return {name: value[index] for name, value in self.params.items()}

    def map(self, fn: Callable[[Params], torch.Tensor]) -> torch.Tensor:
        """Evaluate ``fn`` at every recorded time; the result is stacked as ``(T, ...)``."""
        return torch.stack([fn(self.at(i)) for i in range(len(self))])


def conservation_error(trajectory: Trajectory, law: Callable[[Params], torch.Tensor]) -> np.ndarray:
    """``‖h(θ_t) − h(θ_0)‖_F / ‖θ_0‖²`` at every recorded time, shape ``(T,)``.

    Quadratic laws scale like ``‖θ‖²``, so dividing by it makes the error dimensionless
    and comparable across initialisation scales (``h(θ_0)`` itself may be zero).
    """
    values = trajectory.map(law).flatten(1)
    scale = sum(v.pow(2).sum() for v in trajectory.at(0).values())
    return ((values - values[0]).norm(dim=1) / scale).cpu().numpy()


def _flatten(params: Params) -> tuple[np.ndarray, list[tuple[str, torch.Size]]]:
    layout = [(name, value.shape) for name, value in params.items()]
    flat = torch.cat([value.detach().reshape(-1).double().cpu() for value in params.values()])
    return flat.numpy(), layout


def _unflatten(flat: np.ndarray | torch.Tensor, layout: list[tuple[str, torch.Size]]) -> Params:
    flat = torch.as_tensor(flat, dtype=torch.float64)
    out, start = {}, 0
    for name, shape in layout:
        size = int(np.prod(shape)) if len(shape) else 1
        out[name] = flat[start : start + size].reshape(shape)
        start += size
    return out


def gradient_flow(
    loss_fn: LossFn,
    params0: Params,
    t_eval: np.ndarray,
    *,
    rtol: float = 1e-11,
    atol: float = 1e-13,
    method: str = "DOP853",
) -> Trajectory:
    """Integrate ``dθ/dt = −∇L(θ)`` with :func:`scipy.integrate.solve_ivp`, in float64 on the CPU.

    Args:
        t_eval: ``(T,)`` increasing times at which to record the state, starting at 0.
        rtol, atol: the solver's tolerances; the defaults keep quadratic laws to ~1e-10.
        method: any explicit ``solve_ivp`` method; DOP853 (8th order) is the default.
    """
    t_eval = np.asarray(t_eval, dtype=float)
    if t_eval.ndim != 1 or t_eval[0] != 0 or np.any(np.diff(t_eval) <= 0):
        raise ValueError("t_eval must be a 1-D increasing array that starts at 0")
    y0, layout = _flatten(params0)
    gradient = grad(loss_fn)

    def rhs(_t: float, y: np.ndarray) -> np.ndarray:
        g = gradient(_unflatten(y, layout))
        return -torch.cat([v.reshape(-1) for v in g.values()]).numpy()

    sol = solve_ivp(rhs, (0.0, t_eval[-1]), y0, t_eval=t_eval, rtol=rtol, atol=atol, method=method)
    if not sol.success:
        raise RuntimeError(f"solve_ivp failed: {sol.message}")
    states = [_unflatten(y, layout) for y in sol.y.T]
    params = {name: torch.stack([s[name] for s in states]) for name, _ in layout}
    losses = np.array([float(loss_fn(s)) for s in states])
    return Trajectory(sol.t, params, losses)


def gradient_descent(
    loss_fn: LossFn, params0: Params, lr: float, n_steps: int, *, record_every: int = 1
) -> Trajectory:
    """Full-batch gradient descent ``θ_{k+1} = θ_k − lr ∇L(θ_k)``, recorded every few steps.

    Raises:
        DivergenceError: as soon as the loss is NaN or infinite, naming the step and ``lr``.
    """
    if not lr > 0:
        raise ValueError(f"lr must be positive, got {lr!r}")
    if n_steps < 1 or record_every < 1:
        raise ValueError("n_steps and record_every must be positive")
    gradient_and_loss = torch.func.grad_and_value(loss_fn)
    params = {name: value.detach().clone() for name, value in params0.items()}
    steps, records, losses = [], [], []
    for step in range(n_steps + 1):
        g, loss = gradient_and_loss(params)
        if not torch.isfinite(loss):
            raise DivergenceError(step, lr, float(loss))
        if step % record_every == 0 or step == n_steps:
            steps.append(step)
            records.append({k: v.clone() for k, v in params.items()})
            losses.append(float(loss))
        if step < n_steps:
            params = {k: params[k] - lr * g[k] for k in params}
    stacked = {k: torch.stack([r[k] for r in records]) for k in params}
    return Trajectory(lr * np.asarray(steps, dtype=float), stacked, np.asarray(losses))
