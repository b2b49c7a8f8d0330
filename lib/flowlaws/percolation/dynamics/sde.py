"""Stochastic gradient flow: Euler–Maruyama for an ensemble of trajectories at once.

The SDE is ``dθ = b(θ) dt + √η G(θ) dB`` with ``G Gᵀ = Σ``: a drift ``b`` (``−∇L`` for a
gradient flow) and a state-dependent noise factor ``G``. Every function works on an
*ensemble*: states have shape ``(n_runs, dim)`` and one step advances all runs with one
batch of tensor operations (no Python loop over seeds).

SGD on a two-layer network read as its SDE (:func:`sgd_sde`): the drift is the full-batch
gradient and ``Σ`` the mini-batch gradient covariance at the current point. Plain discrete SGD,
which it is compared against, is a loop over steps without noise terms:
:func:`flowlaws.percolation.dynamics.sgd.sgd_discrete`.

Divergence: a run whose state becomes NaN/inf or exceeds ``max_abs`` is frozen at NaN, its
step is recorded, and the other runs go on (:class:`SDEPath.diverged_at`).

Explained in: book/02_percolation/01_sde.ipynb.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from flowlaws.book.cache import stored_type
from flowlaws.common.checks import as_int, check_nonnegative, check_positive
from flowlaws.percolation.dynamics.ensemble import (
    TwoLayerShape,
    check_ensemble_inputs,
    forward_cache,
    weighted_grad,
)
from flowlaws.percolation.dynamics.loop import RecordedPath, run_ensemble

__all__ = [
    "ImplicitNoise",
    "Coefficients",
    "SDEPath",
    "euler_maruyama",
    "sgd_coefficients",
    "sgd_sde",
    "isotropic_noise",
]


@dataclass(frozen=True)
class ImplicitNoise:
    """A noise factor ``G`` ``(R, d, k)`` applied without being formed: ``apply(ξ) = G ξ``.

    ``k`` is the number of noise sources; ``apply`` maps ``ξ`` ``(R, k)`` to ``(R, d)``.
    """

    k: int
    apply: Callable[[torch.Tensor], torch.Tensor]


Coefficients = Callable[[torch.Tensor], tuple[torch.Tensor, "torch.Tensor | ImplicitNoise"]]


@stored_type
@dataclass
class SDEPath(RecordedPath):
    """An ensemble of recorded trajectories.

    Attributes:
        times: ``(T,)`` recorded times (``t = dt · step``).
        states: ``(T, n_runs, dim)`` states at those times (NaN after a run diverged).
        diverged_at: ``(n_runs,)`` int64, the step at which each run diverged, ``-1`` if never.
    """

    times: np.ndarray
    states: torch.Tensor
    diverged_at: torch.Tensor


def _noise(factor: torch.Tensor | ImplicitNoise, generator: torch.Generator,
           like: torch.Tensor) -> torch.Tensor:
    """``G ξ`` for a diagonal ``(R, d)``, a full ``(R, d, k)`` or an implicit factor."""
    if isinstance(factor, ImplicitNoise):
        xi = torch.randn((like.shape[0], factor.k), generator=generator, dtype=like.dtype,
                         device=like.device)
        return factor.apply(xi)
    shape = factor.shape if factor.dim() == 2 else (factor.shape[0], factor.shape[2])
    xi = torch.randn(shape, generator=generator, dtype=factor.dtype, device=factor.device)
    return factor * xi if factor.dim() == 2 else torch.einsum("rdk,rk->rd", factor, xi)


def euler_maruyama(
    coefficients: Coefficients,
    theta0: torch.Tensor,
    dt: float,
    n_steps: int,
    *,
    eta: float = 1.0,
    seed: int = 0,
    record_every: int = 1,
    max_abs: float = 1e6,
    absorb_below: float = 0.0,
    progress: str | None = None,
) -> SDEPath:
    """Euler–Maruyama ``θ ← θ + b(θ) dt + √(η dt) G(θ) ξ`` for all runs at once.

    Args:
        coefficients: ``θ (R, d) → (b, G)`` with ``b`` ``(R, d)`` and ``G`` either ``(R, d)``
            (diagonal noise), ``(R, d, k)`` (``Σ = G Gᵀ``, ``k`` noise sources) or an
            :class:`ImplicitNoise` (``G ξ`` computed without forming ``G``).
        theta0: ``(R, d)`` initial states (``R`` runs).
        dt: time step (> 0). eta: noise scale η (≥ 0; for SGD, the learning rate).
        seed: seeds the ``torch.Generator``; the same seed and ``R`` give the same paths.
        record_every: record every this many steps (the last step is always recorded).
        max_abs: a run with ``|θ| > max_abs`` anywhere counts as diverged (overflow).
        absorb_below: coordinates with ``|θ| < absorb_below`` are set to exactly 0; use a
            tiny value (1e-200) for multiplicative noise, to avoid slow subnormal floats.
        progress: a label to show a ``tqdm.auto`` bar over the steps (None: no bar); inside
            ``flowlaws.book.progress.report_to`` the steps are reported there instead.
    """
    check_positive(dt=dt)
    check_nonnegative(eta=eta, absorb_below=absorb_below)
    seed = as_int("seed", seed)
    generator = torch.Generator(device=theta0.device).manual_seed(seed)
    scale = math.sqrt(eta * dt)

    def advance(state: dict[str, torch.Tensor], step: int) -> dict[str, torch.Tensor]:
        theta = state["theta"]
        drift, factor = coefficients(theta)
        step_noise = scale * _noise(factor, generator, theta) if scale > 0 else 0.0
        theta = theta + drift * dt + step_noise
        if absorb_below > 0:
            theta = torch.where(theta.abs() < absorb_below, torch.zeros_like(theta), theta)
        return {"theta": theta}

    run = run_ensemble({"theta": theta0}, advance, n_steps, record_every=record_every,
                       max_abs=max_abs, progress=progress)
    return SDEPath(dt * run.steps.astype(float), run.states["theta"], run.diverged_at)


def sgd_coefficients(
    shape: TwoLayerShape, X: torch.Tensor, Y: torch.Tensor, batch_size: int
) -> Coefficients:
    """Drift ``−∇L`` and factor ``G = (g_n − ḡ)ᵀ / √(N B)`` (``(R, dim, N)``, implicit).

    ``G Gᵀ = Σ / B`` with ``Σ = (1/N) Σ_n (g_n − ḡ)(g_n − ḡ)ᵀ``: the covariance of a
    mini-batch gradient of ``B`` samples drawn with replacement. With ``dt = η = lr`` one
    Euler–Maruyama step has the mean ``−lr ∇L`` and covariance ``lr² Σ/B`` of an SGD step.
    ``G ξ = Σ_n (ξ_n − ξ̄) g_n / √(N B)`` is the gradient of a randomly reweighted loss, so
    neither ``G`` nor the per-sample gradients are ever formed (:class:`ImplicitNoise`).
    """
    batch_size = as_int("batch_size", batch_size, minimum=1)
    n = X.shape[0]
    norm = math.sqrt(n * batch_size)

    def coefficients(theta: torch.Tensor) -> tuple[torch.Tensor, ImplicitNoise]:
        cache = forward_cache(theta, shape, X, Y)
        uniform = torch.full((theta.shape[0], n), 1.0 / n, dtype=theta.dtype, device=theta.device)
        mean = weighted_grad(uniform, cache, X)

        def apply(xi: torch.Tensor) -> torch.Tensor:
            return weighted_grad((xi - xi.mean(dim=1, keepdim=True)) / norm, cache, X)

        return -mean, ImplicitNoise(n, apply)

    return coefficients


def sgd_sde(
    theta0: torch.Tensor, shape: TwoLayerShape, X: torch.Tensor, Y: torch.Tensor, *,
    lr: float, batch_size: int, n_steps: int, seed: int = 0, record_every: int = 1,
    max_abs: float = 1e6, progress: str | None = None,
) -> SDEPath:
    """SGD read as its SDE, integrated by Euler–Maruyama with ``dt = η = lr``.

    Shapes: ``theta0`` ``(R, dim)``, ``X`` ``(N, n_in)``, ``Y`` ``(N, n_out)``.
    """
    check_positive(lr=lr)
    check_ensemble_inputs(theta0, shape, X, Y)
    return euler_maruyama(sgd_coefficients(shape, X, Y, batch_size), theta0, lr, n_steps,
                          eta=lr, seed=seed, record_every=record_every, max_abs=max_abs,
                          progress=progress)


def isotropic_noise(coefficients: Coefficients, sigma: float) -> Coefficients:
    """The drift of ``coefficients`` with isotropic noise ``G = sigma · I`` (diagonal ``(R, d)``)
    in place of its own: a control whose noise, unlike SGD's, does not lie in the span of the
    per-sample gradients, so it leaves the invariant sets (identical or dead neurons).

    Explained in: book/02_percolation/01_sde.ipynb
    """
    check_nonnegative(sigma=sigma)

    def isotropic(theta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return coefficients(theta)[0], sigma * torch.ones_like(theta)

    return isotropic

