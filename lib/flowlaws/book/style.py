"""The book's matplotlib style, set once per notebook by :func:`use_book_style`.

Explained in: book/01_conservation/01_gradient_flow.ipynb.
"""
from __future__ import annotations

import matplotlib as mpl

__all__ = [
    "PALETTE",
    "use_book_style",
]


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
