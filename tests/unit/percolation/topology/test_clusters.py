"""Tests of flowlaws.percolation.topology.clusters, against answers known in advance."""

from __future__ import annotations

import warnings

import networkx as nx
import numpy as np
import pytest
import torch

from flowlaws.percolation.dynamics import ensemble
from flowlaws.percolation.topology import clusters, reeb

SHAPE = ensemble.TwoLayerShape(3, 6, 1, "tanh")


def test_collapse_fractions_count_planted_dead_and_merged_neurons_and_nan_runs():
    theta = ensemble.ensemble_init(SHAPE, 3, seed=2, dtype=torch.float64)
    V, U = ensemble.split_params(theta, SHAPE)  # views: edit in place
    V[0, 1], U[0, :, 1] = V[0, 0], U[0, :, 0]  # run 0: neurons 0 and 1 identical
    V[1, 2], U[1, :, 2] = 0.0, 0.0  # run 1: neuron 2 dead
    theta[2, 0] = float("nan")  # run 2: diverged
    merged, dead = clusters.collapse_fractions(theta[None], SHAPE)
    assert merged[0, 0] == pytest.approx(2 / 6) and dead[0, 0] == 0
    assert dead[0, 1] == pytest.approx(1 / 6) and merged[0, 1] == 0
    assert np.isnan(merged[0, 2]) and np.isnan(dead[0, 2])


def test_mean_over_finite_skips_diverged_runs_and_is_nan_without_warning_when_all_diverged():
    nan = float("nan")
    fractions = np.array([[0.5, nan, 0.25], [nan, nan, nan], [1.0, 0.0, nan]])  # (T, R)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # np.nanmean would warn "Mean of empty slice" at t = 1
        mean = clusters.mean_over_finite(fractions, 1)
    assert mean[0] == pytest.approx(0.375) and np.isnan(mean[1]) and mean[2] == pytest.approx(0.5)
    assert clusters.mean_over_finite(fractions) == pytest.approx(1.75 / 4)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert np.allclose(mean, np.nanmean(fractions, 1), equal_nan=True)


def test_partition_with_dead_joins_the_dead_neurons_into_one_group():
    theta = ensemble.ensemble_init(SHAPE, 1, seed=6, dtype=torch.float64)
    V, U = ensemble.split_params(theta, SHAPE)
    for i in (1, 3, 4):
        V[0, i], U[0, :, i] = 0.0, 0.0
    parts = clusters.partition_with_dead(V[0], U[0])
    assert parts[0] == frozenset({1, 3, 4}) and len(parts) == 4
    start = ensemble.ensemble_init(SHAPE, 1, seed=6, dtype=torch.float64)
    G = reeb.run_reeb(torch.stack([start, theta]), SHAPE, np.array([0.0, 1.0]), run=0,
                      dead_group=True)
    assert [(e.kind, e.block) for e in reeb.reeb_events(G)] == [("merge", 3)]


def planted_states(n_runs: int = 12, seed: int = 0) -> tuple[torch.Tensor, ensemble.TwoLayerShape]:
    """Random networks in which some neurons are copies (+ tiny noise) of others, some dead."""
    shape = ensemble.TwoLayerShape(3, 8, 2, "tanh")
    theta = ensemble.ensemble_init(shape, n_runs, seed=seed, dtype=torch.float32)
    V, U = ensemble.split_params(theta, shape)  # views: edits change theta
    g = torch.Generator().manual_seed(seed)
    for r in range(n_runs):
        src = torch.randint(8, (r % 6,), generator=g)
        for k, s in enumerate(src.tolist()):
            dst = (s + 1 + k) % 8
            V[r, dst] = V[r, s] * (1 + 1e-3 * torch.randn(3, generator=g))
            U[r, :, dst] = U[r, :, s]
        if r % 4 == 0:
            V[r, 7], U[r, :, 7] = 0.0, 0.0
    return theta, shape


def test_ensemble_cmax_matches_the_union_find_count():
    theta, shape = planted_states()
    V, U = ensemble.split_params(theta, shape)
    expected = np.array([len(clusters.partition(V[r], U[r])[0]) for r in range(V.shape[0])])
    got = clusters.ensemble_cmax(theta, shape).numpy()
    np.testing.assert_array_equal(got, expected)
    assert expected.max() > 2  # the planted copies really form components


def test_ensemble_cmax_marks_diverged_runs():
    theta, shape = planted_states(3)
    theta[1, 0] = float("nan")
    C = clusters.ensemble_cmax(theta, shape)
    assert torch.isnan(C[1]) and torch.isfinite(C[[0, 2]]).all()


def test_merge_heights_count_components_at_any_tolerance():
    theta, shape = planted_states()
    heights = clusters.merge_heights(theta, shape)
    assert heights.shape == (12, 7)
    V, U = ensemble.split_params(theta, shape)
    for tol in (0.01, 0.2, 0.5):
        for r in range(1, 12, 4):  # runs without a dead neuron
            parts = clusters.partition(V[r], U[r], tol)
            assert len(parts) == 1 + np.sum(heights[r] >= tol)


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
    assert clusters.cmax(Vs, Us).tolist() == [2, 3]


def test_bad_thresholds_are_refused():
    V, U = planted()
    for tol in (-1, float("nan"), 1.0, 2.0):
        with pytest.raises(ValueError, match="tol must lie in"):
            clusters.synchronized_pairs(V, U, tol=tol)
        with pytest.raises(ValueError, match="tol must lie in"):
            clusters.cmax(V, U, tol=tol)
    with pytest.raises(ValueError, match="dead_tol must lie in"):
        clusters.cmax(V, U, dead_tol=float("nan"))
    with pytest.raises(ValueError, match="neurons"):
        clusters.neuron_vectors(V, U[:, :3])


def test_a_diverged_network_is_not_counted_as_merged():
    V = torch.full((4, 3), float("nan"))
    U = torch.ones(1, 4)
    assert torch.isnan(clusters.relative_distance(V, U)).all()
    assert torch.isnan(clusters.cmax(V, U))
    with pytest.raises(ValueError, match="diverged"):
        clusters.largest_component(V, U)


def test_pair_and_dead_along_is_zero_on_the_invariant_sets_only():
    shape = ensemble.TwoLayerShape(2, 3, 1, "tanh")
    theta = ensemble.ensemble_init(shape, 2, seed=0)
    V, U = ensemble.split_params(theta, shape)
    V[:, 1], U[:, :, 1] = V[:, 0], U[:, :, 0]  # neuron 1 = neuron 0
    V[:, 2], U[:, :, 2] = 0.0, 0.0  # neuron 2 dead
    moved = theta.clone()
    moved[1, 0] += 0.5  # run 1 leaves the pair set; neuron 2 wakes up by 0.25 in run 0
    V2, _ = ensemble.split_params(moved, shape)
    V2[0, 2, 0] = 0.25
    pair, dead = clusters.pair_and_dead_along(torch.stack([theta, moved]), shape)
    assert pair.shape == (2,) and pair[0] == 0 and pair[1] > 0.05
    np.testing.assert_allclose(dead, [0.0, 0.25])


def test_n_distinct_counts_values_apart_by_more_than_rtol():
    assert clusters.n_distinct(np.array([1.0, 1.00001, 2.0, 0.5])) == 3
    assert clusters.n_distinct(np.array([1.0, 1.00001]), rtol=1e-6) == 2
    with pytest.raises(ValueError, match="empty"):
        clusters.n_distinct(np.array([]))
