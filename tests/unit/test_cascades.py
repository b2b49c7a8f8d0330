"""flowlaws.cascades: vectorised C_max, merge heights, the cyclic orbit, jump sweeps."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from flowlaws import cascades, clusters, dsi, sde


def planted_states(n_runs: int = 12, seed: int = 0) -> tuple[torch.Tensor, sde.TwoLayerShape]:
    """Random networks in which some neurons are copies (+ tiny noise) of others, some dead."""
    shape = sde.TwoLayerShape(3, 8, 2, "tanh")
    theta = sde.ensemble_init(shape, n_runs, seed=seed, dtype=torch.float32)
    V, U = sde.split_params(theta, shape)  # views: edits change theta
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
    V, U = sde.split_params(theta, shape)
    expected = clusters.ensemble_largest_component(V, U)
    got = cascades.ensemble_cmax(theta, shape).numpy()
    np.testing.assert_array_equal(got, expected)
    assert expected.max() > 2  # the planted copies really form components


def test_ensemble_cmax_marks_diverged_runs():
    theta, shape = planted_states(3)
    theta[1, 0] = float("nan")
    assert cascades.ensemble_cmax(theta, shape)[1] == 0


def test_merge_heights_count_components_at_any_tolerance():
    theta, shape = planted_states()
    heights = cascades.merge_heights(theta, shape)
    assert heights.shape == (12, 7)
    V, U = sde.split_params(theta, shape)
    for tol in (0.01, 0.2, 0.5):
        for r in range(1, 12, 4):  # runs without a dead neuron
            parts = clusters.partition(V[r], U[r], tol)
            assert len(parts) == 1 + np.sum(heights[r] >= tol)


def test_cyclic_orbit_stays_circulant_under_gradient_descent():
    shape, X, Y, theta0 = cascades.cyclic_problem(5, 8, seed=1)
    assert X.shape == (40, 5) and theta0.shape == (1, shape.dim)
    rolled = torch.roll(X, 1, dims=1)  # the data set is closed under the roll
    assert all(torch.isclose(rolled[i], X).all(dim=1).any() for i in range(len(X)))
    path = sde.euler_maruyama(sde.sgd_coefficients(shape, X, Y, 1), theta0, 0.2, 50, eta=0.0,
                              record_every=50)
    d = clusters.relative_distance(*sde.split_params(path.final, shape))[0]
    for k in range(5):
        shifted = torch.roll(torch.roll(d, k, 0), k, 1)
        torch.testing.assert_close(shifted, d, atol=1e-6, rtol=1e-5)
    assert len(np.unique(cascades.merge_heights(path.final, shape).round(5))) == 1


def test_block_jump_sweep_separates_the_two_regimes():
    er = cascades.block_jump_sweep([512], 6, process="er")
    bl = cascades.block_jump_sweep([512], 6, process="block")
    assert er["N"] == [512.0] and len(er["max_sem"]) == 1
    assert bl["max_mean"][0] > 2 * er["max_mean"][0]
    assert all(m >= last for m, last in zip(bl["max_mean"], bl["last_mean"], strict=True))
    with pytest.raises(ValueError, match="process"):
        cascades.block_jump_sweep([64], 2, process="kingman")


def test_planted_ensemble_recovers_its_cascade():
    p = np.linspace(0, 1, 1024)
    C = cascades.planted_ensemble(p, 200, p_c=0.8, lam=2.0, first=0.4, n_levels=4, seed=3)
    assert C.shape == (200, 1024)
    np.testing.assert_allclose(C[:, -1].mean(), 5.0, atol=0.01)  # base 1 + four jumps
    found = dsi.detect_cascade(dsi.relative_variance(C), p)
    assert found.found and len(found.peaks) >= 3
    assert abs(found.estimate.p_c - 0.8) < 0.03 and abs(found.estimate.lam - 2.0) < 0.5


def test_sgd_order_parameter_shapes_bounds_and_seed():
    kw = {"width": 4, "n_runs": 6, "n_steps": 40, "record_every": 10, "seed": 1}
    a = cascades.sgd_order_parameter(0.3, **kw)
    assert a["steps"] == [0, 10, 20, 30, 40] and a["C"].shape == (6, 5)
    assert ((a["C"] >= 1) & (a["C"] <= 4)).all()
    torch.testing.assert_close(a["C"], cascades.sgd_order_parameter(0.3, **kw)["C"])
    huge = cascades.sgd_order_parameter(1e4, **kw)["C"]  # diverges: marked 0, then dropped
    assert (huge[:, -1] == 0).all() and len(cascades.finite_runs(huge)) == 0


def test_cascade_caption_never_makes_up_a_lambda():
    p = np.linspace(0, 1, 512)
    two = np.exp(-0.5 * ((p - 0.3) / 0.01) ** 2) + np.exp(-0.5 * ((p - 0.6) / 0.01) ** 2)
    null = dsi.surrogate_test(two, p, n_surrogates=20)
    caption = cascades.cascade_caption(null)
    assert caption.startswith("no cascade") and "λ" not in caption
    y = sum(np.exp(-0.5 * ((p - q) / 0.008) ** 2) for q in (0.4, 0.6, 0.7))
    y = y + 0.02 * np.random.default_rng(0).standard_normal(512)
    caption = cascades.cascade_caption(dsi.surrogate_test(y, p, n_surrogates=20, alpha=0.1))
    assert caption.startswith("cascade of 3 peaks: λ = ") and "(significant)" in caption


def test_kinematic_summary_is_plain_data():
    k = cascades.kinematic_summary(16, 20, n_boot=5, n_surrogates=20)
    assert len(k["p"]) == len(k["R"]) == 16 and len(k["surrogate_scores"]) == 20
    assert 0 < k["p_value"] <= 1 and 0 <= k["boot_found"] <= 1
