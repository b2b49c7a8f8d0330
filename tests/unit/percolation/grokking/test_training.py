"""Tests of flowlaws.percolation.grokking.training, against answers known in advance."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from flowlaws.percolation.grokking import training
from flowlaws.percolation.grokking.training import GrokConfig

TINY = {"p": 7, "fraction": 0.5, "d_model": 8, "n_heads": 2, "d_mlp": 12, "n_runs": 2,
        "lr": 3e-3, "log_every": 2, "checkpoint_every": 4}


def _reference_logits(P: dict, x: torch.Tensor) -> torch.Tensor:
    """Nanda et al.'s Transformer, per example, all three positions, causal mask."""
    out = []
    for r in range(P["W_E"].shape[0]):
        Q = {k: v[r] for k, v in P.items()}
        H, dh, _ = Q["W_Q"].shape
        e = Q["W_E"][x] + Q["W_pos"]
        q, k, v = (torch.einsum("ntd,hkd->nhtk", e, Q[w]) for w in ("W_Q", "W_K", "W_V"))
        s = (q @ k.transpose(-1, -2) / math.sqrt(dh)).masked_fill(
            torch.triu(torch.ones(3, 3, dtype=torch.bool), 1), -torch.inf)
        z = (s.softmax(-1) @ v).permute(0, 2, 1, 3).reshape(len(x), 3, H * dh)
        e = e + z @ Q["W_O"].T
        e = e + torch.relu(e @ Q["W_in"].T + Q["b_in"]) @ Q["W_out"].T + Q["b_out"]
        out.append((e @ Q["W_U"])[:, -1])
    return torch.stack(out)


def test_forward_equals_the_per_example_transformer():
    cfg = GrokConfig(**{**TINY, "p": 11, "d_model": 16, "n_heads": 4}, dtype="float64")
    P = training.init_params(cfg)
    for v in P.values():  # non-zero biases too
        v.add_(0.1 * torch.randn_like(v))
    x = training.modular_data(11, 0.5)[0]
    assert torch.allclose(training.forward(P, x), _reference_logits(P, x), atol=1e-12)


def test_modular_data_splits_every_pair_once():
    x_tr, y_tr, x_te, y_te = training.modular_data(13, 0.3, seed=1)
    pairs = torch.cat([x_tr, x_te])[:, :2]
    assert len(x_tr) == round(0.3 * 169) and len(pairs) == 169
    assert len({tuple(r) for r in pairs.tolist()}) == 169
    assert torch.equal(torch.cat([y_tr, y_te]), pairs.sum(1) % 13)
    assert torch.all(torch.cat([x_tr, x_te])[:, 2] == 13)
    assert not torch.equal(training.modular_data(13, 0.3, seed=2)[0], x_tr)


def test_each_run_of_the_ensemble_trains_as_if_alone(tmp_path):
    both = training.train_grokking(GrokConfig(**TINY, n_steps=6, seed=3), cache_dir=tmp_path,
                                   progress=False)
    alone = training.train_grokking(GrokConfig(**{**TINY, "n_runs": 1}, n_steps=6, seed=4),
                                    cache_dir=tmp_path, progress=False)
    for k in both.params:
        assert torch.allclose(both.params[k][1], alone.params[k][0], atol=1e-6), k
    assert not torch.allclose(both.params["W_in"][0], both.params["W_in"][1])


def test_interrupted_run_resumes_to_the_uninterrupted_result(tmp_path):
    cfg = GrokConfig(**TINY, n_steps=13)
    full = training.train_grokking(cfg, cache_dir=tmp_path / "a", progress=False)

    def stop(step):
        if step == 10:  # after the checkpoint at step 8: steps 9 and 10 are lost
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        training.train_grokking(cfg, cache_dir=tmp_path / "b", progress=False, callback=stop)
    ckpt = torch.load(training.run_folder(cfg, "cpu", tmp_path / "b") / "checkpoint.pt",
                      weights_only=True)
    assert ckpt["step"] == 8
    resumed = training.train_grokking(cfg, cache_dir=tmp_path / "b", progress=False)
    assert resumed.resumed_from == 8
    for k in full.params:
        assert torch.equal(full.params[k], resumed.params[k]), k
    np.testing.assert_array_equal(full.steps, resumed.steps)
    for name in training.METRICS:
        np.testing.assert_array_equal(getattr(full, name), getattr(resumed, name))


def test_a_finished_run_is_loaded_and_a_longer_one_continues(tmp_path):
    cfg = GrokConfig(**TINY, n_steps=6)
    first = training.train_grokking(cfg, cache_dir=tmp_path, progress=False)
    again = training.train_grokking(cfg, cache_dir=tmp_path, progress=False)
    assert again.resumed_from == 6 and torch.equal(first.params["W_U"], again.params["W_U"])
    longer = training.train_grokking(GrokConfig(**TINY, n_steps=10), cache_dir=tmp_path,
                                     progress=False)
    direct = training.train_grokking(GrokConfig(**TINY, n_steps=10), cache_dir=tmp_path / "x",
                                     progress=False)
    assert longer.resumed_from == 6 and longer.folder == first.folder
    assert torch.equal(longer.params["W_in"], direct.params["W_in"])


def test_a_changed_parameter_starts_a_fresh_run_folder(tmp_path):
    a = training.train_grokking(GrokConfig(**TINY, n_steps=4), cache_dir=tmp_path, progress=False)
    b = training.train_grokking(GrokConfig(**{**TINY, "lr": 1e-3}, n_steps=4), cache_dir=tmp_path,
                                progress=False)
    assert a.folder != b.folder and b.resumed_from == 0
    assert not torch.equal(a.params["W_in"], b.params["W_in"])
    same = GrokConfig(**{**TINY, "checkpoint_every": 2}, n_steps=99)
    assert training.run_folder(same, "cpu", tmp_path) == a.folder  # neither changes the path


def test_a_crash_while_saving_leaves_the_last_checkpoint_valid(tmp_path, monkeypatch):
    cfg = GrokConfig(**TINY, n_steps=8)
    training.train_grokking(GrokConfig(**TINY, n_steps=4), cache_dir=tmp_path, progress=False)
    folder = training.run_folder(cfg, "cpu", tmp_path)
    real_save = torch.save

    def crashing_save(obj, f):
        if obj["step"] == 8:
            f.write(b"half a checkpoint")
            raise KeyboardInterrupt
        real_save(obj, f)

    monkeypatch.setattr(torch, "save", crashing_save)
    with pytest.raises(KeyboardInterrupt):
        training.train_grokking(cfg, cache_dir=tmp_path, progress=False)
    assert sorted(p.name for p in folder.iterdir()) == ["checkpoint.prev.pt", "checkpoint.pt",
                                                        "config.json", "train.lock"]
    assert torch.load(folder / "checkpoint.pt", weights_only=True)["step"] == 4
    monkeypatch.setattr(torch, "save", real_save)
    assert training.train_grokking(cfg, cache_dir=tmp_path, progress=False).resumed_from == 4


def test_merge_order_parameter_counts_identical_neurons():
    cfg = GrokConfig(**TINY)
    P = training.init_params(cfg)
    assert list(training.merge_order_parameter(P, 0.05)) == [1, 1]
    near = training.nearest_neighbour_distance(P)
    for name, idx in (("W_in", (1, slice(3, 7))), ("b_in", (1, slice(3, 7)))):
        P[name][idx] = P[name][1, 2]
    P["W_out"][1, :, 3:7] = P["W_out"][1, :, 2:3]
    assert list(training.merge_order_parameter(P, 0.05)) == [1, 5]
    assert training.merge_order_parameter(P, (0.05, 0.99)).tolist() == [[1, 12], [5, 12]]
    after = training.nearest_neighbour_distance(P)
    assert after[0] == near[0] and near[1] > 0.3 and after[1] < near[1]


def test_first_step_above():
    steps = np.array([0, 10, 20, 30])
    acc = np.array([[0.1, 0.1], [0.5, 0.2], [0.96, 0.3], [0.99, 0.4]])
    np.testing.assert_array_equal(training.first_step_above(steps, acc, 0.95), [20, np.nan])


# issue 16: impossible settings refused up front, divergence reported, never saved as finished


@pytest.mark.parametrize(("change", "error", "pattern"), [
    ({"lr": float("nan")}, ValueError, "lr must be a positive finite number, got nan"),
    ({"lr": 0.0}, ValueError, "lr must be a positive"),
    ({"lr": -1e-3}, ValueError, "lr must be a positive"),
    ({"eps": 0.0}, ValueError, "eps must be a positive"),
    ({"betas": (0.9, 1.0)}, ValueError, r"betas must lie in \[0, 1\)"),
    ({"betas": (0.9,)}, TypeError, "betas must be two numbers"),
    ({"weight_decay": float("inf")}, ValueError, "weight_decay must be"),
    ({"dtype": "float16"}, ValueError, "dtype must be one of"),
    ({"dtype": "bfloat16"}, ValueError, "dtype must be one of"),
    ({"n_runs": 2.0}, TypeError, "n_runs must be an integer, got 2.0 .*write 2"),
    ({"n_runs": 0}, ValueError, "n_runs must be a positive integer, got 0"),
    ({"n_steps": -1}, ValueError, "n_steps must be a non-negative integer"),
    ({"tols": (float("nan"),)}, ValueError, r"tols\[0\] must be"),
    ({"tols": (1.5,)}, ValueError, r"tols must be relative distances in \(0, 1\)"),
    ({"fraction": 0.01}, ValueError, "empty training or test set"),
    ({"p": 1}, ValueError, "p must be at least 2"),
])
def test_impossible_settings_are_refused_before_any_folder(tmp_path, change, error, pattern):
    with pytest.raises(error, match=pattern):
        training.train_grokking(GrokConfig(**{**TINY, "n_steps": 4, **change}), cache_dir=tmp_path,
                                progress=False)
    assert list(tmp_path.iterdir()) == []


def test_numpy_scalars_in_the_config_work_and_give_the_same_run(tmp_path):
    plain = GrokConfig(**TINY, n_steps=2)
    numpy = GrokConfig(**{**TINY, "n_runs": np.int64(2), "lr": np.float64(3e-3),
                          "p": np.int32(7), "fraction": np.float64(0.5)}, n_steps=np.int64(2))
    assert numpy == plain and type(numpy.n_runs) is int
    run = training.train_grokking(numpy, cache_dir=tmp_path, progress=False)
    assert run.folder == training.run_folder(plain, "cpu", tmp_path)
    assert (run.folder / "config.json").read_text().count('"n_runs": 2') == 1


def test_a_diverging_run_raises_naming_runs_step_and_lr_and_is_not_saved(tmp_path):
    cfg = GrokConfig(**{**TINY, "lr": 3.0, "warmup": 1, "weight_decay": 0.1}, n_steps=40)
    with pytest.raises(training.GrokDivergenceError, match=r"2 of 2 runs diverged") as info:
        training.train_grokking(cfg, cache_dir=tmp_path, progress=False)
    err = info.value
    assert err.runs == [0, 1] and err.lr == 3.0 and 0 < err.step < 40  # caught at a finite loss
    assert "with lr=3 (a train loss NaN" in str(err)
    assert f"run 0 after step {err.steps[0]}, run 1 after step" in str(err)
    assert "not saved as finished" in str(err)
    ckpt = torch.load(training.run_folder(cfg, "cpu", tmp_path) / "checkpoint.pt",
                      weights_only=True)
    assert ckpt["step"] < err.step and ckpt["step"] % cfg.checkpoint_every == 0
    assert all(torch.isfinite(t).all() for t in ckpt["params"].values())
    with pytest.raises(training.GrokDivergenceError):  # a rerun reports it again
        training.train_grokking(cfg, cache_dir=tmp_path, progress=False)


def test_divergence_is_reported_per_run_with_the_warm_up_lr(tmp_path, monkeypatch):
    # run 1 alone is broken from the start: an infinite unembedding gives a non-finite loss
    cfg = GrokConfig(**{**TINY, "lr": 1.0, "warmup": 100, "checkpoint_every": 2,
                        "weight_decay": 0.5}, n_steps=6)
    real_init = training.init_params

    def one_bad_run(c, device="cpu"):
        params = real_init(c, device)
        params["W_U"][1] = float("inf")
        return params

    monkeypatch.setattr(training, "init_params", one_bad_run)
    with pytest.raises(training.GrokDivergenceError) as info:
        training.train_grokking(cfg, cache_dir=tmp_path, progress=False)
    err = info.value
    assert err.runs == [1] and err.steps == [0] and err.step == 0
    assert "1 of 2 runs diverged" in str(err) and "with lr=0.01" in str(err)
    assert "warming up to lr=1" in str(err)


def test_a_loaded_run_still_says_what_its_steps_cost(tmp_path):
    cfg = GrokConfig(**TINY, n_steps=8)
    first = training.train_grokking(cfg, cache_dir=tmp_path, progress=False)
    again = training.train_grokking(cfg, cache_dir=tmp_path, progress=False)
    assert 0 < first.train_cpu_seconds and 0 < first.train_seconds
    assert (again.train_seconds, again.train_cpu_seconds) == (first.train_seconds,
                                                               first.train_cpu_seconds)
    assert math.isnan(again.seconds_per_step)
