"""Tests of flowlaws.percolation.topology.reeb, against answers known in advance."""

from __future__ import annotations

import matplotlib
import numpy as np
import torch

from flowlaws.percolation.dynamics import ensemble
from flowlaws.percolation.topology import reeb

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

SHAPE = ensemble.TwoLayerShape(3, 6, 1, "tanh")


def test_run_reeb_sees_a_planted_merge():
    theta = ensemble.ensemble_init(SHAPE, 1, seed=5, dtype=torch.float64)
    later = theta.clone()
    V, U = ensemble.split_params(later, SHAPE)
    V[0, 1], U[0, :, 1] = V[0, 0], U[0, :, 0]
    G = reeb.run_reeb(torch.stack([theta, later]), SHAPE, np.array([0.0, 1.0]), run=0)
    events = [(e.kind, e.block) for e in reeb.reeb_events(G)]
    assert events == [("merge", 2)]


F = frozenset


PLANTED = [
    [F({i}) for i in range(6)],  # t0: six singletons
    [F({0, 1}), F({2}), F({3}), F({4}), F({5})],  # t1: pair merge (n = 2)
    [F({0, 1, 2, 3}), F({4}), F({5})],  # t2: block merge of three components
    [F(range(6))],  # t3: block merge of three
    [F({0, 1}), F({2, 3}), F({4, 5})],  # t4: split into three
]


TIMES = [0.0, 1.0, 2.0, 3.0, 4.0]


def test_planted_merge_tree_events():
    G = reeb.reeb_graph(PLANTED, TIMES)
    events = [(e.kind, e.time, e.block, e.members) for e in reeb.reeb_events(G)]
    assert events == [
        ("merge", 1.0, 2, F({0, 1})),
        ("merge", 2.0, 3, F({0, 1, 2, 3})),
        ("merge", 3.0, 3, F(range(6))),
        ("split", 4.0, 3, F(range(6))),
    ]


def test_planted_graph_structure_and_attributes():
    G = reeb.reeb_graph(PLANTED, TIMES)
    assert G.number_of_nodes() == sum(len(p) for p in PLANTED)
    assert G.number_of_edges() == 6 + 5 + 3 + 3
    assert G.nodes[(2, 0)] == {"time": 2.0, "members": F({0, 1, 2, 3}), "size": 4}
    assert set(G.predecessors((2, 0))) == {(1, 0), (1, 1), (1, 2)}
    assert G.edges[(3, 0), (4, 1)]["overlap"] == 2


def test_reeb_from_checkpoints_sees_neurons_coincide_and_part():
    g = torch.Generator().manual_seed(0)
    V0, U0 = torch.randn(4, 3, generator=g), torch.randn(1, 4, generator=g)
    V1, U1 = V0.clone(), U0.clone()
    V1[1], U1[:, 1] = V0[0], U0[:, 0]  # neuron 1 joins neuron 0
    G = reeb.reeb_from_checkpoints(torch.stack([V0, V1, V0]), torch.stack([U0, U1, U0]),
                                   [0.0, 1.0, 2.0])
    kinds = [(e.kind, e.time, e.block) for e in reeb.reeb_events(G)]
    assert kinds == [("merge", 1.0, 2), ("split", 2.0, 2)]


def test_draw_returns_a_figure():
    fig = reeb.draw_reeb(reeb.reeb_graph(PLANTED, TIMES), title="planted")
    assert isinstance(fig, plt.Figure) and fig.axes[0].get_xlabel() == "time"
    plt.close(fig)


def test_phase_event_counts_split_events_at_the_boundary():
    F = frozenset
    single = [F({0}), F({1}), F({2})]
    history = [single, [F({0, 1, 2})], [F({0, 1}), F({2})], single]
    G = reeb.reeb_graph(history, [0.0, 1.0, 2.0, 3.0])  # merge of 3 at t=1, splits at 2 and 3
    counts = reeb.phase_event_counts([G, G], 1.0, ("noisy", "quiet"))
    assert counts["noisy", "merge"] == 2 and counts["noisy", "merge", "big"] == 2
    assert counts["quiet", "split"] == 4 and counts["quiet", "split", "big"] == 0
    assert counts["noisy", "split"] == 0 and counts["quiet", "merge"] == 0
    assert reeb.phase_event_counts([G], 0.5)["after", "merge"] == 1


def test_groups_at_counts_the_nodes_of_a_checkpoint():
    F = frozenset
    G = reeb.reeb_graph([[F({0}), F({1}), F({2})], [F({0, 1}), F({2})]], [0.0, 0.5])
    assert reeb.groups_at(G, 0.0) == 3 and reeb.groups_at(G, 0.5) == 2
    assert reeb.groups_at(G, 9) == 0
