"""The one loop that advances an ensemble of runs: recording, divergence, progress.

Every Part II training loop over an ensemble — Euler–Maruyama for an SDE and plain SGD
(:mod:`flowlaws.percolation.dynamics.sde`), SGD/Adam/AdamW with heavy-tailed noise
(:mod:`flowlaws.percolation.dynamics.adaptive`) — is this loop with its own ``advance`` function.
The
state is a dict of ``(n_runs, dim)`` tensors whose ``"theta"`` entry holds the parameters; an
optimiser adds its moments beside it.

Divergence, at any precision: after every step a run whose ``theta`` holds a NaN/inf, or an
entry above ``max_abs`` (1e6 by default) times ``max(1, max|θ_0|)`` of that run -- a
threshold relative to its start, so a float64 run that grows to 1e12 without overflowing is
caught as surely as a float32 one -- is frozen at NaN, its step is recorded in
``diverged_at``, and the other runs go on; a diverged run is never reported as finished.
No run is dropped or replaced: callers see the NaN and report it (the order parameter
:func:`flowlaws.percolation.topology.clusters.cmax` is NaN for such a run).

Explained in: book/02_percolation/01_sde.ipynb.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from flowlaws.book.cache import stored_type
from flowlaws.book.progress import track
from flowlaws.common.checks import check_positive, check_positive_ints

__all__ = ["EnsembleRecord", "RecordedPath", "run_ensemble", "divergence_report"]

State = dict[str, torch.Tensor]


@stored_type
@dataclass
class EnsembleRecord:
    """What :func:`run_ensemble` recorded.

    Attributes:
        steps: ``(T,)`` the recorded step numbers (0 first, ``n_steps`` last).
        states: name → ``(T, n_runs, ...)`` the state at those steps (NaN after divergence).
        diverged_at: ``(n_runs,)`` int64, the step at which each run diverged, ``-1`` if never.
    """

    steps: np.ndarray
    states: dict[str, torch.Tensor]
    diverged_at: torch.Tensor


def _freeze_diverged(state: State, diverged_at: torch.Tensor, step: int,
                     limit: torch.Tensor) -> None:
    theta = state["theta"]
    bad = ~torch.isfinite(theta).all(dim=1) | (theta.abs().amax(dim=1) > limit)
    diverged_at[bad & (diverged_at < 0)] = step
    theta[bad] = float("nan")


def run_ensemble(
    state0: State,
    advance: Callable[[State, int], State],
    n_steps: int,
    *,
    record_every: int = 1,
    max_abs: float = 1e6,
    progress: str | None = None,
) -> EnsembleRecord:
    """Apply ``advance(state, step)`` for ``step = 1 … n_steps`` and record every few steps.

    Args:
        state0: name → ``(n_runs, ...)`` tensors; ``"theta"`` (``(n_runs, dim)``) is required.
        advance: the new state from the state after ``step − 1`` steps (a new dict).
        record_every: record every this many steps (step 0 and the last step always).
        max_abs: a run with ``|θ| > max_abs · max(1, max|θ_0|)`` anywhere (its own start)
            counts as diverged.
        progress: a label to show a progress bar over the steps (None: no bar); inside
            :func:`flowlaws.book.progress.report_to` the steps are reported there instead.
    """
    check_positive(max_abs=max_abs)
    check_positive_ints(n_steps=n_steps, record_every=record_every)
    n_steps, record_every = int(n_steps), int(record_every)  # np.int64 counts too
    if "theta" not in state0:
        raise KeyError("the ensemble state needs a 'theta' entry (the parameters)")
    state = {k: v.detach().clone() for k, v in state0.items()}
    n_runs = state["theta"].shape[0]
    diverged_at = torch.full((n_runs,), -1, dtype=torch.int64, device=state["theta"].device)
    theta0 = state["theta"]
    start = theta0.abs().amax(dim=1) if theta0.shape[1] else theta0.new_zeros(n_runs)
    limit = max_abs * torch.where(torch.isfinite(start), start, 0.0).clamp(min=1.0)
    steps, records = [0], [{k: v.clone() for k, v in state.items()}]
    for step in track(range(1, n_steps + 1), desc=progress, enabled=progress is not None):
        state = advance(state, step)
        _freeze_diverged(state, diverged_at, step, limit)
        if step % record_every == 0 or step == n_steps:
            steps.append(step)
            records.append({k: v.clone() for k, v in state.items()})
    stacked = {k: torch.stack([r[k] for r in records]) for k in state}
    return EnsembleRecord(np.asarray(steps), stacked, diverged_at.cpu())


def divergence_report(diverged_at: torch.Tensor, lr: float | None = None) -> str:
    """One line naming the diverged runs and their steps (or saying that none did)."""
    bad = torch.nonzero(diverged_at >= 0).flatten().tolist()
    if not bad:
        return f"all {len(diverged_at)} runs stayed finite"
    detail = ", ".join(f"run {r} at step {int(diverged_at[r])}" for r in bad[:10])
    more = f" (and {len(bad) - 10} more)" if len(bad) > 10 else ""
    at = f" at lr={lr:g}" if lr is not None else ""
    return f"{len(bad)} of {len(diverged_at)} runs diverged{at}: {detail}{more}"


class RecordedPath:
    """What every recorded ensemble path offers (:class:`~flowlaws.percolation.dynamics.sde.
    SDEPath`, :class:`~flowlaws.percolation.dynamics.sgd.SGDPath`): its last state and its
    diverged runs. A subclass is a dataclass with ``states`` ``(T, n_runs, dim)`` and
    ``diverged_at`` ``(n_runs,)`` int64 (``-1``: never diverged)."""

    @property
    def final(self) -> torch.Tensor:
        """``(n_runs, dim)`` the last recorded state."""
        return self.states[-1]

    @property
    def diverged(self) -> torch.Tensor:
        """``(n_runs,)`` bool, the runs that diverged."""
        return self.diverged_at >= 0

    def divergence_report(self) -> str:
        """One line naming the diverged runs and their steps (or saying that none did)."""
        return divergence_report(self.diverged_at)
