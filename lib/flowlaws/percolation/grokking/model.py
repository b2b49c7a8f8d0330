"""The grokking task and model: modular addition, Nanda et al.'s one-layer Transformer, batched.

The task (Power et al., 2022; Nanda et al., 2023): the inputs are the three tokens
``(a, b, =)`` for every pair ``0 ≤ a, b < p`` (the token ``=`` is the number ``p``), the label
is ``(a + b) mod p``; a seeded random ``fraction`` of the ``p²`` pairs is the training set,
the rest the test set.

The model is Nanda et al.'s one-layer Transformer without layer norm: token and position
embeddings, one attention layer of ``n_heads`` heads (written out with ``einsum``), a ReLU
MLP of ``d_mlp`` neurons with biases, an unembedding to the ``p`` answers, read at the last
position (the ``=`` token; with one layer nothing else reaches the logits, so only that
position's query and MLP are computed). Every parameter carries a leading ensemble dimension
``R``: ``R`` networks with different initial weights (run ``r`` is initialised from seed
``seed + r``) train at once as batched tensors (:mod:`flowlaws.percolation.grokking.training`).

Explained in: book/02_percolation/07_grokking.ipynb
"""
from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass

import torch
from torch.nn import functional as F

from flowlaws.common.checks import as_betas, as_float, as_int

__all__ = ["PARAM_NAMES", "DTYPES", "GrokConfig", "modular_data", "all_pairs", "init_params",
           "forward", "mlp_activations", "loss_and_accuracy"]


PARAM_NAMES = ("W_E", "W_pos", "W_Q", "W_K", "W_V", "W_O", "W_in", "b_in", "W_out", "b_out",
               "W_U")


DTYPES = ("float32", "float64")


@dataclass(frozen=True)
class GrokConfig:
    """Everything that defines a grokking ensemble; the defaults are Nanda et al.'s setting.

    ``n_steps``, ``checkpoint_every``, ``log_every`` and ``tols`` do not change the trajectory,
    so they are not part of the run's key (:func:`run_folder`): a longer run resumes from a
    shorter one, and other metrics are recomputed from the stored records.
    """

    p: int = 113                 # the modulus; p + 1 tokens (0..p-1 and '=')
    fraction: float = 0.3        # fraction of the p² pairs used for training
    d_model: int = 128           # residual-stream width
    n_heads: int = 4             # attention heads, each of width d_model // n_heads
    d_mlp: int = 512             # MLP neurons
    lr: float = 1e-3             # AdamW learning rate (after warm-up)
    weight_decay: float = 1.0    # AdamW decoupled weight decay
    betas: tuple[float, float] = (0.9, 0.98)
    eps: float = 1e-8
    warmup: int = 10             # steps of linear learning-rate warm-up
    n_runs: int = 4              # ensemble size R
    seed: int = 0                # run r is initialised from seed + r
    data_seed: int = 0           # seed of the train/test split (shared by the ensemble)
    n_steps: int = 10_000        # full-batch steps
    log_every: int = 50          # steps between recorded metrics
    checkpoint_every: int = 1000  # steps between checkpoints
    tols: tuple[float, ...] = (0.05,)  # relative distances below which MLP neurons merge
    dtype: str = "float32"

    def __post_init__(self) -> None:
        # refuse what cannot train before any folder is made; numpy scalars become Python
        # numbers (the config is written as JSON)
        fix = functools.partial(object.__setattr__, self)  # the dataclass is frozen
        for name in ("p", "d_model", "n_heads", "d_mlp", "n_runs", "log_every",
                     "checkpoint_every"):
            fix(name, as_int(name, getattr(self, name), minimum=1))
        for name in ("warmup", "n_steps"):
            fix(name, as_int(name, getattr(self, name), minimum=0))
        for name in ("seed", "data_seed"):
            fix(name, as_int(name, getattr(self, name)))
        if self.p < 2:
            raise ValueError(f"p must be at least 2, got {self.p}")
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}")
        fix("fraction", as_float("fraction", self.fraction))
        if not 0 < self.fraction < 1:
            raise ValueError(f"fraction must lie in (0, 1), got {self.fraction}")
        if not 0 < round(self.fraction * self.p**2) < self.p**2:
            raise ValueError(f"fraction={self.fraction} of p²={self.p**2} pairs leaves an "
                             "empty training or test set")
        fix("lr", as_float("lr", self.lr, positive=True))
        fix("eps", as_float("eps", self.eps, positive=True))
        fix("weight_decay", as_float("weight_decay", self.weight_decay, nonnegative=True))
        fix("betas", as_betas("betas", self.betas))
        tols = self.tols if isinstance(self.tols, tuple | list) else (self.tols,)
        fix("tols", tuple(as_float(f"tols[{i}]", t, positive=True) for i, t in enumerate(tols)))
        if not tols or max(self.tols) >= 1:
            raise ValueError(f"tols must be relative distances in (0, 1), got {self.tols}")
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {DTYPES}, got {self.dtype!r} (half precision "
                             "overflows in training and underflows AdamW's eps)")

    def key_params(self, device: torch.device) -> dict:
        """The parameters that define the trajectory (the run folder's key)."""
        d = dataclasses.asdict(self)
        for k in ("n_steps", "checkpoint_every", "log_every", "tols"):
            d.pop(k)
        d["betas"] = list(d["betas"])
        d["device"] = torch.device(device).type
        return d


def modular_data(p: int, fraction: float, seed: int = 0, device: torch.device | str = "cpu"
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(x_train, y_train, x_test, y_test)``: tokens ``(n, 3)`` rows ``(a, b, p)``, labels
    ``(a + b) mod p``; a random ``round(fraction · p²)`` pairs (permutation seeded by
    ``seed``) are the training set."""
    x = all_pairs(p)
    y = (x[:, 0] + x[:, 1]) % p
    perm = torch.randperm(p * p, generator=torch.Generator().manual_seed(seed))
    n_train = round(fraction * p * p)
    tr, te = perm[:n_train], perm[n_train:]
    return tuple(t.to(device) for t in (x[tr], y[tr], x[te], y[te]))


def _shapes(cfg: GrokConfig) -> dict[str, tuple[int, ...]]:  # one network's
    d, H, m, p = cfg.d_model, cfg.n_heads, cfg.d_mlp, cfg.p
    return {"W_E": (p + 1, d), "W_pos": (3, d), "W_Q": (H, d // H, d), "W_K": (H, d // H, d),
            "W_V": (H, d // H, d), "W_O": (d, d), "W_in": (m, d), "b_in": (m,),
            "W_out": (d, m), "b_out": (d,), "W_U": (d, p)}


def init_params(cfg: GrokConfig, device: torch.device | str = "cpu") -> dict[str, torch.Tensor]:
    """Nanda et al.'s initialisation, ``R = cfg.n_runs`` independent networks stacked.

    Gaussian weights of standard deviation ``1/√d_model`` (``1/√p`` for the unembedding),
    zero biases. Shapes (leading ``R``): ``W_E (p+1, d)``, ``W_pos (3, d)``,
    ``W_Q, W_K, W_V (H, d_head, d)``, ``W_O (d, H·d_head)``, ``W_in (d_mlp, d)``,
    ``b_in (d_mlp,)``, ``W_out (d, d_mlp)``, ``b_out (d,)``, ``W_U (d, p)``.
    """
    shapes, d, p = _shapes(cfg), cfg.d_model, cfg.p
    dtype = getattr(torch, cfg.dtype)
    runs = []
    for r in range(cfg.n_runs):
        g = torch.Generator().manual_seed(cfg.seed + r)
        one = {}
        for name, shape in shapes.items():
            scale = 0.0 if name.startswith("b_") else 1 / math.sqrt(p if name == "W_U" else d)
            one[name] = torch.randn(shape, generator=g, dtype=torch.float64) * scale
        runs.append(one)
    return {k: torch.stack([o[k] for o in runs]).to(device=device, dtype=dtype)
            for k in PARAM_NAMES}


def _residual_and_hidden(params: dict[str, torch.Tensor], x: torch.Tensor
                         ) -> tuple[torch.Tensor, torch.Tensor]:
    """The last position's residual after attention ``(R, n, d)`` and the MLP's post-ReLU
    activations ``(R, n, d_mlp)``."""
    P = params
    R, H, dh, d = P["W_Q"].shape
    resid = P["W_E"][:, x] + P["W_pos"][:, None]                   # (R, n, 3, d)
    last = resid[:, :, -1]                                          # (R, n, d)
    q = torch.einsum("rnd,rjd->rnj", last, P["W_Q"].reshape(R, H * dh, d))
    k = torch.einsum("rntd,rjd->rntj", resid, P["W_K"].reshape(R, H * dh, d))
    v = torch.einsum("rntd,rjd->rntj", resid, P["W_V"].reshape(R, H * dh, d))
    q, k, v = q.view(R, -1, 1, H, dh), k.view(R, -1, 3, H, dh), v.view(R, -1, 3, H, dh)
    attn = torch.softmax((q * k).sum(-1) / math.sqrt(dh), dim=2)  # (R, n, 3, H)
    z = (attn[..., None] * v).sum(2).reshape(R, -1, H * dh)
    last = last + torch.einsum("rnj,rdj->rnd", z, P["W_O"])
    hidden = F.relu(torch.einsum("rnd,rmd->rnm", last, P["W_in"]) + P["b_in"][:, None])
    return last, hidden


def forward(params: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """Logits ``(R, n, p)`` of the ensemble at the last position, for tokens ``x`` ``(n, 3)``.

    Attention, written out: the last position's query ``q = W_Q e₂`` (``e_t`` the embedding
    of position ``t``), keys ``k_t = W_K e_t`` and values ``v_t = W_V e_t``, per head
    ``attn_t = softmax_t(q·k_t/√d_head)``, output ``W_O Σ_t attn_t v_t`` (the last position
    sees all three, so the causal mask changes nothing there).
    """
    P = params
    last, hidden = _residual_and_hidden(P, x)
    last = last + torch.einsum("rnm,rdm->rnd", hidden, P["W_out"]) + P["b_out"][:, None]
    return torch.einsum("rnd,rdc->rnc", last, P["W_U"])


def all_pairs(p: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """``(p², 3)`` the tokens ``(a, b, p)`` of every pair, ``a`` major: row ``a·p + b``."""
    a, b = torch.meshgrid(torch.arange(p), torch.arange(p), indexing="ij")
    return torch.stack([a.flatten(), b.flatten(), torch.full((p * p,), p)], dim=1).to(device)


def mlp_activations(params: dict[str, torch.Tensor], p: int) -> torch.Tensor:
    """``(R, d_mlp, p, p)`` every MLP neuron's post-ReLU activation on every input pair
    ``(a, b)`` (no gradient): the neuron as a function on the ``p × p`` grid."""
    W_E = params["W_E"]
    with torch.no_grad():
        hidden = _residual_and_hidden(params, all_pairs(p, W_E.device))[1]
    return hidden.transpose(1, 2).reshape(W_E.shape[0], -1, p, p)


def loss_and_accuracy(params: dict[str, torch.Tensor], x: torch.Tensor, y: torch.Tensor
                      ) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-run mean cross-entropy (log-softmax in float64, as Nanda et al.) and accuracy,
    both ``(R,)``."""
    logits = forward(params, x)
    logp = torch.log_softmax(logits.double(), dim=-1)
    loss = -logp.gather(-1, y.expand(logits.shape[0], -1)[..., None]).squeeze(-1).mean(-1)
    acc = (logits.argmax(-1) == y).double().mean(-1)
    return loss, acc


