"""Log-log plots of fitted power laws, and small result tables, for the chapters' findings.

- :func:`plot_power_law` draws measured points, their fitted line and a reference slope;
- :func:`plot_sweeps` puts one such panel per :class:`flowlaws.fits.Sweep` side by side;
- :func:`markdown_table` turns rows of results into a Markdown table (the book renders it).

Explained in: book/01_conservation/04_moe.ipynb (the table of claims),
book/01_conservation/05_discrete_steps.ipynb (the exponents).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np

from flowlaws.fits import PowerLawFit, Sweep


def _anchor(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """The geometric means of ``x`` and ``y``: where a reference slope is pinned."""
    return float(np.exp(np.log(x).mean())), float(np.exp(np.log(y).mean()))


def plot_power_law(
    ax: plt.Axes,
    x: np.ndarray,
    y: np.ndarray,
    fit: PowerLawFit,
    *,
    reference: float | None = None,
    label: str = "measured",
    fit_label: str = "fit",
    color: str | None = None,
) -> None:
    """Points ``(x, y)`` on log-log axes, the fitted line over their range and a reference slope.

    The fitted line is labelled with its exponent and standard error; the reference line
    (slope ``reference``, dotted, grey) passes through the geometric mean of the points, so a
    fit that agrees with the theory lies on top of it. Shapes: ``x``, ``y`` are ``(n,)``.
    """
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    line = ax.plot(x, y, "o", ms=4, label=label, color=color)[0]
    ax.plot(x, fit.predict(x), "-", lw=1.4, color=line.get_color(),
            label=f"{fit_label}: slope {fit.exponent:.3f} ± {fit.stderr:.3f}")
    if reference is not None:
        x0, y0 = _anchor(x, y)
        ax.plot(x, y0 * (x / x0) ** reference, ":", color="0.45", lw=1.4,
                label=f"reference slope {reference:g}")
    ax.set_xscale("log")
    ax.set_yscale("log")


def plot_sweeps(
    sweeps: Mapping[str, Sweep],
    *,
    x_labels: Mapping[str, str] | None = None,
    y_label: str = r"$\|h(\theta_k)-h(\theta_0)\|_F$",
    title: str | None = None,
) -> plt.Figure:
    """One log-log panel per sweep (its points, fit and reference slope), side by side.

    ``sweeps`` maps a panel title to a :class:`flowlaws.fits.Sweep`; ``x_labels`` gives each
    panel's x-axis label (the panel title by default).
    """
    if not sweeps:
        raise ValueError("sweeps must name at least one Sweep, got none")
    fig, axes = plt.subplots(1, len(sweeps), figsize=(3.6 * len(sweeps), 3.4), squeeze=False)
    for ax, (name, sweep) in zip(axes[0], sweeps.items(), strict=True):
        plot_power_law(ax, sweep.x, sweep.errors, sweep.fit, reference=sweep.reference)
        ax.set(title=name, xlabel=(x_labels or {}).get(name, name))
        ax.legend(fontsize=7)
    axes[0][0].set_ylabel(y_label)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


def _cell(value: object, fmt: str | None) -> str:
    if fmt is not None and value is not None:
        return format(value, fmt)
    if value is None:
        return "—"
    return str(value).replace("|", r"\|")


def table_text(
    rows: Sequence[Mapping[str, object]],
    columns: Mapping[str, str],
    formats: Mapping[str, str] | None = None,
) -> str:
    """The Markdown text of a table: one line per row, one column per key of ``columns``.

    ``columns`` maps a row key to its column header (in display order); ``formats`` maps a key
    to a :func:`format` spec (``".1e"``). ``None`` shows as a dash; a missing key is an error.
    """
    missing = sorted({k for row in rows for k in columns if k not in row})
    if missing:
        raise KeyError(f"rows lack the columns {missing}")
    formats = formats or {}
    lines = ["| " + " | ".join(columns.values()) + " |",
             "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_cell(row[k], formats.get(k)) for k in columns) + " |"
              for row in rows]
    return "\n".join(lines)


def markdown_table(
    rows: Sequence[Mapping[str, object]],
    columns: Mapping[str, str],
    formats: Mapping[str, str] | None = None,
):
    """:func:`table_text` wrapped for display: a rendered table in a notebook and in the book."""
    from IPython.display import Markdown

    return Markdown(table_text(rows, columns, formats))
