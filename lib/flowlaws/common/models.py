"""The architectures of the book, as ordinary ``torch.nn.Module`` s (float64-friendly).

Weight-shape convention (PyTorch's, used for every invariant in :mod:`flowlaws.conservation.laws`):
a linear map ``y = W x`` stores ``W`` with shape ``(n_out, n_in)``. The seed papers write
``x^T W`` (``in x out``); their ``A_{:,i}`` (a column) is our ``A[i, :]`` (a row), their
``Q_i^T Q_i`` is our ``W_Q[i] @ W_Q[i].T``, and so on.

Every model computes its forward pass with plain tensor operations (``einsum``, no fused
attention kernel), so that :mod:`torch.func`'s forward-mode ``jvp`` works through it.

Explained in: book/01_conservation/01_gradient_flow.ipynb (TwoLayer),
book/01_conservation/02_feedforward.ipynb (Deep, SwiGLU),
book/01_conservation/03_attention.ipynb (MultiHeadAttention),
book/01_conservation/04_moe.ipynb (MoE), book/01_conservation/06_real_data.ipynb (CharLM,
image_classifier).
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn
from torch.nn import functional as F

from flowlaws.common.checks import check_positive_ints

__all__ = [
    "ACTIVATIONS",
    "POSITIONAL_ENCODINGS",
    "GATES",
    "TwoLayer",
    "Deep",
    "SwiGLU",
    "sinusoidal_encoding",
    "rotary",
    "MultiHeadAttention",
    "MoE",
    "CharLM",
    "image_classifier",
]


ACTIVATIONS = {
    "linear": lambda z: z,
    "relu": F.relu,
    "gelu": F.gelu,
    "silu": F.silu,
    "tanh": torch.tanh,
}


POSITIONAL_ENCODINGS = (None, "sinusoidal", "rope")


GATES = ("softmax", "sigmoid")


def _check_activation(activation: str) -> None:
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}")


def _check_input(x: torch.Tensor, trailing: tuple[int, ...], what: str) -> None:
    """A ``ValueError`` naming ``x`` unless it is floating, of shape ``(batch, *trailing)``."""
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        raise ValueError(f"x must be a floating-point tensor, got {getattr(x, 'dtype', type(x))}")
    if x.dim() != len(trailing) + 1 or tuple(x.shape[1:]) != trailing:
        raise ValueError(f"x must have shape {what}, got {tuple(x.shape)}")


class TwoLayer(nn.Module):
    """``f(x) = U σ(V x)``: one hidden layer of ``width`` units.

    Shapes: ``V.weight`` is ``(width, n_in)``, ``U.weight`` is ``(n_out, width)``;
    input ``(batch, n_in)``, output ``(batch, n_out)``.

    Args:
        activation: one of ``"linear"``, ``"relu"``, ``"gelu"``, ``"silu"``, ``"tanh"``.
        bias: add biases to both layers.

    Explained in: book/01_conservation/01_gradient_flow.ipynb
    """

    def __init__(
        self, n_in: int, width: int, n_out: int, activation: str = "relu", bias: bool = False
    ) -> None:
        super().__init__()
        check_positive_ints(n_in=n_in, width=width, n_out=n_out)
        _check_activation(activation)
        self.activation = activation
        self.V = nn.Linear(n_in, width, bias=bias)
        self.U = nn.Linear(width, n_out, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.U(ACTIVATIONS[self.activation](self.V(x)))


class Deep(nn.Module):
    """``f(x) = W_L σ(… σ(W_1 x))``: a feed-forward network with hidden ``widths``.

    Shapes: ``layers[l].weight`` is ``(widths[l], widths[l-1])`` with ``widths[-1] = n_in``
    and a last layer ``(n_out, widths[-1])``; input ``(batch, n_in)``, output ``(batch, n_out)``.
    ``Deep(n_in, [r], n_out, a)`` is the same function as ``TwoLayer(n_in, r, n_out, a)``.

    Explained in: book/01_conservation/02_feedforward.ipynb
    """

    def __init__(
        self,
        n_in: int,
        widths: Sequence[int],
        n_out: int,
        activation: str = "relu",
        bias: bool = False,
    ) -> None:
        super().__init__()
        widths = list(widths)
        if not widths:
            raise ValueError("widths must list at least one hidden width, got []")
        check_positive_ints(
            n_in=n_in, n_out=n_out, **{f"widths[{i}]": w for i, w in enumerate(widths)}
        )
        _check_activation(activation)
        self.activation, self.n_in = activation, n_in
        sizes = [n_in, *widths, n_out]
        self.layers = nn.ModuleList(
            nn.Linear(a, b, bias=bias) for a, b in zip(sizes[:-1], sizes[1:], strict=True)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        sigma = ACTIVATIONS[self.activation]
        for layer in self.layers[:-1]:
            x = sigma(layer(x))
        return self.layers[-1](x)


class SwiGLU(nn.Module):
    """``f(x) = C (silu(B x) ⊙ (A x))``, the gated feed-forward block of LLaMA-style models.

    Shapes: ``A.weight`` and ``B.weight`` are ``(width, n_in)``, ``C.weight`` is
    ``(n_out, width)``; input ``(batch, n_in)``, output ``(batch, n_out)``. Hidden unit ``i``
    owns the row ``A[i, :]``, the row ``B[i, :]`` and the column ``C[:, i]``.

    Explained in: book/01_conservation/02_feedforward.ipynb
    """

    def __init__(self, n_in: int, width: int, n_out: int) -> None:
        super().__init__()
        check_positive_ints(n_in=n_in, width=width, n_out=n_out)
        self.A = nn.Linear(n_in, width, bias=False)
        self.B = nn.Linear(n_in, width, bias=False)
        self.C = nn.Linear(width, n_out, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.C(F.silu(self.B(x)) * self.A(x))


def sinusoidal_encoding(
    tokens: int,
    d_model: int,
    dtype: torch.dtype = torch.float64,
    device: torch.device | None = None,
) -> torch.Tensor:
    """The fixed encoding of Vaswani et al. (2017), shape ``(tokens, d_model)``.

    Column ``2j`` is ``sin(t / 10000^{2j/d_model})`` and column ``2j+1`` its cosine.

    Explained in: book/01_conservation/03_attention.ipynb
    """
    t = torch.arange(tokens, dtype=dtype, device=device)[:, None]
    j = torch.arange(d_model, dtype=dtype, device=device)[None, :]
    angle = t / 10000.0 ** (2 * torch.div(j, 2, rounding_mode="floor") / d_model)
    return torch.where(j % 2 == 0, torch.sin(angle), torch.cos(angle))


def rotary(z: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    """Rotate ``z`` of shape ``(..., tokens, d)`` (``d`` even) in the 2×2 blocks of RoPE.

    Block ``j`` (coordinates ``2j, 2j+1``) of token ``t`` turns by ``t · base^{-2j/d}``
    radians, so that ``⟨rot_s q, rot_t k⟩`` depends on ``q, k`` and ``t − s`` only.

    Explained in: book/01_conservation/03_attention.ipynb
    """
    tokens, d = z.shape[-2], z.shape[-1]
    freq = base ** (-torch.arange(0, d, 2, dtype=z.dtype, device=z.device) / d)
    angle = torch.arange(tokens, dtype=z.dtype, device=z.device)[:, None] * freq[None, :]
    cos, sin = torch.cos(angle), torch.sin(angle)
    even, odd = z[..., 0::2], z[..., 1::2]
    return torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)


class MultiHeadAttention(nn.Module):
    """Multi-head self-attention written out with ``einsum`` (no fused kernel, no biases).

    Head ``i`` has ``W_Q[i], W_K[i]`` of shape ``(d_k, d_model)``, ``W_V[i]`` of shape
    ``(d_v, d_model)`` and ``W_O[i]`` of shape ``(d_model, d_v)``; for tokens ``X``
    (``(tokens, d_model)``) the output is
    ``Σ_i softmax(X W_Q[i]^T (X W_K[i]^T)^T / sqrt(d_k)) X W_V[i]^T W_O[i]^T``.

    Args:
        pe: ``None``; ``"sinusoidal"`` (a fixed encoding added to the input); or ``"rope"``
            (queries and keys rotated in 2×2 blocks, needs even ``d_k``).
        causal: mask the attention to earlier tokens.

    Shapes: input ``(batch, tokens, d_model)``, output ``(batch, tokens, d_model)``.

    Explained in: book/01_conservation/03_attention.ipynb
    """

    def __init__(
        self,
        d_model: int,
        heads: int,
        d_k: int,
        d_v: int,
        pe: str | None = None,
        causal: bool = False,
    ) -> None:
        super().__init__()
        check_positive_ints(d_model=d_model, heads=heads, d_k=d_k, d_v=d_v)
        if pe not in POSITIONAL_ENCODINGS:
            raise ValueError(f"pe must be one of {list(POSITIONAL_ENCODINGS)}, got {pe!r}")
        if pe == "rope" and d_k % 2:
            raise ValueError(f"d_k must be even for pe='rope' (2×2 rotation blocks), got {d_k}")
        self.d_model, self.heads, self.d_k, self.d_v, self.pe, self.causal = (
            d_model,
            heads,
            d_k,
            d_v,
            pe,
            causal,
        )
        self.W_Q = nn.Parameter(torch.randn(heads, d_k, d_model) / math.sqrt(d_model))
        self.W_K = nn.Parameter(torch.randn(heads, d_k, d_model) / math.sqrt(d_model))
        self.W_V = nn.Parameter(torch.randn(heads, d_v, d_model) / math.sqrt(d_model))
        self.W_O = nn.Parameter(torch.randn(heads, d_model, d_v) / math.sqrt(d_v * heads))

    def _encode(self, x: torch.Tensor) -> torch.Tensor:
        if self.pe == "sinusoidal":
            return x + sinusoidal_encoding(x.shape[-2], self.d_model, x.dtype, x.device)
        return x

    def _weights(self, x: torch.Tensor) -> torch.Tensor:
        q = torch.einsum("btd,hkd->bhtk", x, self.W_Q)
        k = torch.einsum("btd,hkd->bhtk", x, self.W_K)
        if self.pe == "rope":
            q, k = rotary(q), rotary(k)
        logits = torch.einsum("bhsk,bhtk->bhst", q, k) / math.sqrt(self.d_k)
        if self.causal:
            tokens = x.shape[-2]
            mask = torch.ones(tokens, tokens, dtype=torch.bool, device=x.device).triu(1)
            logits = logits.masked_fill(mask, float("-inf"))
        return torch.softmax(logits, dim=-1)

    def attention(self, x: torch.Tensor) -> torch.Tensor:
        """The attention weights, shape ``(batch, heads, tokens, tokens)``."""
        _check_input(
            x, (x.shape[1] if x.dim() == 3 else -1, self.d_model), "(batch, tokens, d_model)"
        )
        return self._weights(self._encode(x))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_input(
            x, (x.shape[1] if x.dim() == 3 else -1, self.d_model), "(batch, tokens, d_model)"
        )
        x = self._encode(x)
        v = torch.einsum("btd,hvd->bhtv", x, self.W_V)
        mixed = torch.einsum("bhst,bhtv->bhsv", self._weights(x), v)
        return torch.einsum("bhsv,hdv->bsd", mixed, self.W_O)


class MoE(nn.Module):
    """A mixture of SwiGLU experts: ``f(x) = Σ_e g_e(x) E_e(x)``.

    Gate logits ``z = W x`` with ``gate.weight = W`` of shape ``(experts, d_model)`` (row ``e``
    is expert ``e``'s gate vector). ``gate="softmax"``: ``g = softmax(z)``; ``gate="sigmoid"``:
    the normalized sigmoid ``g_e = σ(z_e) / Σ_j σ(z_j)``. With ``top_k`` only the ``k`` largest
    logits are kept and the gate is renormalized over them (the others get ``g_e = 0``).

    Shapes: input ``(batch, d_model)``, output ``(batch, n_out)``; expert ``e`` is
    ``experts[e]``, a :class:`SwiGLU` ``(d_model, width, n_out)``.

    Explained in: book/01_conservation/04_moe.ipynb
    """

    def __init__(
        self,
        d_model: int,
        experts: int,
        width: int,
        n_out: int,
        gate: str = "softmax",
        top_k: int | None = None,
    ) -> None:
        super().__init__()
        check_positive_ints(d_model=d_model, experts=experts, width=width, n_out=n_out)
        if gate not in GATES:
            raise ValueError(f"gate must be one of {list(GATES)}, got {gate!r}")
        if top_k is not None and (
            not isinstance(top_k, int) or isinstance(top_k, bool) or not 1 <= top_k <= experts
        ):
            raise ValueError(
                f"top_k must be None or an int in [1, experts={experts}], got {top_k!r}"
            )
        self.gate_kind, self.top_k, self.d_model = gate, top_k, d_model
        self.gate = nn.Linear(d_model, experts, bias=False)
        self.experts = nn.ModuleList(SwiGLU(d_model, width, n_out) for _ in range(experts))

    def gates(self, x: torch.Tensor) -> torch.Tensor:
        """The gate values ``g(x)``, shape ``(batch, experts)``; each row sums to 1."""
        z = self.gate(x)
        keep = torch.ones_like(z)
        if self.top_k is not None:
            kth = z.topk(self.top_k, dim=-1).values[..., -1:]
            keep = (z >= kth).to(z.dtype)
        if self.gate_kind == "softmax":
            weights = torch.exp(z - z.amax(dim=-1, keepdim=True)) * keep
        else:
            weights = torch.sigmoid(z) * keep
        return weights / weights.sum(dim=-1, keepdim=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_input(x, (self.d_model,), "(batch, d_model)")
        outputs = torch.stack([expert(x) for expert in self.experts], dim=-2)
        return torch.einsum("be,beo->bo", self.gates(x), outputs)


class CharLM(nn.Module):
    """``ids ↦ readout(x + attn(x))`` with ``x = embed(ids)``: one causal RoPE attention layer.

    Shapes: ``embed.weight`` is ``(vocab_size, d_model)``, ``attn`` a causal
    :class:`~flowlaws.common.models.MultiHeadAttention` with ``pe="rope"`` (``d_k`` even),
    ``readout.weight`` is ``(vocab_size, d_model)``; input ``(batch, tokens)`` int64 ids,
    output ``(batch, tokens, vocab_size)`` logits of the next character. The residual
    ``x +`` lets the model learn bigrams before attention has learnt anything; it holds no
    parameter, so the attention's laws are unchanged.

    Explained in: book/01_conservation/06_real_data.ipynb
    """

    def __init__(self, vocab_size: int, d_model: int, heads: int, d_k: int, d_v: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab_size, d_model)
        self.attn = MultiHeadAttention(d_model, heads, d_k, d_v, pe="rope", causal=True)
        self.readout = nn.Linear(d_model, vocab_size, bias=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids)
        return self.readout(x + self.attn(x))


def image_classifier(n_in: int, width: int, n_classes: int, experts: int = 0) -> nn.Module:
    """A classifier of flattened images: :class:`SwiGLU` ``(n_in, width, n_classes)``, or with
    ``experts > 0`` a softmax :class:`MoE` of that many SwiGLU experts of ``width`` units.

    Input ``(batch, n_in)``, output ``(batch, n_classes)`` logits.
    Explained in: book/01_conservation/06_real_data.ipynb
    """
    if experts < 0:
        raise ValueError(f"experts must be >= 0 (0: a plain SwiGLU), got {experts}")
    if experts == 0:
        return SwiGLU(n_in, width, n_classes)
    return MoE(n_in, experts, width, n_classes)
