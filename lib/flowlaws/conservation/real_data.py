"""Real-data tasks: a character-level language model with RoPE attention, an image classifier
with SwiGLU (or MoE) units, and training runs that record their conservation laws.

The laws are those of :func:`invariants` for the block they are about (the
attention of :class:`CharLM`, the whole :class:`~flowlaws.common.models.SwiGLU` or
:class:`~flowlaws.common.models.MoE` classifier). They stay laws inside a larger model: the time
derivative of ``h`` is ``−⟨∇h, ∇L⟩`` and only the block's own parameters enter it, whatever
comes before the block (an embedding) or after it (a readout and a softmax cross-entropy).

Explained in: book/01_conservation/06_real_data.ipynb.
"""
from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import torch
from torch import nn

from flowlaws.book.runtime import one_thread
from flowlaws.book.style import column_panels
from flowlaws.common.models import MoE, MultiHeadAttention, SwiGLU
from flowlaws.conservation.laws import invariants
from flowlaws.conservation.losses import LossFn, Params, gradient_and_loss
from flowlaws.conservation.training import train
from flowlaws.data.images import (
    FASHION_MNIST_CLASSES,
    MNIST_CLASSES,
    ImageData,
    digits_images,
    read_cifar10,
    read_image_folder,
    read_mnist,
)
from flowlaws.data.text import EOS, read_ptb, read_wikitext, shakespeare_text

__all__ = [
    "LawsFn",
    "TEXT_FORMATS",
    "IMAGE_FORMATS",
    "CharLM",
    "image_classifier",
    "load_text",
    "load_images",
    "flat_features",
    "block_laws",
    "law_groups",
    "block_sq_norm",
    "LawRun",
    "train_with_laws",
    "one_step_gap",
    "plot_law_runs",
    "optimizer_sweep",
    "error_at",
    "law_table",
]


LawsFn = Callable[[Params], dict[str, torch.Tensor]]


TEXT_FORMATS = ("shakespeare", "wikitext", "ptb")


IMAGE_FORMATS = ("digits", "cifar10", "mnist", "fashion_mnist", "folder")


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


def load_text(text_format: str = "shakespeare", folder: str | None = None,
              n_chars: int = 20_000) -> str:
    """The first ``n_chars`` characters of a corpus, for a character-level model.

    ``"shakespeare"`` is the shipped corpus (``folder`` unused). ``"wikitext"`` and ``"ptb"``
    read ``folder`` with :func:`read_wikitext` / :func:`read_ptb`
    (training split) and join the words with spaces, ``<eos>`` becoming a new line.
    Explained in: book/01_conservation/06_real_data.ipynb
    """
    if text_format not in TEXT_FORMATS:
        raise ValueError(f"text_format must be one of {TEXT_FORMATS}, got {text_format!r}")
    if text_format == "shakespeare":
        return shakespeare_text(n_chars)
    if folder is None:
        raise ValueError(f"text_format={text_format!r} needs text_folder, the folder of its files")
    reader = read_wikitext if text_format == "wikitext" else read_ptb
    corpus = reader(folder, max_tokens=n_chars)  # a word is at least one character
    words = corpus.vocab.decode(corpus.train)
    return " ".join(words).replace(f" {EOS}", "\n").replace("\n ", "\n")[:n_chars]


def load_images(image_format: str = "digits", folder: str | None = None,
                n_images: int | None = None, image_size: int = 32) -> ImageData:
    """Images from the shipped digits or a folder in a standard format (training split).

    ``image_format``: ``"digits"`` (shipped), ``"cifar10"``, ``"mnist"``, ``"fashion_mnist"``,
    ``"folder"`` (ImageNet-style class subfolders, resized to ``image_size``). ``n_images``
    keeps a class-mixed random subset (seed 0) of that many.
    Explained in: book/01_conservation/06_real_data.ipynb
    """
    if image_format not in IMAGE_FORMATS:
        raise ValueError(f"image_format must be one of {IMAGE_FORMATS}, got {image_format!r}")
    if image_format == "digits":
        data = digits_images()
    elif folder is None:
        raise ValueError(f"image_format={image_format!r} needs image_folder")
    elif image_format == "cifar10":
        data = read_cifar10(folder)
    elif image_format == "folder":
        data = read_image_folder(folder, image_size)
    else:
        fashion = image_format == "fashion_mnist"
        data = read_mnist(folder, classes=FASHION_MNIST_CLASSES if fashion else MNIST_CLASSES)
    if n_images is not None and n_images < len(data):
        keep = torch.randperm(len(data), generator=torch.Generator().manual_seed(0))[:n_images]
        data = ImageData(data.images[keep], data.labels[keep], data.classes)
    return data


def flat_features(images: torch.Tensor) -> torch.Tensor:
    """``(N, C, H, W)`` images as ``(N, C·H·W)`` features, each centred on its mean over ``N``."""
    X = images.flatten(1)
    return X - X.mean(0, keepdim=True)


def block_laws(model: nn.Module, block: str = "") -> LawsFn:
    """``θ ↦`` :func:`invariants` of the submodule ``block`` of ``model``.

    ``θ`` is a parameter dict of the whole model (or any dict with its keys, e.g. a gradient);
    its entries ``"{block}.{name}"`` are copied into a private copy of the block and the
    block's invariants returned under names ``"{block}.{law}"`` (``block=""``: the model).
    Explained in: book/01_conservation/06_real_data.ipynb
    """
    probe = copy.deepcopy(model.get_submodule(block))
    prefix = f"{block}." if block else ""

    def laws(params: Params) -> dict[str, torch.Tensor]:
        with torch.no_grad():
            for name, p in probe.named_parameters():
                p.copy_(params[prefix + name])
        return {prefix + k: v.clone() for k, v in invariants(probe).items()}

    return laws


def law_groups(names: list[str]) -> dict[str, list[str]]:
    """Law names grouped by kind (their last part): ``"QK"``, ``"VO"``, ``"units"``, ``"sum"``."""
    groups: dict[str, list[str]] = {}
    for name in names:
        groups.setdefault(name.rsplit(".", 1)[-1], []).append(name)
    return groups


def block_sq_norm(params: Params, block: str = "") -> float:
    """``‖θ_block‖²``, the squared norm of the parameters whose names start with ``block``."""
    prefix = f"{block}." if block else ""
    return float(sum(v.detach().double().pow(2).sum() for k, v in params.items()
                     if k.startswith(prefix)))


@dataclass
class LawRun:
    """One training run with its laws: steps, losses and the relative error of each law kind.

    Attributes:
        errors: kind → ``(T,)`` array ``‖h(θ_k) − h(θ_0)‖_F / ‖θ_{0,block}‖²``, where ``h``
            stacks every law of that kind (all heads, all units) and the scale is the squared
            norm of the block's parameters at the start.
        laws: law name → ``(T, ...)`` recorded values.
    """

    optimizer: str
    lr: float
    steps: np.ndarray
    losses: np.ndarray
    errors: dict[str, np.ndarray]
    laws: dict[str, torch.Tensor]


def train_with_laws(
    loss_fn: LossFn, params0: Params, model: nn.Module, block: str = "",
    optimizer: str = "gd", lr: float = 0.1, n_steps: int = 100, *,
    batch_size: int | None = None, record_every: int = 1, seed: int = 0, progress: bool = False,
) -> LawRun:
    """Train with :func:`train`, recording the block's laws every few steps.

    Returns a :class:`LawRun` with the relative conservation error of each kind of law
    (:func:`law_groups`). Explained in: book/01_conservation/06_real_data.ipynb
    """
    run = train(loss_fn, params0, optimizer, lr, n_steps, batch_size=batch_size, seed=seed,
                record_every=record_every, laws=block_laws(model, block), progress=progress)
    scale = block_sq_norm(params0, block)
    errors = {kind: _group_error(run.laws, names) / scale
              for kind, names in law_groups(list(run.laws)).items()}
    return LawRun(optimizer, lr, run.steps, run.losses, errors, run.laws)


def _group_error(laws: dict[str, torch.Tensor], names: list[str]) -> np.ndarray:
    values = torch.cat([laws[n].flatten(1) for n in names], dim=1).double()
    return (values - values[0]).norm(dim=1).cpu().numpy()


def one_step_gap(loss_fn: LossFn, params0: Params, laws: LawsFn, lr: float,
                 optimizer: str = "gd", index: torch.Tensor | None = None,
                 kinds: list[str] | None = None) -> float:
    """How far one step is from the exact identity ``h(θ_1) − h(θ_0) = τ² h(g)``.

    ``g`` is the gradient of the full loss, or of the rows ``index`` (a mini-batch). The step
    is ``θ_1 = θ_0 − τ g`` for ``"gd"``/``"sgd"``; for another optimizer (``"adam"`` …) it is
    that optimizer's first full-batch step from :func:`train`. Returns
    ``max_h ‖Δh − τ² h(g)‖_F / ‖τ² h(g)‖_F`` over the laws (NaN when some ``h(g)`` is exactly
    zero): rounding level for true laws under GD and SGD. ``kinds`` keeps only the laws of
    those kinds (:func:`law_groups`): a *linear* law such as the MoE gate sum has
    ``h(g) = 0``, so it has no relative gap (GD keeps it to rounding).
    Explained in: book/01_conservation/06_real_data.ipynb
    """
    g, _ = gradient_and_loss(loss_fn, params0, index)
    if optimizer in ("gd", "sgd"):
        params1 = {k: v - lr * g[k] for k, v in params0.items()}
    elif index is None:
        params1 = train(loss_fn, params0, optimizer, lr, 1, record_params=True).at(1)
    else:
        raise ValueError(f"index (a mini-batch) is only for 'gd'/'sgd', not {optimizer!r}")
    before, after, of_g = laws(params0), laws(params1), laws(g)
    keys = [k for k in before if kinds is None or k.rsplit(".", 1)[-1] in kinds]
    gaps = [float((after[k] - before[k] - lr**2 * of_g[k]).norm() / (lr**2 * of_g[k]).norm())
            for k in keys]
    return float(np.max(gaps))  # NaN (0/0) propagates


def plot_law_runs(runs: list[LawRun], kinds: dict[str, str], title: str,
                  floor: float = 1e-17) -> plt.Figure:
    """Loss against step next to each law kind's relative error (log scale), one line per run.

    ``kinds`` maps a kind (``"QK"`` …) to its panel title. Runs of the same optimizer share a
    colour; the larger step size is solid, the smaller dashed; the legend sits in the free slot
    of the last row, or in the loss panel.
    """
    n_panels = 1 + len(kinds)
    # an odd number of panels leaves a slot in the last row: the legend goes there
    fig, axes = column_panels(n_panels + n_panels % 2, height=3.2)
    key = axes[n_panels] if n_panels % 2 else None
    axes = axes[:n_panels]
    colours = {o: f"C{i}" for i, o in enumerate(dict.fromkeys(r.optimizer for r in runs))}
    top = {o: max(r.lr for r in runs if r.optimizer == o) for o in colours}
    for r in runs:
        style = dict(color=colours[r.optimizer], ls="-" if r.lr == top[r.optimizer] else "--",
                     lw=1.6, label=f"{r.optimizer}, lr={r.lr:g}")
        axes[0].plot(r.steps, r.losses, **style)
        for ax, kind in zip(axes[1:], kinds, strict=True):
            ax.plot(r.steps[1:], np.maximum(r.errors[kind][1:], floor), **style)
    axes[0].set(xlabel="step k", ylabel="training loss (cross-entropy)", title="loss")
    for ax, label in zip(axes[1:], kinds.values(), strict=True):
        ax.set(xscale="log", yscale="log", xlabel="step k", title=label,
               ylabel=r"$\|h(\theta_k)-h(\theta_0)\|_F\,/\,\|\theta_0^{\mathrm{block}}\|^2$")
    if key is None:
        axes[0].legend()
    else:
        key.axis("off")
        key.legend(*axes[0].get_legend_handles_labels(), loc="center")
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def optimizer_sweep(
    loss_fn: LossFn, params0: Params, model: nn.Module, block: str, lrs: dict[str, float],
    n_steps: int, *, batch_size: int | None = None, record_every: int = 1, seed: int = 0,
) -> list[LawRun]:
    """Each optimizer of ``lrs`` (``"gd"``, ``"sgd"``, ``"adam"`` …) at ``lr`` and at ``lr/2``.

    All runs start at ``params0`` and take ``n_steps`` steps; ``"sgd"`` uses mini-batches of
    ``batch_size`` rows (the same sequence of batches at both step sizes, from ``seed``), the
    others the full batch. Returns the :class:`LawRun` s in the order ``lr, lr/2`` per optimizer.
    Runs on one CPU thread (the GPU, when the tensors are there, is not affected).
    Explained in: book/01_conservation/06_real_data.ipynb
    """
    runs = []
    with one_thread():  # small tensors: CPU threads cost more than they gain
        for optimizer, lr in lrs.items():
            for step in (lr, lr / 2):
                runs.append(train_with_laws(
                    loss_fn, params0, model, block, optimizer, step, n_steps, seed=seed,
                    batch_size=batch_size if optimizer == "sgd" else None,
                    record_every=record_every, progress=True))
    return runs


def error_at(run: LawRun, kind: str, k: int) -> float:
    """The relative error of the law kind ``kind`` recorded at step ``k`` of ``run``."""
    hits = np.flatnonzero(run.steps == k)
    if hits.size == 0:
        raise ValueError(f"step {k} was not recorded (recorded: {run.steps[:5]} ...)")
    return float(run.errors[kind][hits[0]])


def _ratio(a: float, b: float) -> float:
    return a / b if b != 0 else float("nan")


def law_table(runs: list[LawRun], kinds: list[str], ks: list[int]) -> str:
    """A text table: per run its loss and each law kind's error at the steps ``ks``; per pair
    of runs (``lr``, ``lr/2``, as :func:`optimizer_sweep` orders them) the ratio of their
    errors at the same step ``k`` and at the same time ``t = lr·k`` (step ``2k`` of the
    ``lr/2`` run, for the ``k`` whose double was recorded).
    Explained in: book/01_conservation/06_real_data.ipynb
    """
    lines = []
    for big, small in zip(runs[0::2], runs[1::2], strict=True):
        for r in (big, small):
            errors = "  ".join(f"{kind} " + " ".join(f"{error_at(r, kind, k):.2e}" for k in ks)
                               for kind in kinds)
            lines.append(f"{r.optimizer:<5} lr={r.lr:<7g} loss {r.losses[0]:.3f} -> "
                         f"{r.losses[-1]:.3f} | error at k={ks}: {errors}")
        same_k = "  ".join(f"{kind} " + " ".join(
            f"{_ratio(error_at(big, kind, k), error_at(small, kind, k)):.2f}" for k in ks)
            for kind in kinds)
        lines.append(f"{'':5} error(lr) / error(lr/2), same k={ks}: {same_k}")
        doubled = [k for k in ks if 2 * k in small.steps]
        same_t = "  ".join(f"{kind} " + " ".join(
            f"{_ratio(error_at(big, kind, k), error_at(small, kind, 2 * k)):.2f}" for k in doubled)
            for kind in kinds)
        lines.append(f"{'':5} error(lr, k) / error(lr/2, 2k), same time, k={doubled}: {same_t}")
    return "\n".join(lines)
