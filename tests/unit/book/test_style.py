"""Tests of flowlaws.book.style: figures fit the book's column, with legible fonts."""

from __future__ import annotations

from pathlib import Path

import matplotlib as mpl
import matplotlib.pyplot as plt
import pytest
from matplotlib.font_manager import FontProperties

from flowlaws.book.style import (
    COLUMN_INCHES,
    column_panels,
    register_bundled_fonts,
    use_book_style,
)

FONT_KEYS = ["font.size", "axes.titlesize", "axes.labelsize", "xtick.labelsize",
             "ytick.labelsize", "legend.fontsize", "figure.titlesize"]


def test_the_style_sets_no_font_below_8_points():
    with mpl.rc_context():
        use_book_style()
        sizes = {k: FontProperties(size=mpl.rcParams[k]).get_size_in_points() for k in FONT_KEYS}
    assert min(sizes.values()) >= 8, sizes


def test_a_column_figure_is_shown_at_its_natural_width():
    """The column shows 736 px at a 1280 px window; the style draws at 110 dpi."""
    with mpl.rc_context():
        use_book_style()
        assert COLUMN_INCHES * mpl.rcParams["figure.dpi"] <= 736


@pytest.mark.parametrize("n, rows", [(1, 1), (2, 1), (3, 2), (4, 2), (5, 3)])
def test_column_panels_puts_two_panels_to_a_row_in_the_column_width(n, rows):
    fig, axes = column_panels(n, height=2.5)
    try:
        assert len(axes) == n == len(fig.axes)
        assert fig.get_figwidth() == pytest.approx(COLUMN_INCHES)
        assert fig.get_figheight() == pytest.approx(2.5 * rows)
    finally:
        plt.close(fig)


def test_column_panels_refuses_no_panels():
    with pytest.raises(ValueError, match="n and columns"):
        column_panels(0)


def test_a_font_cache_without_matplotlibs_own_fonts_is_repaired(monkeypatch, caplog):
    """A shared font cache written by an installation without the bundled fonts (as on this
    machine, 2026-12-06) made mathtext print findfont warnings into every chapter."""
    from matplotlib import font_manager

    bundled = str(Path(mpl.get_data_path()).resolve())
    stripped = [f for f in font_manager.fontManager.ttflist
                if not str(Path(f.fname).resolve()).startswith(bundled)]
    monkeypatch.setattr(font_manager.fontManager, "ttflist", stripped)
    font_manager.fontManager._findfont_cached.cache_clear()
    with pytest.raises(ValueError):  # the broken state: no STIX font at all
        font_manager.findfont("STIXGeneral", fallback_to_default=False)
    with mpl.rc_context():
        assert register_bundled_fonts() > 0
        caplog.clear()
        assert font_manager.findfont("STIXGeneral").startswith(bundled)
        assert register_bundled_fonts() == 0
    assert "findfont" not in caplog.text
    font_manager.fontManager._findfont_cached.cache_clear()
