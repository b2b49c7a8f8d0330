"""flowlaws.clusters: invariant sets, identity test, union-find components (answers known)."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
import torch

from flowlaws import clusters


def planted(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """6 neurons: 1 is a 1e-3 copy of 0, 4 is a copy of 2 (so {0,1}, {2,4}), 3 is dead."""
    g = torch.Generator().manual_seed(seed)
    V = torch.randn(6, 5, generator=g, dtype=torch.float64)
    U = torch.randn(2, 6, generator=g, dtype=torch.float64)
    for src, dst in ((0, 1), (2, 4)):
        V[dst] = V[src] * (1 + 1e-3 * torch.randn(5, generator=g, dtype=torch.float64))
        U[:, dst] = U[:, src] * (1 + 1e-3 * torch.randn(2, generator=g, dtype=torch.float64))
    V[3], U[:, 3] = 0.0, 0.0
    return V, U


def test_planted_pairs_and_dead_neuron_are_found():
    V, U = planted()
    assert clusters.synchronized_pairs(V, U) == [(0, 1), (2, 4)]
    assert clusters.dead_neurons(V, U).tolist() == [False, False, False, True, False, False]
    assert clusters.partition(V, U)[:2] == [frozenset({0, 1}), frozenset({2, 4})]
    assert clusters.largest_component(V, U) == 2


def test_distances_to_the_invariant_sets_are_projections():
    V, U = planted()
    theta = clusters.neuron_vectors(V, U)
    projected = theta.clone()
    projected[0] = projected[5] = (theta[0] + theta[5]) / 2
    expected = (theta - projected).norm()
    assert clusters.distance_to_permutation_set(V, U)[0, 5] == pytest.approx(float(expected))
    assert clusters.distance_to_dead_set(V, U)[3] == 0.0
    assert clusters.distance_to_dead_set(V, U)[0] == pytest.approx(float(theta[0].norm()))


def test_relative_distance_of_independent_neurons_is_near_one_over_root_two():
    g = torch.Generator().manual_seed(1)
    V, U = torch.randn(40, 2000, generator=g), torch.randn(3, 40, generator=g)
    rel = clusters.relative_distance(V, U)
    off = rel[~torch.eye(40, dtype=torch.bool)]
    assert float(off.mean()) == pytest.approx(1 / np.sqrt(2), abs=0.01)
    assert torch.all(rel.diagonal() == 0)


@pytest.mark.parametrize("seed", range(5))
def test_union_find_components_match_networkx(seed):
    G = nx.gnm_random_graph(60, 45, seed=seed)
    mine = clusters.components(G.nodes, G.edges)
    theirs = sorted((frozenset(c) for c in nx.connected_components(G)),
                    key=lambda c: (-len(c), min(c)))
    assert mine == theirs


def test_equivalence_graph_and_ensemble_order_parameter():
    V, U = planted()
    G = clusters.equivalence_graph(V, U)
    assert set(G.edges) == {(0, 1), (2, 4)} and G.nodes[3]["dead"]
    Vs, Us = torch.stack([V, V]), torch.stack([U, U])
    Vs[1, 5], Us[1, :, 5] = V[0], U[:, 0]  # run 1: neuron 5 joins {0, 1}
    assert clusters.ensemble_largest_component(Vs, Us).tolist() == [2, 3]


def test_bad_thresholds_are_refused():
    V, U = planted()
    with pytest.raises(ValueError, match="tol must be >= 0"):
        clusters.synchronized_pairs(V, U, tol=-1)
    with pytest.raises(ValueError, match="neurons"):
        clusters.neuron_vectors(V, U[:, :3])


def test_a_diverged_network_is_not_counted_as_merged():
    V = torch.full((4, 3), float("nan"))
    U = torch.ones(1, 4)
    assert torch.isnan(clusters.relative_distance(V, U)).all()
    assert clusters.largest_component(V, U) <= 1
