"""The laws of every block of a deep model: relative rates under gradient flow, and one GD step.

For a composite model (the residual Transformer of :mod:`flowlaws.common.transformer`) the
blocks and their laws are those of :func:`~flowlaws.conservation.laws.law_blocks` and
:func:`~flowlaws.conservation.laws.invariant_fn`. Two checks, block by block, at parameters
``θ`` and for a loss ``L`` (cross-entropy of real text, say):

- :func:`law_rates`, the **relative rate** under gradient flow of every entry ``h_j`` of every
  law: ``|dh_j/dt| / (‖∇h_j‖ ‖∇_B L‖) = |⟨∇h_j, ∇L⟩| / (‖∇h_j‖ ‖∇_B L‖)``, the cosine between
  the law's gradient and the block's part of the loss gradient (``∇h_j`` lives on the block's
  parameters ``B``), in ``[0, 1]``: rounding (about 1e-15) for a law, far above for a
  non-law;
- :func:`one_step_scaling`: one GD step ``θ − τ∇L`` changes each quadratic law by exactly
  ``τ² h(∇L)`` (:func:`~flowlaws.conservation.discrete.one_step_change_quadratic`); per block,
  the gap to that prediction and the exponent of ``‖Δh‖`` against ``τ`` (2).

Explained in: book/01_conservation/06_real_data.ipynb
"""
from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import torch
from torch import nn
from torch.func import jvp, vjp, vmap

from flowlaws.book.runtime import one_thread
from flowlaws.book.style import COLUMN_INCHES
from flowlaws.common.fits import fit_power_law
from flowlaws.common.models import MultiHeadAttention
from flowlaws.conservation.discrete import one_step_change_quadratic
from flowlaws.conservation.flat_params import block_params
from flowlaws.conservation.laws import LawFn, invariant_fn, law_blocks
from flowlaws.conservation.losses import LossFn, Params, gradient_and_loss

__all__ = [
    "block_law_fns",
    "law_rates",
    "rates_by_block",
    "BlockStep",
    "one_step_scaling",
    "plot_block_rates",
    "attention_rows",
    "control_law_fns",
    "block_rows",
]


def block_law_fns(model: nn.Module) -> dict[str, LawFn]:
    """Each block of :func:`law_blocks` → its laws as a function of its own parameter dict."""
    return {name: invariant_fn(block) for name, block in law_blocks(model).items()}


def _entry_grad_norms(law: LawFn, key: str, theta: Params, chunk: int) -> torch.Tensor:
    """``‖∇h_j‖`` for every entry ``j`` of ``law(θ)[key]`` (flattened), by chunks of vjps.

    Only the tensors the entry depends on are differentiated (found with one random
    cotangent: the others get an exact zero gradient)."""
    flat, pullback = vjp(lambda t: law(t)[key].reshape(-1), theta)
    probe = pullback(torch.randn_like(flat))[0]
    used = [k for k, v in probe.items() if bool(v.ne(0).any())]
    if not used:  # h does not depend on θ here: every gradient is zero
        return torch.zeros_like(flat)
    rest = {k: v for k, v in theta.items() if k not in used}
    flat, pullback = vjp(lambda t: law(t | rest)[key].reshape(-1), {k: theta[k] for k in used})
    norms = []
    for start in range(0, flat.numel(), chunk):
        index = torch.arange(start, min(start + chunk, flat.numel()), device=flat.device)
        rows = torch.zeros(len(index), flat.numel(), dtype=flat.dtype, device=flat.device)
        rows[torch.arange(len(index)), index] = 1
        (grads,) = vmap(pullback)(rows)
        norms.append(sum(g.flatten(1).pow(2).sum(1) for g in grads.values()).sqrt())
    return torch.cat(norms)


def law_rates(model: nn.Module, loss_fn: LossFn, params: Params, *,
              laws: dict[str, LawFn] | None = None, chunk: int = 64) -> dict[str, float]:
    """The largest relative rate ``|⟨∇h_j, ∇L⟩| / (‖∇h_j‖ ‖∇_B L‖)`` of each law, keyed
    ``"{block}/{law}"``.

    ``params``: ``θ`` (``model.named_parameters()`` names, float64 for a rounding-level
    answer); ``loss_fn``: ``θ ↦ L(θ)`` on the full data (a
    :class:`~flowlaws.conservation.losses.DatasetLoss`). ``laws``: block name → its laws on its
    own parameters (default :func:`block_law_fns`; pass your own to test a candidate).
    Entries with ``∇h_j = 0`` are skipped; NaN when nothing was compared. Dimensionless, in
    ``[0, 1]``. Memory: ``chunk`` gradients of one block at a time.
    Explained in: book/01_conservation/06_real_data.ipynb
    """
    laws = block_law_fns(model) if laws is None else laws
    out = {}
    with one_thread():  # small tensors: a second CPU thread costs more than it gains
        g, _ = gradient_and_loss(loss_fn, params)
        for block, law in laws.items():
            theta, g_b = block_params(params, block), block_params(g, block)
            g_norm = float(sum(v.pow(2).sum() for v in g_b.values()).sqrt())
            _, rates = jvp(law, (theta,), (g_b,))
            for key, rate in rates.items():
                norms = _entry_grad_norms(law, key, theta, chunk)
                keep = norms > 0
                ratio = rate.reshape(-1)[keep].abs() / (norms[keep] * g_norm)
                name = f"{block}/{key}" if block else key
                out[name] = float(ratio.max()) if keep.any() and g_norm > 0 else float("nan")
    return out


def rates_by_block(rates: dict[str, float]) -> dict[str, dict[str, float]]:
    """``"{block}/{law}"`` rates → block → law kind (``"QK"``, ``"VO"``, ``"units"`` …) → max."""
    table: dict[str, dict[str, float]] = {}
    for name, rate in rates.items():
        block, _, law = name.rpartition("/")
        kinds = table.setdefault(block, {})
        kind = law.rsplit(".", 1)[-1]
        kinds[kind] = max(kinds.get(kind, 0.0), rate)
    return table


@dataclass(frozen=True)
class BlockStep:
    """One block under one GD step at each ``lrs``: ``‖Δh‖`` (all its laws stacked), the
    largest relative gap ``‖Δh − τ² h(g)‖ / ‖τ² h(g)‖`` over its laws and step sizes, and the
    exponent of ``‖Δh‖`` against ``τ`` (2 for a quadratic law)."""

    lrs: np.ndarray
    changes: np.ndarray
    gap: float
    exponent: float


def one_step_scaling(model: nn.Module, loss_fn: LossFn, params: Params,
                     lrs: tuple[float, ...] = (1.0, 0.5, 0.25)) -> dict[str, BlockStep]:
    """Per block of :func:`law_blocks`: one full-batch GD step ``θ − τ∇L`` at each ``τ`` in
    ``lrs`` (three or more), against the exact ``τ² h(∇L)`` of
    :func:`~flowlaws.conservation.discrete.one_step_change_quadratic`.

    The identity is exact at any ``τ``; rounding enters through ``h(θ − τg) − h(θ)``, about
    ``1e-16 ‖θ_B‖² / ‖Δh‖`` relative. Explained in: book/01_conservation/06_real_data.ipynb
    """
    if len(lrs) < 3 or min(lrs) <= 0:  # the fitted exponent needs three points
        raise ValueError(f"lrs must hold at least three positive step sizes, got {lrs!r}")
    with one_thread():
        g, _ = gradient_and_loss(loss_fn, params)
    out = {}
    for block, law in block_law_fns(model).items():
        theta, g_b = block_params(params, block), block_params(g, block)
        before, changes, gaps = law(theta), [], []
        for lr in lrs:
            after = law({k: v - lr * g_b[k] for k, v in theta.items()})
            delta = {k: after[k] - before[k] for k in before}
            for k in before:
                predicted = one_step_change_quadratic(lambda p, k=k, law=law: law(p)[k], g_b, lr)
                gaps.append(float((delta[k] - predicted).norm() / predicted.norm()))
            changes.append(float(torch.cat([d.reshape(-1) for d in delta.values()]).norm()))
        changes_arr = np.array(changes)
        fit = fit_power_law(np.asarray(lrs, dtype=float), changes_arr)
        out[block] = BlockStep(np.asarray(lrs, dtype=float), changes_arr, max(gaps), fit.exponent)
    return out


def plot_block_rates(table: dict[str, dict[str, float]], title: str, *,
                     labels: dict[str, str] | None = None, tol: float | None = None,
                     floor: float = 1e-18) -> plt.Figure:
    """The largest relative rate of each law kind, block by block (log scale), one marker per
    kind (``labels``: kind → legend text); blocks in the model's order on the horizontal axis,
    ``tol`` as a dashed line."""
    fig, ax = plt.subplots(figsize=(COLUMN_INCHES, 3.6))
    blocks, labels = list(table), labels or {}
    kinds = list(dict.fromkeys(k for row in table.values() for k in row))
    for i, kind in enumerate(kinds):
        x = [b for b, name in enumerate(blocks) if kind in table[name]]
        y = [max(table[blocks[b]][kind], floor) for b in x]
        ax.plot(x, y, "os^dv"[i % 5], ls="none", label=labels.get(kind, kind), color=f"C{i}")
    if tol is not None:
        ax.axhline(tol, color="0.4", ls="--", lw=1, label=f"tolerance {tol:g}")
    ax.set_xticks(range(len(blocks)), blocks, rotation=90, fontsize=8)
    ax.set(yscale="log", ylabel=r"max $|\langle\nabla h,\nabla L\rangle| / "
           r"(\|\nabla h\|\,\|\nabla_B L\|)$", title=title)
    ax.legend(fontsize=8, loc="center right")
    fig.tight_layout()
    return fig


def attention_rows(p: Params) -> dict[str, torch.Tensor]:
    """A control that is *not* a law of RoPE attention: ``‖W_Q[i][r]‖² − ‖W_K[i][r]‖²`` per
    row ``r`` of each head (``(heads, d_k)``); RoPE mixes rows ``2j`` and ``2j + 1``, so only
    their sums over a 2×2 block are laws. Explained in: book/01_conservation/06_real_data.ipynb
    """
    return {"rows": p["W_Q"].pow(2).sum(-1) - p["W_K"].pow(2).sum(-1)}


def control_law_fns(model: nn.Module) -> dict[str, LawFn]:
    """:func:`attention_rows` for every RoPE attention block of ``model``, for ``laws=``."""
    return {name: attention_rows for name, block in law_blocks(model).items()
            if isinstance(block, MultiHeadAttention) and block.pe == "rope"}


def block_rows(table: dict[str, dict[str, float]], steps: dict[str, BlockStep],
               control: dict[str, dict[str, float]] | None = None) -> list[dict[str, str]]:
    """One row per block for :func:`~flowlaws.book.tables.show_table`: its laws, their largest
    relative rate (:func:`rates_by_block`), the control's (``"—"`` where none), and the
    one-step gap and exponent (:func:`one_step_scaling`), as text."""
    control = control or {}
    return [{"block": block, "laws": ", ".join(kinds), "rate": f"{max(kinds.values()):.1e}",
             "control": (f"{max(control[block].values()):.1e}" if block in control else "—"),
             "gap": f"{steps[block].gap:.1e}", "exponent": f"{steps[block].exponent:.9f}"}
            for block, kinds in table.items()]
