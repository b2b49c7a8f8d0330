"""Plain full-batch gradient descent on ensembles of two-layer networks: a loop over steps.

:func:`gd_discrete` is ``θ ← θ − lr ∇L(θ)`` with the gradient of the whole data set, for every
run at once, stepped by :func:`flowlaws.percolation.dynamics.loop.run_ensemble`; its record
counts *steps* (an :class:`~flowlaws.percolation.dynamics.sgd.SGDPath`), never times
``lr · step``. It is the deterministic limit of the book's SGD: where a chapter needs no noise
at all it runs this loop, not Euler–Maruyama fed a zero noise
(:func:`flowlaws.percolation.dynamics.sde.euler_maruyama` with ``eta = 0`` computes the same
states to the bit, with a noise factor built and discarded at every step). Mini-batch SGD,
whose batches are drawn with replacement and so never equal the full batch, is
:func:`flowlaws.percolation.dynamics.sgd.sgd_discrete`.

Explained in: book/02_percolation/04_percolation.ipynb (the symmetric orbit under gradient
descent).
"""

from __future__ import annotations

import torch

from flowlaws.common.checks import check_positive
from flowlaws.percolation.dynamics.ensemble import (
    TwoLayerShape,
    check_ensemble_inputs,
    forward_cache,
    weighted_grad,
)
from flowlaws.percolation.dynamics.loop import run_ensemble
from flowlaws.percolation.dynamics.sgd import SGDPath

__all__ = ["gd_discrete"]


def gd_discrete(
    theta0: torch.Tensor, shape: TwoLayerShape, X: torch.Tensor, Y: torch.Tensor, *,
    lr: float, n_steps: int, record_every: int = 1, max_abs: float = 1e6,
    progress: str | None = None,
) -> SGDPath:
    """Full-batch gradient descent ``θ ← θ − lr ∇L(θ)`` for all runs at once.

    ``L`` is the mean squared loss over all ``N`` rows of ``(X, Y)`` (the loss of
    :func:`~flowlaws.percolation.dynamics.ensemble.ensemble_loss`), so the step is the same for
    every run and draws no random numbers. Divergence is handled by
    :func:`~flowlaws.percolation.dynamics.loop.run_ensemble` (a run that leaves ``max_abs`` is
    frozen at NaN and its step recorded). Shapes: ``theta0`` ``(R, dim)``, ``X``
    ``(N, n_in)``, ``Y`` ``(N, n_out)``; ``lr`` is the step size (> 0, no unit: the time of
    the gradient flow that GD approximates is ``lr · step``). The record counts steps
    (:class:`~flowlaws.percolation.dynamics.sgd.SGDPath`: ``steps`` ``(T,)``, ``states``
    ``(T, R, dim)``).

    Explained in: book/02_percolation/04_percolation.ipynb
    """
    check_positive(lr=lr)
    check_ensemble_inputs(theta0, shape, X, Y)
    n = X.shape[0]

    def advance(state: dict[str, torch.Tensor], step: int) -> dict[str, torch.Tensor]:
        theta = state["theta"]
        uniform = torch.full((theta.shape[0], n), 1.0 / n, dtype=theta.dtype,
                             device=theta.device)
        grad = weighted_grad(uniform, forward_cache(theta, shape, X, Y), X)
        return {"theta": theta - lr * grad}

    run = run_ensemble({"theta": theta0}, advance, n_steps, record_every=record_every,
                       max_abs=max_abs, progress=progress)
    return SGDPath(run.steps, run.states["theta"], run.diverged_at)
