"""A causal Transformer of residual RoPE-attention and SwiGLU blocks, as an ordinary module.

``ids ↦ unembed(rms(x_N))`` with ``x_0 = embed(ids)`` and, for each of the ``N`` blocks,
``x ← x + attn(rms(x))``, then ``x ← x + ffn(rms(x))``: pre-norm residual blocks in the
LLaMA style, built from the library's
:class:`~flowlaws.common.models.MultiHeadAttention` (causal, ``pe="rope"``) and
:class:`~flowlaws.common.models.SwiGLU` (one implementation of each, the ones whose laws
:mod:`flowlaws.conservation.laws` knows).

The norm :func:`rms_norm` has **no learnable gain**, on purpose: a gain ``γ`` in front of a
block that reads its input through linear maps adds a law the library does not claim (the
rescaling ``γ_i → e^ε γ_i`` with input column ``i`` of each map ``→ e^{−ε}``; see
:func:`flowlaws.conservation.laws.law_blocks`). Without gains the only parameters outside the
blocks are the embedding and the unembedding.

Explained in: book/01_conservation/06_real_data.ipynb
"""
from __future__ import annotations

import torch
from torch import nn

from flowlaws.common.checks import check_positive_ints
from flowlaws.common.models import MultiHeadAttention, SwiGLU

__all__ = ["rms_norm", "Block", "CausalTransformer"]


def rms_norm(x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """``x / sqrt(mean(x²) + eps)`` over the last axis, without a gain; any shape ``(..., d)``."""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)


class Block(nn.Module):
    """``x ← x + attn(rms(x))``, then ``x ← x + ffn(rms(x))``.

    ``attn`` is a causal RoPE :class:`MultiHeadAttention` ``(d_model, heads, d_k, d_v)``,
    ``ffn`` a :class:`SwiGLU` ``(d_model, ffn, d_model)``. Input and output
    ``(batch, tokens, d_model)``.
    """

    def __init__(self, d_model: int, heads: int, d_k: int, d_v: int, ffn: int) -> None:
        super().__init__()
        self.attn = MultiHeadAttention(d_model, heads, d_k, d_v, pe="rope", causal=True)
        self.ffn = SwiGLU(d_model, ffn, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(rms_norm(x))
        return x + self.ffn(rms_norm(x))


class CausalTransformer(nn.Module):
    """A next-token model: embedding, ``n_layers`` :class:`Block` s, a final norm, unembedding.

    Shapes: ``embed.weight`` ``(vocab_size, d_model)``, ``layers[l]`` a :class:`Block`
    (its attention ``layers.{l}.attn``, its SwiGLU ``layers.{l}.ffn`` with ``ffn`` hidden
    units), ``unembed.weight`` ``(vocab_size, d_model)`` (not tied to the embedding); input
    ``(batch, tokens)`` int64 ids, output ``(batch, tokens, vocab_size)`` logits of the next
    token. ``d_k`` must be even (RoPE rotates 2×2 blocks).

    Explained in: book/01_conservation/06_real_data.ipynb
    """

    def __init__(self, vocab_size: int, d_model: int, n_layers: int, heads: int, d_k: int,
                 d_v: int, ffn: int) -> None:
        super().__init__()
        check_positive_ints(vocab_size=vocab_size, d_model=d_model, n_layers=n_layers,
                            heads=heads, d_k=d_k, d_v=d_v, ffn=ffn)
        self.embed = nn.Embedding(vocab_size, d_model)
        self.layers = nn.ModuleList(Block(d_model, heads, d_k, d_v, ffn) for _ in range(n_layers))
        self.unembed = nn.Linear(d_model, vocab_size, bias=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        if not isinstance(ids, torch.Tensor) or ids.dtype != torch.int64 or ids.dim() != 2:
            got = (tuple(ids.shape), ids.dtype) if isinstance(ids, torch.Tensor) else type(ids)
            raise ValueError(f"ids must be an int64 tensor (batch, tokens), got {got}")
        x = self.embed(ids)
        for layer in self.layers:
            x = layer(x)
        return self.unembed(rms_norm(x))
