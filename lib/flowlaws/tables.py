"""Counts of conservation laws next to their closed forms: tables and the figures that go with them.

:func:`closed_form` states, per architecture, how many laws the theorems of Part I predict;
:func:`count_table` runs :func:`flowlaws.laws.count` on a list of models and puts each count
next to that prediction; :func:`format_table` prints the rows; :func:`plot_lie_dims`,
:func:`plot_cosines` and :func:`plot_counts_vs_closed_form` draw what the chapters discuss.

Explained in: book/01_conservation/02_feedforward.ipynb, book/01_conservation/03_attention.ipynb
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
from torch import Tensor, nn

from flowlaws.laws import LAW_TOL, LawCount, count
from flowlaws.models import MultiHeadAttention, SwiGLU, TwoLayer
from flowlaws.progress import track

COLUMNS = ("model", "sizes", "D", "jacobian rank", "lie dim", "laws", "closed form", "certified")
"""The columns :func:`format_table` prints by default."""


def closed_form(model: nn.Module) -> int:
    """The number of independent conservation laws the book's theorems predict for ``model``.

    - ``TwoLayer`` ReLU: ``width`` (one rescaling law per hidden unit); GELU, SiLU, tanh: 0.
    - ``SwiGLU``: ``width`` (one law ``‖A[i,:]‖² − ‖C[:,i]‖²`` per hidden unit).
    - ``MultiHeadAttention`` (no PE or sinusoidal): ``heads · (d_k(d_k+1)/2 + d_v(d_v+1)/2)``;
      RoPE: ``heads · (d_k/2 + d_v(d_v+1)/2)``. These assume ``d_k, d_v ≤ d_model`` and at
      least two tokens (with one token the softmax is constant and more laws appear).

    A ``ValueError`` for any other model (the linear network's count is not a single formula).

    Explained in: book/01_conservation/02_feedforward.ipynb, book/01_conservation/03_attention.ipynb
    """
    if isinstance(model, TwoLayer) and model.activation in ("relu", "gelu", "silu", "tanh"):
        return model.V.out_features if model.activation == "relu" else 0
    if isinstance(model, SwiGLU):
        return model.A.out_features
    if isinstance(model, MultiHeadAttention):
        qk = model.d_k // 2 if model.pe == "rope" else model.d_k * (model.d_k + 1) // 2
        return model.heads * (qk + model.d_v * (model.d_v + 1) // 2)
    raise ValueError(f"no closed form for {type(model).__name__} "
                     f"{getattr(model, 'activation', '')}".rstrip())


def count_table(
    cases: Sequence[tuple[str, str, nn.Module, Tensor]], seed: int = 0, progress: bool = True
) -> list[dict[str, object]]:
    """One row per ``(name, sizes, model, inputs)``: the count, its closed form, and the time.

    Each row has ``model`` and ``sizes`` (the labels given), ``D``, ``jacobian rank``,
    ``lie dim``, ``laws`` (:func:`flowlaws.laws.count` with ``seed``), ``closed form``
    (:func:`closed_form`), ``agrees`` (the two equal), ``certified``, ``seconds`` and
    ``count`` (the :class:`~flowlaws.laws.LawCount` itself). Nothing is adjusted to agree.

    Explained in: book/01_conservation/02_feedforward.ipynb
    """
    rows = []
    for name, sizes, model, inputs in track(cases, desc="counting", enabled=progress):
        start = time.perf_counter()
        found = count(model, inputs, seed=seed)
        expected = closed_form(model)
        rows.append({
            "model": name, "sizes": sizes, "D": found.n_params,
            "jacobian rank": found.jacobian_rank, "lie dim": found.lie_dim,
            "laws": found.n_laws, "closed form": expected, "agrees": found.n_laws == expected,
            "certified": found.certified, "seconds": time.perf_counter() - start, "count": found,
        })
    return rows


def format_table(rows: Sequence[Mapping[str, object]], columns: Sequence[str] = COLUMNS) -> str:
    """The rows as a fixed-width text table (floats with three significant digits).

    Explained in: book/01_conservation/02_feedforward.ipynb
    """
    def cell(value: object) -> str:
        return f"{value:.3g}" if isinstance(value, float) else str(value)

    body = [[cell(row[c]) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in body)) for i, c in enumerate(columns)]
    lines = ["  ".join(c.rjust(w) for c, w in zip(columns, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(v.rjust(w) for v, w in zip(r, widths, strict=True)) for r in body]
    return "\n".join(lines)


def plot_lie_dims(counts: Mapping[str, LawCount], title: str | None = None) -> plt.Figure:
    """``D −`` the span's dimension after each bracket level, one line per labelled count.

    Level 0 is the Jacobian alone; the last level is the count of laws. The values of the
    count's first point (the model's own parameters) are drawn; each line has its own marker
    and dash pattern, so that lines which coincide stay visible.

    Explained in: book/01_conservation/02_feedforward.ipynb
    """
    fig, ax = plt.subplots()
    for i, (label, found) in enumerate(counts.items()):
        dims = np.asarray(found.dims[0])
        ax.plot(np.arange(len(dims)), found.n_params - dims, marker="osD^v"[i % 5],
                ls=("-", "--", ":", "-.")[i % 4], lw=1.8, ms=7 - i % 3,
                label=f"{label} (D={found.n_params})")
    ax.set_xlabel("bracket level (0: Jacobian only)")
    ax.set_ylabel("D − dim of the span  (laws left)")
    ax.xaxis.get_major_locator().set_params(integer=True)
    if title:
        ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    return fig


def plot_cosines(
    cosines: Mapping[str, float], tol: float = LAW_TOL, floor: float = 1e-18,
    title: str | None = None,
) -> plt.Figure:
    """Horizontal log-scale bars of :func:`flowlaws.laws.orthogonality` cosines, ``tol`` marked.

    A law's bar ends near float64 round-off (1e-16), left of the line; a false candidate's far
    right of it. Values below ``floor`` are drawn at ``floor``.

    Explained in: book/01_conservation/02_feedforward.ipynb
    """
    labels, values = list(cosines), np.maximum(np.array(list(cosines.values())), floor)
    fig, ax = plt.subplots(figsize=(6.4, 0.45 * len(labels) + 1.2))
    colors = ["#2e933c" if v < tol else "#d1495b" for v in values]
    ax.barh(np.arange(len(labels)), values, color=colors, left=floor)
    ax.axvline(tol, color="0.3", ls="--", lw=1, label=f"threshold {tol:.0e}")
    ax.set_yticks(np.arange(len(labels)), labels)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlim(floor, 2.0)
    ax.set_xlabel(r"largest $|\cos(\nabla h, \nabla_\theta f_k(\theta, x))|$")
    if title:
        ax.set_title(title)
    ax.legend(loc="lower right")
    fig.tight_layout()
    return fig


def plot_counts_vs_closed_form(
    rows: Sequence[Mapping[str, object]], title: str | None = None
) -> plt.Figure:
    """Each row's counted laws against its closed form, one marker per ``model`` label.

    Points on the diagonal agree; a point off it is a disagreement and is labelled. The first
    label's markers are filled, later ones hollow and larger, so that coinciding points stay
    visible.

    Explained in: book/01_conservation/03_attention.ipynb
    """
    fig, ax = plt.subplots()
    top = max(max(int(r["laws"]), int(r["closed form"])) for r in rows) * 1.08 + 1
    ax.plot([0, top], [0, top], color="0.6", ls=":", lw=1, label="count = closed form")
    for i, name in enumerate(dict.fromkeys(r["model"] for r in rows)):
        marker = "osD^v<>"[i % 7]
        mine = [r for r in rows if r["model"] == name]
        style = {"s": 70} if i == 0 else {"s": 70 + 40 * i, "facecolors": "none",
                                           "edgecolors": f"C{i}", "linewidths": 1.5}
        ax.scatter([r["closed form"] for r in mine], [r["laws"] for r in mine], marker=marker,
                   label=name, zorder=3, **style)
        for r in mine:
            if r["laws"] != r["closed form"]:
                ax.annotate(str(r["sizes"]), (r["closed form"], r["laws"]), fontsize=8)
    ax.set_xlabel("closed form")
    ax.set_ylabel("laws counted (D − Lie dim)")
    if title:
        ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    return fig
