"""The book's matplotlib style, set once per notebook by :func:`use_book_style`.

Figures are sized for the book's column. At a 1280 px window the column shows an image 736 px
wide; a figure ``COLUMN_INCHES`` wide is 726 px at the style's 110 dpi, so it is shown at its
natural size and a font of ``s`` points is displayed at ``s`` points (``110/96 · s`` CSS pixels
per point). The style sets no font below 8 points. A figure of several panels is
:func:`column_panels`: rows of at most two panels, never a row wider than the column
(``tests/book/test_browser.py`` fails on an image shown at less than 0.8 of its width).

Explained in: book/01_conservation/01_gradient_flow.ipynb.
"""
from __future__ import annotations

import math
from pathlib import Path

import matplotlib as mpl
import matplotlib.pyplot as plt
from matplotlib import font_manager

__all__ = [
    "COLUMN_INCHES",
    "PALETTE",
    "column_panels",
    "register_bundled_fonts",
    "use_book_style",
]


PALETTE = ["#1f5a94", "#d1495b", "#2e933c", "#edae49", "#6b4c9a", "#00798c"]
COLUMN_INCHES = 6.6


def register_bundled_fonts() -> int:
    """Make sure matplotlib's font manager knows the fonts matplotlib ships (STIX, Computer
    Modern, DejaVu Display: mathtext falls back to them) and return how many it had to add.

    Matplotlib keeps one font cache per user (``~/.cache/matplotlib``), shared by every
    environment of the same matplotlib version; a cache written by an installation without those
    fonts makes every figure with math print "findfont: Font family ['STIXGeneral'] not found"
    into the notebook (seen in the built book, 2026-12-06). Adding them through the public
    ``FontManager.addfont`` fixes this kernel without touching the cache file.
    """
    known = {Path(entry.fname).resolve() for entry in font_manager.fontManager.ttflist}
    missing = [path for path in sorted((Path(mpl.get_data_path()) / "fonts" / "ttf").glob("*.ttf"))
               if path.resolve() not in known]
    for path in missing:
        font_manager.fontManager.addfont(str(path))
    return len(missing)


def use_book_style() -> None:
    """Apply the book's matplotlib style: readable sizes, light grid, the book's colours; the
    fonts matplotlib ships are registered first (:func:`register_bundled_fonts`)."""
    register_bundled_fonts()
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
            "axes.titlesize": 10.5,
            "axes.labelsize": 10,
            "xtick.labelsize": 9,
            "ytick.labelsize": 9,
            "legend.fontsize": 8.5,
            "figure.titlesize": 11,
            "legend.frameon": False,
        }
    )


def column_panels(n: int, *, height: float = 3.0, columns: int = 2,
                  **subplots: object) -> tuple[plt.Figure, list[plt.Axes]]:
    """``n`` axes in rows of at most ``columns``, in a figure ``COLUMN_INCHES`` wide.

    ``height`` is the height of one row in inches; ``subplots`` go to :func:`plt.subplots`
    (``sharey=True`` …). Returns the figure and its ``n`` axes in reading order.
    """
    if n < 1 or columns < 1:
        raise ValueError(f"n and columns must be positive, got n={n}, columns={columns}")
    cols = min(n, columns)
    rows = math.ceil(n / cols)
    fig, grid = plt.subplots(rows, cols, figsize=(COLUMN_INCHES, height * rows), squeeze=False,
                             **subplots)
    axes = list(grid.flat)
    for extra in axes[n:]:
        extra.remove()
    return fig, axes[:n]
