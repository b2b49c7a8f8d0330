"""Tests of flowlaws.conservation.real_data, against answers known in advance."""

from __future__ import annotations

import pickle
import struct
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from flowlaws.common.models import MoE, SwiGLU
from flowlaws.conservation.laws import invariants
from flowlaws.conservation.losses import cross_entropy_loss, gradient_and_loss, parameters_of
from flowlaws.conservation.real_data import (
    CharLM,
    block_laws,
    block_sq_norm,
    error_at,
    flat_features,
    image_classifier,
    law_groups,
    law_table,
    load_images,
    load_text,
    one_step_gap,
    optimizer_sweep,
    plot_law_runs,
    train_with_laws,
)


def tiny_lm(seed: int = 0):
    torch.manual_seed(seed)
    model = CharLM(7, 6, 2, 4, 3).double()
    ids = torch.randint(0, 7, (12, 5))
    nxt = torch.randint(0, 7, (12, 5))
    return model, cross_entropy_loss(model, ids, nxt), parameters_of(model)


def tiny_classifier(experts: int = 0, seed: int = 0):
    torch.manual_seed(seed)
    model = image_classifier(8, 5, 3, experts).double()
    X = torch.randn(30, 8, dtype=torch.float64)
    Y = torch.randint(0, 3, (30,))
    return model, cross_entropy_loss(model, X, Y), parameters_of(model)


def _dh_dt_over_scale(loss, p0, laws) -> float:
    """``max |⟨∇h, ∇L⟩| / (‖∇h‖ ‖∇L‖)`` over the scalar entries of the laws, by autograd."""
    g, _ = gradient_and_loss(loss, p0)
    leaves = {k: v.clone().requires_grad_(True) for k, v in p0.items()}
    worst = 0.0
    for value in laws(leaves).values():
        for entry in value.reshape(-1):
            dh = torch.autograd.grad(entry, list(leaves.values()), retain_graph=True,
                                     allow_unused=True, materialize_grads=True)
            dot = sum(float((a * g[k]).sum()) for a, k in zip(dh, leaves, strict=True))
            norm_h = float(sum(a.pow(2).sum() for a in dh).sqrt())
            norm_g = float(sum(v.pow(2).sum() for v in g.values()).sqrt())
            worst = max(worst, abs(dot) / (norm_h * norm_g))
    return worst


def _grad_laws(model: torch.nn.Module, block: str):
    """The block's laws written out again with gradients kept (for the autograd check)."""
    def rope(p):
        Q, K, V, O = (p[f"{block}.W_{n}"] for n in "QKVO")  # noqa: E741
        out = {}
        for i in range(Q.shape[0]):
            out[f"QK{i}"] = Q[i].reshape(-1, 2 * Q.shape[2]).pow(2).sum(1) - \
                K[i].reshape(-1, 2 * K.shape[2]).pow(2).sum(1)
            out[f"VO{i}"] = V[i] @ V[i].T - O[i].T @ O[i]
        return out
    return rope


def _write_idx(path: Path, array: np.ndarray) -> None:
    header = bytes([0, 0, 8, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    path.write_bytes(header + array.tobytes())


def test_char_lm_shapes_and_its_laws_are_the_attention_invariants() -> None:
    model, _, p0 = tiny_lm()
    assert model(torch.randint(0, 7, (3, 5))).shape == (3, 5, 7)
    assert model.attn.pe == "rope" and model.attn.causal
    laws = block_laws(model, "attn")(p0)
    expected = invariants(model.attn)
    assert sorted(laws) == sorted(f"attn.{k}" for k in expected)
    for k, v in expected.items():
        assert torch.equal(laws[f"attn.{k}"], v)
    assert laws["attn.head0.QK"].shape == (2,)  # d_k / 2 RoPE blocks
    assert laws["attn.head1.VO"].shape == (3, 3)


def test_block_laws_read_the_dict_they_are_given_not_the_model() -> None:
    model, _, p0 = tiny_lm()
    laws = block_laws(model, "attn")
    moved = {k: 2 * v for k, v in p0.items()}
    for k, v in laws(p0).items():
        torch.testing.assert_close(laws(moved)[k], 4 * v)  # quadratic laws
    assert torch.equal(model.attn.W_Q, p0["attn.W_Q"])  # the model itself is untouched


def test_attention_laws_survive_the_embedding_readout_and_cross_entropy() -> None:
    """dh/dt = −⟨∇h, ∇L⟩ vanishes in the whole LM; a per-row Q/K 'law' (not one) does not."""
    model, loss, p0 = tiny_lm()
    assert _dh_dt_over_scale(loss, p0, _grad_laws(model, "attn")) < 1e-12

    def rows(p):  # ‖W_Q[i][r]‖² − ‖W_K[i][r]‖² per row r: not conserved under RoPE
        return {"rows": p["attn.W_Q"].pow(2).sum(-1) - p["attn.W_K"].pow(2).sum(-1)}

    assert _dh_dt_over_scale(loss, p0, rows) > 1e-3


@pytest.mark.parametrize("experts", [0, 2])
def test_image_classifier_is_a_swiglu_or_a_moe(experts: int) -> None:
    model, _, p0 = tiny_classifier(experts)
    assert isinstance(model, MoE if experts else SwiGLU)
    assert model(torch.randn(4, 8, dtype=torch.float64)).shape == (4, 3)
    names = sorted(block_laws(model)(p0))
    assert names == (["experts.0.units", "experts.1.units", "gate.sum"] if experts else ["units"])
    with pytest.raises(ValueError, match="experts"):
        image_classifier(8, 5, 3, -1)


def test_law_groups_and_block_sq_norm() -> None:
    names = ["attn.head0.QK", "attn.head0.VO", "attn.head1.QK", "experts.0.units", "gate.sum"]
    assert law_groups(names) == {"QK": ["attn.head0.QK", "attn.head1.QK"],
                                 "VO": ["attn.head0.VO"], "units": ["experts.0.units"],
                                 "sum": ["gate.sum"]}
    p = {"attn.W_Q": torch.ones(2, 2), "embed.weight": torch.ones(3)}
    assert block_sq_norm(p, "attn") == 4.0 and block_sq_norm(p) == 7.0


@pytest.mark.parametrize("which", ["lm", "swiglu", "moe"])
def test_one_step_identity_holds_for_gd_and_sgd_and_fails_for_adam(which: str) -> None:
    model, loss, p0 = tiny_lm() if which == "lm" else tiny_classifier(2 if which == "moe" else 0)
    block = "attn" if which == "lm" else ""
    laws = block_laws(model, block)
    kinds = ["units"] if which == "moe" else None  # the gate sum is linear: h(g) = 0
    assert one_step_gap(loss, p0, laws, 0.3, kinds=kinds) < 1e-10
    assert one_step_gap(loss, p0, laws, 0.3, "sgd", torch.tensor([0, 2, 5]), kinds) < 1e-10
    assert one_step_gap(loss, p0, laws, 0.3, "adam", kinds=kinds) > 1e-2
    if which == "moe":  # GD keeps the linear gate sum to rounding, whatever the step
        g, _ = gradient_and_loss(loss, p0)
        moved = laws({k: v - 0.3 * g[k] for k, v in p0.items()})["gate.sum"]
        torch.testing.assert_close(moved, laws(p0)["gate.sum"], atol=1e-14, rtol=0)
        assert not one_step_gap(loss, p0, laws, 0.3) < 1e-3  # no relative gap for it (or NaN)
    with pytest.raises(ValueError, match="mini-batch"):
        one_step_gap(loss, p0, laws, 0.3, "adam", torch.tensor([0]))


def test_train_with_laws_records_relative_errors_that_match_the_identity() -> None:
    model, loss, p0 = tiny_lm()
    lr = 0.2
    run = train_with_laws(loss, p0, model, "attn", "gd", lr, 6, record_every=3)
    assert run.steps.tolist() == [0, 3, 6] and set(run.errors) == {"QK", "VO"}
    assert run.errors["QK"][0] == 0.0 and run.errors["QK"][-1] > 0
    # h(θ_3) − h(θ_0) = τ² Σ_{j<3} h(g_j), from the gradients along our own GD loop.
    laws, params, total = block_laws(model, "attn"), dict(p0), None
    for _ in range(3):
        g, _ = gradient_and_loss(loss, params)
        step = {k: lr**2 * v for k, v in laws(g).items()}
        total = step if total is None else {k: total[k] + step[k] for k in total}
        params = {k: v - lr * g[k] for k, v in params.items()}
    qk = torch.cat([total[f"attn.head{i}.QK"] for i in range(2)])
    expected = float(qk.norm()) / block_sq_norm(p0, "attn")
    assert run.errors["QK"][1] == pytest.approx(expected, rel=1e-9)


def test_optimizer_sweep_law_table_and_plot() -> None:
    model, loss, p0 = tiny_classifier()
    runs = optimizer_sweep(loss, p0, model, "", {"gd": 0.4, "sgd": 0.4, "adam": 0.01}, 8,
                           batch_size=5, record_every=2)
    assert [(r.optimizer, r.lr) for r in runs] == [("gd", 0.4), ("gd", 0.2), ("sgd", 0.4),
                                                   ("sgd", 0.2), ("adam", 0.01), ("adam", 0.005)]
    assert runs[2].losses[0] != runs[0].losses[0]  # SGD's first loss is a mini-batch loss
    table = law_table(runs, ["units"], [2, 4, 8])
    ratio = error_at(runs[0], "units", 2) / error_at(runs[1], "units", 2)
    assert f"{ratio:.2f}" in table.splitlines()[2]
    same_time = error_at(runs[0], "units", 4) / error_at(runs[1], "units", 8)
    assert f"{same_time:.2f}" in table.splitlines()[3] and "k=[2, 4]" in table.splitlines()[3]
    with pytest.raises(ValueError, match="not recorded"):
        error_at(runs[0], "units", 3)
    fig = plot_law_runs(runs, {"units": "units"}, title="t")
    assert len(fig.axes) == 2 and len(fig.axes[1].lines) == 6


def test_load_text_shakespeare_and_word_corpora(tmp_path: Path) -> None:
    assert len(load_text("shakespeare", n_chars=500)) == 500
    for name in ("train", "valid", "test"):
        (tmp_path / f"wiki.{name}.tokens").write_text("\n = Title = \n\n the cat sat \n")
        (tmp_path / f"ptb.{name}.txt").write_text(" a b <unk> \n c d \n")
    assert load_text("wikitext", tmp_path, 100) == "= Title =\nthe cat sat\n"
    assert load_text("ptb", tmp_path, 9) == "a b <unk>"
    with pytest.raises(ValueError, match="text_folder"):
        load_text("ptb", None)
    with pytest.raises(ValueError, match="text_format"):
        load_text("books", tmp_path)


def test_load_images_from_every_format(tmp_path: Path) -> None:
    digits = load_images()
    assert digits.images.shape == (1797, 1, 8, 8)
    subset = load_images(n_images=50)
    assert len(subset) == 50 and len(set(subset.labels.tolist())) > 5
    cifar = tmp_path / "cifar"
    cifar.mkdir()
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        batch = {b"data": np.full((2, 3072), 255, np.uint8), b"labels": [1, 2]}
        (cifar / name).write_bytes(pickle.dumps(batch, protocol=2))
    assert load_images("cifar10", cifar).images.shape == (10, 3, 32, 32)
    mnist = tmp_path / "mnist"
    mnist.mkdir()
    _write_idx(mnist / "train-images-idx3-ubyte", np.zeros((3, 28, 28), np.uint8))
    _write_idx(mnist / "train-labels-idx1-ubyte", np.array([0, 9, 4], np.uint8))
    assert load_images("mnist", mnist).classes[9] == "9"
    assert load_images("fashion_mnist", mnist).classes[9] == "Ankle boot"
    for cls in ("n01", "n02"):
        (tmp_path / "imgs" / cls).mkdir(parents=True)
        Image.new("RGB", (10, 12), (255, 0, 0)).save(tmp_path / "imgs" / cls / "a.png")
    assert load_images("folder", tmp_path / "imgs", image_size=6).images.shape == (2, 3, 6, 6)
    with pytest.raises(ValueError, match="image_folder"):
        load_images("cifar10")
    with pytest.raises(ValueError, match="image_format"):
        load_images("svhn", tmp_path)


def test_flat_features_are_centred_vectors() -> None:
    X = flat_features(torch.rand(20, 3, 4, 4))
    assert X.shape == (20, 48)
    torch.testing.assert_close(X.mean(0), torch.zeros(48), atol=1e-6, rtol=0)
