"""Adam and AdamW on an ensemble of two-layer networks, with heavy-tailed gradient noise.

The optimizers act on the *joint state* ``(θ, m, v)``: parameters, first moments and second
moments, each ``(n_runs, dim)``. One step (Kingma & Ba; Loshchilov & Hutter for AdamW)::

    g ← ĝ(θ) (+ wd·θ for "adam" with L2 decay)
    m ← β₁ m + (1 − β₁) g,     v ← β₂ v + (1 − β₂) g²
    θ ← θ − lr · m̂ / (√v̂ + ε) (− lr·wd·θ for "adamw"),  m̂ = m/(1 − β₁ᵏ), v̂ = v/(1 − β₂ᵏ)

and ``"sgd"`` is ``θ ← θ − lr ĝ`` (``m``, ``v`` unused), so the three share one noise model.

**Gradient noise.** ``ĝ(θ) = Σ_n w_n ∇ℓ_n(θ)`` with random weights
``w_n = 1/N + (ξ_n − ξ̄)/√(N B)``: for Gaussian ``ξ`` this has the mean ``∇L`` and the covariance
``Σ/B`` of a mini-batch gradient of ``B`` samples (as
:func:`flowlaws.percolation.dynamics.sde.sgd_coefficients`).
Heavy tails: ``ξ_n`` is symmetric α-stable (:func:`stable_noise`, scaled so that ``α = 2`` is
``N(0, 1)``; ``α < 2`` has infinite variance), then *truncated* at ``±truncation``
(:func:`truncate`), which restores finite moments of every order. Because the noise is a
reweighting of per-sample gradients, it lies in their span: two identical neurons receive
identical noisy gradients, so the invariant sets of SGD (identical or dead neurons) stay
invariant, for the joint state ``(θ, m, v)`` — the moments of two neurons must agree too.

Explained in: book/02_percolation/06_adaptive.ipynb.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from flowlaws.book.cache import stored_type
from flowlaws.common.checks import (
    as_betas,
    as_float,
    as_int,
    check_decoupled_decay,
    check_nonnegative,
    check_positive,
)
from flowlaws.common.optim import UpdateRule, check_run_args
from flowlaws.percolation.dynamics.ensemble import (
    TwoLayerShape,
    check_ensemble_inputs,
    forward_cache,
    split_params,
    weighted_grad,
)
from flowlaws.percolation.dynamics.loop import divergence_report, run_ensemble
from flowlaws.percolation.topology.clusters import neuron_vectors

__all__ = [
    "OPTIMIZERS",
    "stable_noise",
    "run_generators",
    "truncate",
    "noisy_gradient",
    "AdaptivePath",
    "train_ensemble",
    "joint_neuron_vectors",
]


OPTIMIZERS = ("sgd", "adam", "adamw")


def stable_noise(shape: tuple[int, ...], alpha: float,
                 generator: torch.Generator | list[torch.Generator], *,
                 dtype: torch.dtype = torch.float32, device: torch.device | str = "cpu"
                 ) -> torch.Tensor:
    """Symmetric α-stable samples (Chambers–Mallows–Stuck), divided by √2.

    ``X = sin(αU)/cos(U)^{1/α} · (cos((1−α)U)/W)^{(1−α)/α}``, ``U ~ U(−π/2, π/2)``,
    ``W ~ Exp(1)``. At ``α = 2`` this is ``N(0, 2)``, so the result is ``N(0, 1)``; ``α = 1`` is a
    Cauchy law of scale ``1/√2``. Tails ``P(|X| > x) ∝ x^{−α}`` for ``α < 2``. ``0 < α ≤ 2``.
    """
    if not 0 < alpha <= 2:
        raise ValueError(f"alpha must lie in (0, 2], got {alpha}")
    u = (_uniform(shape, generator) - 0.5) * math.pi
    w = -torch.log1p(-_uniform(shape, generator))
    if alpha == 1:
        x = torch.tan(u)
    else:
        x = (torch.sin(alpha * u) / torch.cos(u) ** (1 / alpha)
             * (torch.cos((1 - alpha) * u) / w) ** ((1 - alpha) / alpha))
    return (x / math.sqrt(2.0)).to(dtype=dtype, device=device)


def run_generators(seeds: Sequence[int], device: torch.device | str = "cpu"
                   ) -> list[torch.Generator]:
    """One generator per run, seeded by ``seeds``: the noise of run ``r`` then depends on
    ``seeds[r]`` alone, so an ensemble split into chunks of runs
    (:mod:`flowlaws.common.chunks`) draws the same noise as one batch."""
    return [torch.Generator(device=device).manual_seed(int(s)) for s in seeds]


def _uniform(shape: tuple[int, ...], generator: torch.Generator | list[torch.Generator]
             ) -> torch.Tensor:
    """Float64 ``U(0, 1)`` of ``shape``: from one generator, or row ``r`` from
    ``generator[r]`` (one per run, :func:`run_generators`)."""
    if isinstance(generator, torch.Generator):
        return torch.rand(shape, generator=generator, dtype=torch.float64,
                          device=generator.device)
    if len(generator) != shape[0]:
        raise ValueError(f"{len(generator)} run generators for {shape[0]} runs")
    return torch.stack([torch.rand(shape[1:], generator=g, dtype=torch.float64,
                                   device=g.device) for g in generator])


def truncate(xi: torch.Tensor, level: float) -> torch.Tensor:
    """Clip every entry to ``[−level, level]`` (``level = inf`` leaves ``xi`` unchanged)."""
    if not level > 0:
        raise ValueError(f"truncation level must be positive, got {level}")
    return xi if math.isinf(level) else xi.clamp(-level, level)


def noisy_gradient(theta: torch.Tensor, shape: TwoLayerShape, X: torch.Tensor, Y: torch.Tensor,
                   *, batch_size: int | None, alpha: float, truncation: float,
                   generator: torch.Generator | list[torch.Generator]) -> torch.Tensor:
    """``(R, dim)`` the reweighted gradient ``Σ_n w_n ∇ℓ_n`` of the module docstring.

    ``batch_size=None`` gives the exact full-batch gradient ``∇L`` (no noise).
    """
    R, n = theta.shape[0], X.shape[0]
    weights = torch.full((R, n), 1.0 / n, dtype=theta.dtype, device=theta.device)
    if batch_size is not None:
        xi = truncate(stable_noise((R, n), alpha, generator, dtype=theta.dtype,
                                   device=theta.device), truncation)
        weights = weights + (xi - xi.mean(dim=1, keepdim=True)) / math.sqrt(n * batch_size)
    return weighted_grad(weights, forward_cache(theta, shape, X, Y), X)


@stored_type
@dataclass
class AdaptivePath:
    """Recorded joint states: ``steps`` ``(T,)`` int64 step numbers, ``theta``, ``m``, ``v``
    ``(T, R, dim)`` (NaN after a run diverged), ``diverged_at`` ``(R,)`` (``-1``: never), and
    the step size ``lr`` (``times`` is ``lr · steps``, for a plot against training time)."""

    steps: np.ndarray
    theta: torch.Tensor
    m: torch.Tensor
    v: torch.Tensor
    diverged_at: torch.Tensor
    lr: float

    @property
    def times(self) -> np.ndarray:
        """``(T,)`` training time ``lr · step`` at every record."""
        return self.lr * self.steps.astype(float)

    @property
    def final(self) -> torch.Tensor:
        """``(R, dim)`` the last recorded parameters."""
        return self.theta[-1]

    def divergence_report(self, lr: float | None = None) -> str:
        """One line naming the diverged runs and their steps (or saying that none did)."""
        return divergence_report(self.diverged_at, lr)


def train_ensemble(
    theta0: torch.Tensor, shape: TwoLayerShape, X: torch.Tensor, Y: torch.Tensor, *,
    optimizer: str = "adam", lr: float, n_steps: int, batch_size: int | None = 4,
    alpha: float = 2.0, truncation: float = math.inf, betas: tuple[float, float] = (0.9, 0.999),
    eps: float = 1e-8, weight_decay: float = 0.0, seed: int | Sequence[int] = 0,
    record_every: int = 1,
    max_abs: float = 1e6, m0: torch.Tensor | None = None, v0: torch.Tensor | None = None,
    progress: str | None = None,
) -> AdaptivePath:
    """SGD, Adam or AdamW with (heavy-tailed) reweighted-gradient noise, all runs at once.

    Args:
        theta0: ``(R, dim)`` initial parameters; ``m0``, ``v0`` initial moments (default 0).
        optimizer: ``"sgd"``, ``"adam"`` (``weight_decay`` as an L2 term in the gradient) or
            ``"adamw"`` (decoupled decay ``θ ← θ − lr·wd·θ``).
        batch_size: the equivalent mini-batch size ``B`` of the noise; ``None``: no noise.
        alpha, truncation: tail index of ``ξ`` and its clipping level (module docstring).
        seed: seeds the noise; the same arguments give the same paths. A list of ``R`` ints:
            one seed per run (:func:`run_generators`), so run ``r``'s noise depends on
            ``seed[r]`` alone and a split ensemble draws the same paths.
        progress: a label to show a ``tqdm.auto`` progress bar over the steps (None: no bar).

    Settings that cannot train (``batch_size=0``, ``betas`` outside ``[0, 1)``, ``eps ≤ 0``,
    ``alpha`` outside ``(0, 2]``, NaN anywhere, shapes that do not match ``shape``, AdamW with
    ``lr · weight_decay ≥ 1``, whose decay zeroes or flips the weights) are refused
    before the first step with an error naming the argument, instead of every run being
    marked diverged at step 1.
    """
    check_run_args(optimizer, lr, n_steps, record_every, allowed=OPTIMIZERS)
    if optimizer == "adamw":  # decoupled decay: refuse a factor 1 − lr·wd that zeroes or flips
        check_decoupled_decay(lr, weight_decay)
    batch_size, seed = _check_settings(theta0, shape, X, Y, batch_size=batch_size, alpha=alpha,
                                       truncation=truncation, betas=betas, eps=eps,
                                       weight_decay=weight_decay, seed=seed, m0=m0, v0=v0)
    gen = (torch.Generator(device=theta0.device).manual_seed(seed) if isinstance(seed, int)
           else run_generators(seed, theta0.device))
    rule = UpdateRule(optimizer, lr, betas=betas, eps=eps, weight_decay=weight_decay)
    zeros = torch.zeros_like(theta0)
    state0 = {"theta": theta0, "m": zeros if m0 is None else m0, "v": zeros if v0 is None else v0}

    def advance(state: dict[str, torch.Tensor], k: int) -> dict[str, torch.Tensor]:
        g = noisy_gradient(state["theta"], shape, X, Y, batch_size=batch_size, alpha=alpha,
                           truncation=truncation, generator=gen)
        moments = {"m": state["m"], "v": state["v"]}
        theta = rule.step(state["theta"], g, moments, k)
        return {"theta": theta, **moments}

    run = run_ensemble(state0, advance, n_steps, record_every=record_every, max_abs=max_abs,
                       progress=progress)
    return AdaptivePath(run.steps, run.states["theta"], run.states["m"], run.states["v"],
                        run.diverged_at, float(lr))


def _check_settings(theta0: torch.Tensor, shape: TwoLayerShape, X: torch.Tensor,
                    Y: torch.Tensor, *, batch_size: int | None, alpha: float, truncation: float,
                    betas: tuple[float, float], eps: float, weight_decay: float,
                    seed: int | Sequence[int],
                    m0: torch.Tensor | None, v0: torch.Tensor | None) -> tuple[int | None, int]:
    """Refuse what :func:`train_ensemble` cannot train; returns ``batch_size`` and ``seed``."""
    if batch_size is not None:
        batch_size = as_int("batch_size", batch_size, minimum=1)
    alpha = as_float("alpha", alpha, positive=True)
    if alpha > 2:
        raise ValueError(f"alpha must lie in (0, 2], got {alpha:g}")
    as_float("truncation", truncation, positive=True, finite=False)
    as_betas("betas", betas)
    check_positive(eps=eps)
    check_nonnegative(weight_decay=weight_decay)
    check_ensemble_inputs(theta0, shape, X, Y)
    for name, moment in (("m0", m0), ("v0", v0)):
        got = getattr(moment, "shape", moment)
        if moment is not None and (not isinstance(moment, torch.Tensor) or got != theta0.shape):
            raise ValueError(f"{name} must have theta0's shape {tuple(theta0.shape)}, got {got}")
    if v0 is not None and not bool((v0 >= 0).all()):
        raise ValueError("v0 (second moments) must be non-negative and not NaN")
    if isinstance(seed, Sequence):
        if len(seed) != theta0.shape[0]:
            raise ValueError(f"seed holds {len(seed)} per-run seeds for {theta0.shape[0]} runs")
        return batch_size, [as_int("seed", s) for s in seed]
    return batch_size, as_int("seed", seed)


def joint_neuron_vectors(theta: torch.Tensor, m: torch.Tensor, v: torch.Tensor,
                         shape: TwoLayerShape) -> torch.Tensor:
    """``(..., width, 3(n_in + n_out))``: each neuron's parameters, then its ``m``, then ``v``.

    Two neurons sit on the joint invariant set of Adam exactly when these rows coincide.
    """
    rows = [neuron_vectors(*split_params(t.reshape(-1, shape.dim), shape)) for t in (theta, m, v)]
    return torch.cat(rows, dim=-1).reshape(*theta.shape[:-1], shape.width, -1)
