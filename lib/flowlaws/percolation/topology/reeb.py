"""The Reeb graph of training: merged groups at each checkpoint and how they continue.

Nodes are ``(k, c)``: component ``c`` of the partition at checkpoint ``k``, with attributes
``time``, ``members`` (a ``frozenset`` of neuron indices) and ``size``. An edge
``(k, c) → (k+1, c')`` joins components whose member sets overlap (attribute ``overlap``).
Events: a node with in-degree ``n ≥ 2`` is a *merge* (condensation) of ``n`` components at
once, block size ``n``; a node with out-degree ``n ≥ 2`` is a *split* (fragmentation) into
``n`` parts.

Explained in: book/02_percolation/03_reeb.ipynb.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import matplotlib.pyplot as plt
import networkx as nx
import numpy as np
import torch

from flowlaws.book.cache import stored_type
from flowlaws.book.style import COLUMN_INCHES
from flowlaws.percolation.dynamics.ensemble import TwoLayerShape, split_params
from flowlaws.percolation.topology.clusters import DEFAULT_TOL, partition, partition_with_dead

__all__ = [
    "run_reeb",
    "ReebEvent",
    "reeb_graph",
    "reeb_from_checkpoints",
    "reeb_events",
    "draw_reeb",
]


def run_reeb(
    states: torch.Tensor, shape: TwoLayerShape, times: np.ndarray, run: int,
    tol: float = DEFAULT_TOL, *, dead_group: bool = False,
):
    """The Reeb graph of run ``run`` of ``states`` ``(T, R, dim)`` at ``times`` ``(T,)``.

    ``dead_group=False`` uses :func:`flowlaws.percolation.topology.clusters.partition` (as
    :func:`reeb_from_checkpoints`); ``True`` uses :func:`partition_with_dead`.
    Returns a ``networkx.DiGraph``.

    Explained in: book/02_percolation/03_reeb.ipynb.
    """
    V, U = split_params(states[:, run], shape)
    split = partition_with_dead if dead_group else partition
    parts = [split(V[k], U[k], tol) for k in range(V.shape[0])]
    return reeb_graph(parts, [float(t) for t in times])


@stored_type
@dataclass(frozen=True)
class ReebEvent:
    """A merge or split at node ``node``: ``kind`` is ``"merge"`` or ``"split"``; ``block``
    is the number of components that merge (in-degree) or that the node splits into."""

    kind: str
    time: float
    node: tuple[int, int]
    block: int
    members: frozenset


def reeb_graph(partitions: Sequence[Sequence[frozenset]], times: Sequence[float]) -> nx.DiGraph:
    """The Reeb graph of a sequence of partitions of the same neurons.

    Args:
        partitions: one partition per checkpoint, each a list of disjoint member sets.
        times: the checkpoints' times, same length.
    """
    if len(partitions) != len(times):
        raise ValueError(f"{len(partitions)} partitions but {len(times)} times")
    G = nx.DiGraph()
    for k, (parts, t) in enumerate(zip(partitions, times, strict=True)):
        for c, members in enumerate(parts):
            members = frozenset(members)
            G.add_node((k, c), time=float(t), members=members, size=len(members))
        if k == 0:
            continue
        for c0, prev in enumerate(partitions[k - 1]):
            for c1, cur in enumerate(parts):
                overlap = len(frozenset(prev) & frozenset(cur))
                if overlap:
                    G.add_edge((k - 1, c0), (k, c1), overlap=overlap)
    return G


def reeb_from_checkpoints(
    Vs: torch.Tensor, Us: torch.Tensor, times: Sequence[float], tol: float = DEFAULT_TOL
) -> nx.DiGraph:
    """Reeb graph of one run's checkpoints.

    Shapes: ``Vs`` ``(T, width, n_in)``, ``Us`` ``(T, n_out, width)``, ``times`` ``(T,)``.
    """
    parts = [partition(Vs[k], Us[k], tol) for k in range(Vs.shape[0])]
    return reeb_graph(parts, times)


def reeb_events(G: nx.DiGraph) -> list[ReebEvent]:
    """Every merge and split of the graph, in time order (merges first at equal times)."""
    events = []
    for node, data in G.nodes(data=True):
        if G.in_degree(node) >= 2:
            events.append(
                ReebEvent("merge", data["time"], node, G.in_degree(node), data["members"])
            )
        if G.out_degree(node) >= 2:
            child_time = G.nodes[next(iter(G.successors(node)))]["time"]
            events.append(ReebEvent("split", child_time, node, G.out_degree(node), data["members"]))
    return sorted(events, key=lambda e: (e.time, e.kind != "merge", e.node))


def _positions(G: nx.DiGraph) -> dict:
    return {n: (d["time"], float(np.mean(sorted(d["members"])))) for n, d in G.nodes(data=True)}


def draw_reeb(G: nx.DiGraph, ax: plt.Axes | None = None, *, title: str | None = None) -> plt.Figure:
    """Draw the Reeb graph: time on x, each component at the mean index of its members on y,
    marker area ∝ size. Merges are filled red, splits ringed green (a node can be both),
    continuations blue; edges are grey, thicker for larger overlaps."""
    fig, ax = (ax.figure, ax) if ax is not None else plt.subplots(figsize=(COLUMN_INCHES, 4))
    pos = _positions(G)
    for u, v, overlap in G.edges(data="overlap"):
        (x0, y0), (x1, y1) = pos[u], pos[v]
        ax.plot([x0, x1], [y0, y1], color="0.65", lw=0.6 + 0.4 * np.sqrt(overlap), zorder=1)
    nodes = list(G)
    xs, ys = zip(*(pos[n] for n in nodes), strict=True)
    face = ["#d1495b" if G.in_degree(n) >= 2 else "#1f5a94" for n in nodes]
    edge = ["#2e933c" if G.out_degree(n) >= 2 else "none" for n in nodes]
    sizes = [20 + 25 * G.nodes[n]["size"] for n in nodes]
    ax.scatter(xs, ys, s=sizes, c=face, edgecolors=edge, linewidths=2.5, zorder=2)
    ax.scatter([], [], c="#d1495b", label="merge (condensation)")
    ax.scatter([], [], c="white", edgecolors="#2e933c", linewidths=2.5,
               label="split (fragmentation)")
    ax.scatter([], [], c="#1f5a94", label="continuation")
    ax.set_xlabel("time")
    ax.set_ylabel("mean neuron index of the component")
    # below the axes, not beside them: the figure stays as wide as the book's column
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=3, frameon=False)
    if title:
        ax.set_title(title)
    fig.tight_layout()
    return fig
