"""The book's figure style, set once, and the plots that chapters share.

Explained in: book/01_conservation/01_gradient_flow.ipynb.
"""

from __future__ import annotations

from collections.abc import Mapping

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np

PALETTE = ["#1f5a94", "#d1495b", "#2e933c", "#edae49", "#6b4c9a", "#00798c"]


def use_book_style() -> None:
    """Apply the book's matplotlib style: readable sizes, light grid, the book's colours."""
    mpl.rcParams.update(
        {
            "figure.figsize": (6.4, 3.8),
            "figure.dpi": 110,
            "savefig.dpi": 150,
            "axes.grid": True,
            "grid.alpha": 0.3,
            "axes.spines.top": False,
            "axes.spines.right": False,
            "axes.prop_cycle": mpl.cycler(color=PALETTE),
            "font.size": 10,
            "legend.frameon": False,
        }
    )


def plot_conservation_error(
    curves: Mapping[str, tuple[np.ndarray, np.ndarray]],
    *,
    floor: float = 1e-17,
    title: str | None = None,
) -> plt.Figure:
    """Log-scale conservation error against time, one line per labelled ``(t, error)`` pair.

    Errors below ``floor`` (exact zeros at ``t = 0``) are drawn at ``floor`` so the log axis
    keeps them; the float64 round-off level ``1e-16`` is marked.
    """
    fig, ax = plt.subplots()
    for label, (t, err) in curves.items():
        ax.plot(t, np.maximum(err, floor), label=label, lw=1.8)
    ax.axhline(1e-16, color="0.5", ls=":", lw=1, label="float64 round-off")
    ax.set_yscale("log")
    ax.set_xlabel("time t  (gradient descent: t = lr · step)")
    ax.set_ylabel(r"$\|h(\theta_t)-h(\theta_0)\|_F \,/\, \|\theta_0\|^2$")
    if title:
        ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    return fig
