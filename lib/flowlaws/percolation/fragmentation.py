"""Reactive fragmentation: merged neurons that split again after a task switch.

Explained in: book/02_percolation/09_fragmentation.ipynb.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from flowlaws.percolation.clusters import DEFAULT_TOL
from flowlaws.percolation.ensemble import TwoLayerShape, split_params
from flowlaws.percolation.reeb import reeb_events, reeb_from_checkpoints
from flowlaws.percolation.sde import sgd_discrete

__all__ = [
    "SwitchResult",
    "task_switch",
]


@dataclass
class SwitchResult:
    """What :func:`task_switch` recorded: ``times`` ``(T,)``, ``states`` ``(T, R, dim)``,
    ``switch_time``, one Reeb graph per run (``reeb``), and per run the splits and merges
    after the switch (``splits``, ``merges``: lists of
    :class:`flowlaws.percolation.reeb.ReebEvent`)."""

    times: np.ndarray
    states: torch.Tensor
    switch_time: float
    reeb: list
    splits: list
    merges: list

    @property
    def n_splits(self) -> np.ndarray:
        """``(R,)`` number of split events after the switch, per run."""
        return np.array([len(s) for s in self.splits])


def task_switch(theta0: torch.Tensor, shape: TwoLayerShape, X: torch.Tensor,
                Y_before: torch.Tensor, Y_after: torch.Tensor, *, lr: tuple[float, float],
                batch_size: tuple[int, int], n_steps: tuple[int, int], record_every: int = 10,
                seed: int = 0, tol: float = DEFAULT_TOL) -> SwitchResult:
    """SGD on task A (targets ``Y_before``), then on task B (``Y_after``), with a Reeb graph.

    ``lr``, ``batch_size`` and ``n_steps`` are ``(before, after)`` pairs; a larger batch or
    a smaller ``lr`` after the switch means less noise, a teacher with stronger, more
    distinct neurons means more curvature. Merged neurons that split again after the switch
    are the Reeb graph's split events with a time after the switch (reactive fragmentation).
    Shapes: ``theta0`` ``(R, dim)``, ``X`` ``(N, n_in)``, ``Y_*`` ``(N, n_out)``.
    """
    a = sgd_discrete(theta0, shape, X, Y_before, lr=lr[0], batch_size=batch_size[0],
                     n_steps=n_steps[0], seed=seed, record_every=record_every)
    b = sgd_discrete(a.final, shape, X, Y_after, lr=lr[1], batch_size=batch_size[1],
                     n_steps=n_steps[1], seed=seed + 1, record_every=record_every)
    t_switch = float(a.times[-1])
    times = np.concatenate([a.times, t_switch + b.times[1:]])
    states = torch.cat([a.states, b.states[1:]])
    graphs, splits, merges = [], [], []
    for r in range(states.shape[1]):
        V, U = split_params(states[:, r], shape)
        G = reeb_from_checkpoints(V, U, times, tol)
        events = [e for e in reeb_events(G) if e.time > t_switch]
        graphs.append(G)
        splits.append([e for e in events if e.kind == "split"])
        merges.append([e for e in events if e.kind == "merge"])
    return SwitchResult(times, states, t_switch, graphs, splits, merges)
