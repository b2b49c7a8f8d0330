"""Gradient flow and discrete optimisers on a model's parameters, with a record of the path.

Parameters travel as a ``dict[str, Tensor]`` (the model's ``named_parameters``), so the same
loss works for :func:`torch.func.functional_call`, the ODE solver and the discrete loops.

- :func:`gradient_flow` integrates ``dθ/dt = −∇L(θ)`` to high accuracy (the reference path);
- :func:`train` runs GD, mini-batch SGD, heavy-ball momentum, Adam or AdamW, recording the
  loss and any conservation laws at every step (:func:`gradient_descent` is its GD special case);
- :func:`one_step_change_quadratic` is the exact change of a quadratic law in one GD/SGD step.

Explained in: book/01_conservation/01_gradient_flow.ipynb (the flow) and
book/01_conservation/05_discrete_steps.ipynb (the discrete optimisers).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch
from scipy.integrate import solve_ivp
from torch import nn
from torch.func import functional_call
from torch.nn import functional as F

from flowlaws.progress import track

Params = dict[str, torch.Tensor]
LossFn = Callable[[Params], torch.Tensor]
LawsFn = Callable[[Params], dict[str, torch.Tensor]]
OPTIMIZERS = ("gd", "sgd", "momentum", "adam", "adamw")


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
        if X.shape[0] != Y.shape[0]:
            raise ValueError(
                f"X and Y need the same number of rows, got {X.shape[0]} and {Y.shape[0]}"
            )
        self.model, self.X, self.Y, self.criterion = model, X, Y, criterion
        self.n_samples = int(X.shape[0])

    def __call__(self, params: Params, index: torch.Tensor | None = None) -> torch.Tensor:
        X, Y = (self.X, self.Y) if index is None else (self.X[index], self.Y[index])
        return self.criterion(functional_call(self.model, params, (X,)), Y)


def _half_squared_error(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return 0.5 * (output - target).pow(2).sum() / output.shape[0]


def _token_cross_entropy(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(output.reshape(-1, output.shape[-1]), target.reshape(-1))


def mse_loss(model: nn.Module, X: torch.Tensor, Y: torch.Tensor) -> DatasetLoss:
    """``L(θ) = (1/2N) Σ_n ‖f(θ, x_n) − y_n‖²`` as a function of the parameter dict.

    Shapes: ``X`` is ``(N, ...)`` (the model's input), ``Y`` matches the model's output.
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
    y0, layout = _flatten(params0)

    def rhs(_t: float, y: np.ndarray) -> np.ndarray:
        g, _ = gradient_and_loss(loss_fn, _unflatten(y, layout))
        return -torch.cat([v.reshape(-1) for v in g.values()]).numpy()

    sol = solve_ivp(rhs, (0.0, t_eval[-1]), y0, t_eval=t_eval, rtol=rtol, atol=atol, method=method)
    if not sol.success:
        raise RuntimeError(f"solve_ivp failed: {sol.message}")
    states = [_unflatten(y, layout) for y in sol.y.T]
    params = {name: torch.stack([s[name] for s in states]) for name, _ in layout}
    with torch.no_grad():
        losses = np.array([float(loss_fn(s)) for s in states])
    return Trajectory(
        sol.t, params, losses, _stack_laws(laws, states), optimizer="flow",
        param_sq_norm0=_sq_norm(params0),
    )


# ---------------------------------------------------------------------------------------------
# Discrete optimisers: one small, explicit update rule each.
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Hyper:
    lr: float
    momentum: float
    betas: tuple[float, float]
    eps: float
    weight_decay: float


def _sgd_update(params: Params, grads: Params, state: dict, k: int, hp: _Hyper) -> Params:
    """``θ ← θ − lr (g + λθ)``: GD on the full batch, SGD on a mini-batch."""
    return {n: p - hp.lr * (grads[n] + hp.weight_decay * p) for n, p in params.items()}


def _momentum_update(params: Params, grads: Params, state: dict, k: int, hp: _Hyper) -> Params:
    """Heavy ball, as ``torch.optim.SGD(momentum=μ)``: ``v ← μv + g + λθ``, ``θ ← θ − lr v``."""
    out = {}
    for n, p in params.items():
        state[n] = hp.momentum * state.get(n, 0.0) + grads[n] + hp.weight_decay * p
        out[n] = p - hp.lr * state[n]
    return out


def _adam_update(
    params: Params, grads: Params, state: dict, k: int, hp: _Hyper, decoupled: bool = False
) -> Params:
    """Adam with bias correction; L2 decay in the gradient, or AdamW's decoupled ``−lr·λ·θ``."""
    b1, b2 = hp.betas
    out = {}
    for n, p in params.items():
        g = grads[n] if decoupled else grads[n] + hp.weight_decay * p
        m, v = state.get(n, (0.0, 0.0))
        m, v = b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * g * g
        state[n] = (m, v)
        step = hp.lr * (m / (1 - b1 ** (k + 1))) / ((v / (1 - b2 ** (k + 1))).sqrt() + hp.eps)
        out[n] = p - step - (hp.lr * hp.weight_decay * p if decoupled else 0.0)
    return out


def _adamw_update(params: Params, grads: Params, state: dict, k: int, hp: _Hyper) -> Params:
    return _adam_update(params, grads, state, k, hp, decoupled=True)


_UPDATES = {
    "gd": _sgd_update,
    "sgd": _sgd_update,
    "momentum": _momentum_update,
    "adam": _adam_update,
    "adamw": _adamw_update,
}


def check_run_args(
    optimizer: str, lr: float, n_steps: int, record_every: int,
    allowed: tuple[str, ...] = OPTIMIZERS,
) -> None:
    """Refuse an unknown optimizer, a non-positive or non-finite ``lr``, or empty runs."""
    if optimizer not in allowed:
        raise ValueError(f"optimizer must be one of {allowed}, got {optimizer!r}")
    if not (lr > 0 and math.isfinite(lr)):
        raise ValueError(f"lr must be positive, got {lr!r}")
    if n_steps < 1 or record_every < 1:
        raise ValueError("n_steps and record_every must be positive")


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
    n = getattr(loss_fn, "n_samples", None)
    if n is None:
        raise ValueError("mini-batches need a loss with n_samples, e.g. flowlaws.flow.mse_loss")
    if not 1 <= batch_size <= n:
        raise ValueError(f"batch_size must be in [1, {n}], got {batch_size}")
    generator = torch.Generator().manual_seed(seed)
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

    The update rules are written out as plain tensor arithmetic on the parameter dict
    (``_sgd_update``, ``_momentum_update``, ``_adam_update``) rather than ``torch.optim``:
    ``torch.optim`` mutates leaf tensors in place and hides its state, while the book wants
    the update visible in one line, the parameters as a dict that :mod:`torch.func` and the
    ODE solver share, and the same function for every optimiser. The rules match
    ``torch.optim.SGD`` (with ``momentum``), ``Adam`` and ``AdamW`` (the tests check this).

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
    hyper = _Hyper(lr, momentum, betas, eps, weight_decay)
    update, state = _UPDATES[optimizer], {}
    recorder = _Recorder(laws, laws is None if record_params is None else record_params)
    for step in track(range(n_steps + 1), enabled=progress, desc=f"{optimizer} lr={lr:g}"):
        g, loss = gradient_and_loss(loss_fn, params, draw())
        loss_value = float(loss)
        if not math.isfinite(loss_value):
            raise DivergenceError(step, lr, loss_value)
        if step % record_every == 0 or step == n_steps:
            recorder.add(step, params, loss_value)
        if step < n_steps:
            params = update(params, g, state, step, hyper)
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


# ---------------------------------------------------------------------------------------------
# The exact one-step change of a quadratic law.
# ---------------------------------------------------------------------------------------------


def one_step_change_quadratic(
    law: Callable[[Params], torch.Tensor],
    grads: Params,
    lr: float,
    *,
    params: Params | None = None,
    weight_decay: float = 0.0,
) -> torch.Tensor:
    """The exact change ``h(θ_1) − h(θ_0)`` of a quadratic law in one GD or SGD step.

    Let ``h(θ) = B(θ, θ)`` with ``B`` symmetric bilinear (``UᵀU − VVᵀ``, ``QᵢᵀQᵢ − KᵢᵀKᵢ``,
    ``‖A_i‖² − ‖C_i‖²`` ...). That ``h`` is conserved by the flow for every data set means
    ``B(θ, g) = 0`` for the gradient ``g`` of the loss (of any batch). Then the step
    ``θ_1 = θ_0 − τ g`` gives, with no remainder,

        ``h(θ_1) = h(θ_0) − 2τ B(θ_0, g) + τ² B(g, g) = h(θ_0) + τ² h(g)``,

    so each step moves the law by exactly ``τ² h(g_k)`` and ``h(θ_k) − h(θ_0) = τ² Σ_j h(g_j)``.
    With L2 weight decay ``θ_1 = (1 − τλ)θ_0 − τg`` and the change is
    ``((1 − τλ)² − 1) h(θ_0) + τ² h(g)``, first order in ``τ``: decay does not conserve ``h``.

    Args:
        law: ``θ -> h(θ)``, applied to the gradient dict as if it were parameters.
        grads: ``∇L(θ_0)`` with the same keys as the parameters (without the decay term).
        params: ``θ_0``, needed only when ``weight_decay`` is not zero.

    Explained in: book/01_conservation/05_discrete_steps.ipynb.
    """
    change = lr**2 * law(grads)
    if weight_decay:
        if params is None:
            raise ValueError("weight_decay needs params, the point θ_0 the step starts from")
        change = change + ((1 - lr * weight_decay) ** 2 - 1) * law(params)
    return change


def one_step_change_two_layer(
    grads: Params, lr: float, *, u: str = "U.weight", v: str = "V.weight"
) -> torch.Tensor:
    """``τ² (G_Uᵀ G_U − G_V G_Vᵀ)``, the exact one-step change of ``UᵀU − VVᵀ`` for ``f = U V x``.

    Shapes (PyTorch's ``out x in``): ``G_U`` is ``(n_out, width)``, ``G_V`` is
    ``(width, n_in)``; the result is ``(width, width)``. Holds for any loss of the product
    ``UV`` (linear :class:`~flowlaws.models.TwoLayer` without biases), full or mini-batch,
    because ``G_U = E Vᵀ`` and ``G_V = Uᵀ E`` with ``E = ∂L/∂(UV)`` make the first-order
    terms ``UᵀG_U + G_UᵀU`` and ``G_V Vᵀ + V G_Vᵀ`` equal.

    Explained in: book/01_conservation/05_discrete_steps.ipynb.
    """
    G_U, G_V = grads[u], grads[v]
    return lr**2 * (G_U.T @ G_U - G_V @ G_V.T)
