"""Tests of flowlaws.common.transformer, against answers known in advance."""

from __future__ import annotations

import pytest
import torch

from flowlaws.common.models import MultiHeadAttention, SwiGLU
from flowlaws.common.transformer import CausalTransformer, rms_norm


def _model() -> CausalTransformer:
    torch.manual_seed(0)
    return CausalTransformer(11, 8, 2, 2, 4, 4, 6).double()


def test_shapes_and_blocks() -> None:
    model = _model()
    ids = torch.randint(0, 11, (3, 5))
    assert model(ids).shape == (3, 5, 11)
    assert isinstance(model.layers[1].attn, MultiHeadAttention) and model.layers[1].attn.causal
    assert model.layers[1].attn.pe == "rope" and isinstance(model.layers[1].ffn, SwiGLU)
    assert model.layers[0].ffn.A.weight.shape == (6, 8)


def test_the_model_is_causal() -> None:
    model = _model()
    ids = torch.randint(0, 11, (2, 6), generator=torch.Generator().manual_seed(1))
    changed = ids.clone()
    changed[:, 4:] = (changed[:, 4:] + 1) % 11
    assert torch.allclose(model(ids)[:, :4], model(changed)[:, :4], atol=1e-12)
    assert not torch.allclose(model(ids)[:, 4:], model(changed)[:, 4:])


def test_rms_norm_has_unit_mean_square_and_no_parameters() -> None:
    x = torch.randn(4, 3, 16, dtype=torch.float64) * 5
    ones = torch.ones(4, 3, dtype=torch.float64)
    assert torch.allclose(rms_norm(x).pow(2).mean(-1), ones, atol=1e-6)
    names = [n for n, _ in _model().named_parameters() if not n.startswith("layers.")]
    assert names == ["embed.weight", "unembed.weight"]  # no norm gains


@pytest.mark.parametrize("ids", [torch.zeros(2, 3), torch.zeros(3, dtype=torch.long)])
def test_ids_must_be_an_int64_batch_of_sequences(ids) -> None:
    with pytest.raises(ValueError, match="ids must be an int64 tensor"):
        _model()(ids)


def test_sizes_are_checked_by_name() -> None:
    with pytest.raises(ValueError, match="n_layers"):
        CausalTransformer(11, 8, 0, 2, 4, 4, 6)
    with pytest.raises(ValueError, match="d_k must be even"):
        CausalTransformer(11, 8, 1, 2, 3, 4, 6)
