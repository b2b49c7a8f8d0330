"""Tests of flowlaws.conservation.flow, against answers known in advance."""

from __future__ import annotations

import numpy as np
import torch

from flowlaws.conservation.flow import Trajectory, conservation_error, gradient_flow

from ..problems import balance, laws, problem


def test_gradient_flow_conserves_the_law_to_1e8_relative() -> None:
    _, loss, p0 = problem()
    flow = gradient_flow(loss, p0, np.linspace(0, 1.5, 7), laws=laws)
    assert flow.losses[-1] < 0.1 * flow.losses[0]  # the path really moved
    assert conservation_error(flow, balance).max() < 1e-8
    assert conservation_error(flow, "balance").max() < 1e-8
    assert flow.optimizer == "flow"


def test_conservation_error_of_a_trajectory_built_by_hand() -> None:
    _, loss, p0 = problem()
    params = {k: torch.stack([v, 2 * v]) for k, v in p0.items()}
    run = Trajectory(np.array([0.0, 1.0]), params, np.zeros(2))
    sq_norm = sum(float(v.pow(2).sum()) for v in p0.values())
    expected = float((3 * balance(p0)).norm()) / sq_norm  # h(2θ) − h(θ) = 3h(θ)
    np.testing.assert_allclose(conservation_error(run, balance), [0.0, expected])
    np.testing.assert_allclose(
        conservation_error(run, balance, relative=False), [0.0, expected * sq_norm]
    )
