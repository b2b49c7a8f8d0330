"""Tests of flowlaws.common.optim, against answers known in advance."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from flowlaws.common.optim import UpdateRule
from flowlaws.conservation.training import train

from ..problems import problem


@pytest.mark.parametrize(
    ("name", "make", "kwargs"),
    [
        ("momentum", lambda ps: torch.optim.SGD(ps, lr=0.03, momentum=0.9, weight_decay=0.01), {}),
        ("adam", lambda ps: torch.optim.Adam(ps, lr=0.03, weight_decay=0.01), {}),
        ("adamw", lambda ps: torch.optim.AdamW(ps, lr=0.03, weight_decay=0.01), {}),
    ],
)
def test_optimisers_match_torch_optim(name, make, kwargs) -> None:
    model, loss, p0 = problem()
    run = train(loss, p0, name, 0.03, 5, weight_decay=0.01, record_params=True, **kwargs)
    opt = make(list(model.parameters()))
    for _ in range(5):
        opt.zero_grad()
        loss(dict(model.named_parameters())).backward()
        opt.step()
    for k, v in model.named_parameters():
        torch.testing.assert_close(run.at(-1)[k], v.detach(), rtol=1e-10, atol=1e-12)


TORCH_OPTIMIZERS = {
    "sgd": lambda ps: torch.optim.SGD(ps, lr=0.05, weight_decay=0.1),
    "momentum": lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9, weight_decay=0.1),
    "adam": lambda ps: torch.optim.Adam(ps, lr=0.05, betas=(0.9, 0.98), weight_decay=0.1),
    "adamw": lambda ps: torch.optim.AdamW(ps, lr=0.05, betas=(0.9, 0.98), weight_decay=0.1),
}


@pytest.mark.parametrize("name", sorted(TORCH_OPTIMIZERS))
def test_each_update_rule_matches_torch_optim_on_an_ensemble_tensor(name) -> None:
    """The rule on a (runs, ...) tensor is torch.optim's update, step by step, to 1e-14."""
    torch.manual_seed(0)
    w = torch.randn(3, 5, 4, dtype=torch.float64)  # 3 runs of a 5x4 weight
    ref = w.clone().requires_grad_(True)
    opt = TORCH_OPTIMIZERS[name]([ref])
    rule = UpdateRule(name, 0.05, momentum=0.9, betas=(0.9, 0.98), weight_decay=0.1)
    state, p = rule.init_state(w), w.clone()
    for t in range(1, 8):
        g = torch.randn_like(w)
        ref.grad = g.clone()
        opt.step()
        p = rule.step(p, g, state, t)
        torch.testing.assert_close(p, ref.detach(), rtol=0, atol=1e-14)
    assert not torch.allclose(p, w, atol=1e-3)


def test_a_per_run_learning_rate_is_each_runs_own_optimiser() -> None:
    """lr as a (runs, 1, 1) tensor: run r moves exactly as a lone optimiser with lr[r]."""
    torch.manual_seed(1)
    lrs = torch.tensor([0.01, 0.1, 0.3], dtype=torch.float64)
    w, grads = torch.randn(3, 4, dtype=torch.float64), torch.randn(5, 3, 4, dtype=torch.float64)
    rule = UpdateRule("adamw", lrs[:, None], weight_decay=0.5)
    state, p = rule.init_state(w), w.clone()
    for t, g in enumerate(grads, start=1):
        p = rule.step(p, g, state, t)
    for r in range(3):
        alone = UpdateRule("adamw", float(lrs[r]), weight_decay=0.5)
        s, q = alone.init_state(w[r]), w[r].clone()
        for t, g in enumerate(grads, start=1):
            q = alone.step(q, g[r], s, t)
        torch.testing.assert_close(p[r], q, rtol=0, atol=1e-15)


def test_an_unknown_optimiser_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="optimizer must be one of"):
        UpdateRule("rmsprop", 0.1)


def test_check_run_args_takes_numpy_scalars_and_names_bad_values():
    # issue 16: np.int64 / np.float32 were refused with self-contradicting messages and
    # n_steps=10.0 gave a bare TypeError later
    from flowlaws.common.optim import check_run_args

    check_run_args("sgd", np.float32(0.1), np.int64(4), np.int64(1))
    with pytest.raises(TypeError, match="n_steps must be an integer, got 10.0 .*write 10"):
        check_run_args("sgd", 0.1, 10.0, 1)
    with pytest.raises(TypeError, match="record_every must be an integer"):
        check_run_args("sgd", 0.1, 10, True)
    for lr in (float("nan"), float("inf"), 0.0, -1.0, np.float64("nan")):
        with pytest.raises(ValueError, match="lr must be a positive finite number"):
            check_run_args("sgd", lr, 10, 1)
    with pytest.raises(ValueError, match="n_steps must be a positive integer, got 0"):
        check_run_args("sgd", 0.1, np.int64(0), 1)
