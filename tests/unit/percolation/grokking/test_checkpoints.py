"""Tests of flowlaws.percolation.grokking.checkpoints: run keys, checkpoints, C_max from forests."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
import torch

from flowlaws.book.cache import keys
from flowlaws.percolation.grokking import checkpoints, training
from flowlaws.percolation.grokking.checkpoints import (
    GrokStoreWarning,
    cmax_from_forests,
    neuron_forests,
)
from flowlaws.percolation.grokking.training import GrokConfig

TINY = {"p": 7, "fraction": 0.5, "d_model": 8, "n_heads": 2, "d_mlp": 12, "n_runs": 2,
        "lr": 3e-3, "log_every": 2, "checkpoint_every": 4}


def train(cfg, folder, **kw):
    return training.train_grokking(cfg, cache_dir=folder, progress=False, **kw)


def test_cmax_from_forests_equals_cmax_at_every_tolerance():
    g = torch.Generator().manual_seed(0)
    V = torch.randn(5, 10, 4, generator=g, dtype=torch.float64)
    U = torch.randn(5, 2, 10, generator=g, dtype=torch.float64)
    V[0, 1], U[0, :, 1] = V[0, 0], U[0, :, 0]            # identical neurons: distance 0
    V[1, 2], U[1, :, 2] = 1e-12, 1e-12                    # a dead neuron
    V[2, 3:6], U[2, :, 3:6] = V[2, 3], U[2, :, 3:4]       # a merged group of three
    V[3, 0, 0] = float("nan")                             # a diverged run
    forests = neuron_forests(V, U)
    dist = checkpoints.relative_distance(V, U)
    exact = [float(d) for d in dist[1:3].flatten()[:20] if 0 < d < 1]  # tol = a distance itself
    tols = (1e-9, 0.05, 0.2, 0.4, 0.6, 0.9, *exact)
    expected = torch.stack([checkpoints.cmax(V, U, t) for t in tols], dim=-1).numpy()
    np.testing.assert_array_equal(cmax_from_forests(forests, tols), expected)
    assert np.isnan(cmax_from_forests(forests, (0.1,))[3]).all()


def test_metric_only_settings_and_library_changes_keep_the_run(tmp_path, monkeypatch):
    cfg = GrokConfig(**TINY, n_steps=8)
    first = train(cfg, tmp_path)
    # tols: C_max at new tolerances from the stored forests, equal to a fresh run's
    other_tols = GrokConfig(**{**TINY, "tols": (0.1, 0.3)}, n_steps=8)
    loaded = train(other_tols, tmp_path)
    fresh = train(other_tols, tmp_path / "fresh")
    assert loaded.resumed_from == 8 and loaded.folder == first.folder and fresh.resumed_from == 0
    np.testing.assert_array_equal(loaded.c_max, fresh.c_max)
    assert loaded.c_max.shape == (5, 2, 2)
    # log_every: a coarser one is read from the records
    coarse = train(GrokConfig(**{**TINY, "log_every": 4}, n_steps=8), tmp_path)
    assert coarse.resumed_from == 8 and coarse.steps.tolist() == [0, 4, 8]
    np.testing.assert_array_equal(coarse.test_acc, first.test_acc[::2])
    # a finer one: the steps never recorded are left out, with a warning naming the folder
    with pytest.warns(GrokStoreWarning, match=rf"{first.folder}.*log_every=1 asks for 4 steps"):
        fine = train(GrokConfig(**{**TINY, "log_every": 1}, n_steps=10), tmp_path)
    assert fine.resumed_from == 8 and fine.steps.tolist() == [0, 2, 4, 6, 8, 9, 10]
    # another version of the library (any file changed) keeps the run folder
    monkeypatch.setattr(keys, "library_fingerprint", lambda: "another library")
    assert training.run_folder(cfg, "cpu", tmp_path) == first.folder
    assert train(cfg, tmp_path).resumed_from == 10  # the longest stored run, read up to 8


def test_a_run_of_older_training_code_is_named_and_kept(tmp_path, monkeypatch):
    cfg = GrokConfig(**TINY, n_steps=4)
    old = train(cfg, tmp_path)
    monkeypatch.setattr(training, "TRAINING_CODE_VERSION", training.TRAINING_CODE_VERSION + 1)
    with pytest.warns(GrokStoreWarning, match=rf"{old.folder} was trained by training code "
                      rf"version {training.TRAINING_CODE_VERSION - 1}; this is version "
                      rf"{training.TRAINING_CODE_VERSION}"):
        new = train(cfg, tmp_path)
    assert new.folder == old.folder and new.resumed_from == 0
    assert (old.folder / f"checkpoint-v{training.TRAINING_CODE_VERSION - 1}.pt").exists()


@pytest.mark.parametrize("damage", ["garbage", "truncated", "empty", "foreign", "wrong shape"])
def test_a_corrupt_checkpoint_falls_back_to_the_previous_one(tmp_path, damage):
    cfg = GrokConfig(**TINY, n_steps=12)
    full = train(cfg, tmp_path / "full")
    train(GrokConfig(**TINY, n_steps=8), tmp_path)  # checkpoints at 4 (previous) and 8 (newest)
    folder = training.run_folder(cfg, "cpu", tmp_path)
    newest = folder / "checkpoint.pt"
    if damage == "garbage":
        newest.write_bytes(b"\x80\x02not a checkpoint")
    elif damage == "truncated":
        newest.write_bytes(newest.read_bytes()[: newest.stat().st_size // 2])
    elif damage == "empty":
        newest.write_bytes(b"")
    elif damage == "foreign":
        torch.save({"step": 8}, newest)
    else:
        ckpt = torch.load(newest, weights_only=True)
        ckpt["params"]["W_in"] = ckpt["params"]["W_in"][:, :3]
        torch.save(ckpt, newest)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        resumed = train(cfg, tmp_path)
    messages = [str(w.message) for w in caught if issubclass(w.category, GrokStoreWarning)]
    assert len(messages) == 1 and str(newest) in messages[0], messages
    assert "previous checkpoint is used" in messages[0]
    assert "weights_only=False" not in messages[0]
    assert resumed.resumed_from == 4
    for k in full.params:
        assert torch.equal(full.params[k], resumed.params[k]), k
    np.testing.assert_array_equal(full.c_max, resumed.c_max)
    np.testing.assert_array_equal(full.test_loss, resumed.test_loss)


def test_both_checkpoints_corrupt_start_again_naming_both(tmp_path):
    cfg = GrokConfig(**TINY, n_steps=8)
    full = train(cfg, tmp_path / "full")
    folder = train(cfg, tmp_path).folder
    for name in ("checkpoint.pt", "checkpoint.prev.pt"):
        (folder / name).write_bytes(b"PK\x03\x04 broken zip")
    with pytest.warns(GrokStoreWarning) as caught:
        again = train(cfg, tmp_path)
    text = " ".join(str(w.message) for w in caught)
    assert str(folder / "checkpoint.pt") in text and str(folder / "checkpoint.prev.pt") in text
    assert "starts again from step 0" in text
    assert again.resumed_from == 0 and torch.equal(again.params["W_U"], full.params["W_U"])


def test_a_kill_between_the_two_replaces_keeps_the_new_checkpoint(tmp_path):
    cfg = GrokConfig(**TINY, n_steps=8)
    folder = train(cfg, tmp_path).folder
    # as if killed after the newest became the previous one, before the new one replaced it
    (folder / "checkpoint.pt").rename(folder / "checkpoint.pt.new")
    assert train(cfg, tmp_path).resumed_from == 8


def test_a_kill_before_the_replaces_uses_the_staged_checkpoint(tmp_path):
    cfg = GrokConfig(**TINY, n_steps=8)
    train(GrokConfig(**TINY, n_steps=4), tmp_path)
    folder = train(cfg, tmp_path).folder
    # as if killed after the step-8 checkpoint was staged, before any replace: the folder holds
    # the staged step 8, the newest step 4 and the previous step 0
    (folder / "checkpoint.pt").rename(folder / "checkpoint.pt.new")
    (folder / "checkpoint.prev.pt").rename(folder / "checkpoint.pt")
    assert train(cfg, tmp_path).resumed_from == 8
    assert torch.load(folder / "checkpoint.prev.pt", weights_only=True)["step"] == 4


def test_a_run_stored_before_training_code_versions_is_named(tmp_path):
    cfg = GrokConfig(**TINY, n_steps=4)
    old = tmp_path / "grokking-0123456789abcdef01234567"  # a folder keyed the old way
    old.mkdir()
    stored = {**cfg.key_params(torch.device("cpu")), "tols": [0.05], "log_every": 2}
    (old / "config.json").write_text(json.dumps(stored))
    with pytest.warns(GrokStoreWarning, match=rf"{old} holds a run of this configuration"):
        assert train(cfg, tmp_path).resumed_from == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error", GrokStoreWarning)  # the new run is found: no warning
        assert train(cfg, tmp_path).resumed_from == 4
