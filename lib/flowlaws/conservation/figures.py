"""Part I's figures: conservation errors, power laws, Lie dimensions, cosines, counts.

Explained in: book/01_conservation/01_gradient_flow.ipynb to 05_discrete_steps.ipynb.
"""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np

from flowlaws.book.style import column_panels
from flowlaws.common.fits import PowerLawFit
from flowlaws.conservation.discrete import StepSizeScan, Sweep
from flowlaws.conservation.laws import LAW_TOL
from flowlaws.conservation.lie_count import LawCount

__all__ = [
    "math_label",
    "plot_power_law",
    "plot_sweeps",
    "plot_lie_dims",
    "plot_cosines",
    "plot_counts_vs_closed_form",
    "plot_conservation_error",
    "plot_local_slopes",
]


def _anchor(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """The geometric means of ``x`` and ``y``: where a reference slope is pinned."""
    return float(np.exp(np.log(x).mean())), float(np.exp(np.log(y).mean()))


def _finish(fig: plt.Figure, ax: plt.Axes, title: str | None, legend_loc: str = "best"
            ) -> plt.Figure:
    """Title (if any), legend and a tight layout: the last lines of every one-panel figure."""
    if title:
        ax.set_title(title)
    ax.legend(loc=legend_loc)
    fig.tight_layout()
    return fig


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
    """One log-log panel per sweep (its points, fit and reference slope), two to a row.

    ``sweeps`` maps a panel title to a :class:`Sweep`; ``x_labels`` gives each
    panel's x-axis label (the panel title by default).
    """
    if not sweeps:
        raise ValueError("sweeps must name at least one Sweep, got none")
    fig, axes = column_panels(len(sweeps))
    for ax, (name, sweep) in zip(axes, sweeps.items(), strict=True):
        plot_power_law(ax, sweep.x, sweep.errors, sweep.fit, reference=sweep.reference)
        ax.set(title=name, xlabel=(x_labels or {}).get(name, name))
        ax.legend()
    for ax in axes[:: min(2, len(axes))]:  # the first panel of each row
        ax.set_ylabel(y_label)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


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
    return _finish(fig, ax, title)


_TOKEN = r"(?:\|\|)?[A-Z](?:_[A-Za-z0-9]{1,3})?(?:\^T)?(?:\|\|)?(?:\^2)?"
_MATH_RUN = re.compile(rf"(?<![A-Za-z0-9|]){_TOKEN}(?: (?:[-+] )?{_TOKEN})*(?![A-Za-z0-9|])")


def math_label(text: str) -> str:
    """An ASCII formula in a label set as math: ``"no PE: W_Q W_Q^T - W_K W_K^T"`` →
    ``"no PE: $W_Q W_Q^\\top - W_K W_K^\\top$"``, ``"||A_i||^2 - ||C_i||^2"`` →
    ``"$\\|A_i\\|^2 - \\|C_i\\|^2$"``. A run of capital letters with subscripts,
    transposes or norms (joined by spaces, ``-`` or ``+``) becomes one formula; plain words
    (``no PE``, ``RoPE``) are left alone. The chapters keep their ASCII keys."""

    def formula(match: re.Match) -> str:
        run = match.group(0)
        if not any(mark in run for mark in ("_", "^", "||")):
            return run
        return "$" + run.replace("||", r"\|").replace("^T", r"^\top") + "$"

    return _MATH_RUN.sub(formula, text)


def plot_cosines(
    cosines: Mapping[str, float], tol: float = LAW_TOL, floor: float = 1e-18,
    title: str | None = None,
) -> plt.Figure:
    """Horizontal log-scale bars of the cosines of
    :func:`flowlaws.conservation.laws.orthogonality`, ``tol`` marked.

    A law's bar ends near float64 round-off (1e-16), left of the line; a false candidate's far
    right of it. Values below ``floor`` are drawn at ``floor``.

    Explained in: book/01_conservation/02_feedforward.ipynb
    """
    labels = [math_label(label) for label in cosines]
    values = np.maximum(np.array(list(cosines.values())), floor)
    fig, ax = plt.subplots(figsize=(6.4, 0.45 * len(labels) + 1.2))
    colors = ["#2e933c" if v < tol else "#d1495b" for v in values]
    ax.barh(np.arange(len(labels)), values, color=colors, left=floor)
    ax.axvline(tol, color="0.3", ls="--", lw=1, label=f"threshold {tol:.0e}")
    ax.set_yticks(np.arange(len(labels)), labels)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlim(floor, 2.0)
    ax.set_xlabel(r"largest $|\cos(\nabla h, \nabla_\theta f_k(\theta, x))|$")
    return _finish(fig, ax, title, legend_loc="lower right")


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
    return _finish(fig, ax, title)


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
    return _finish(fig, ax, title)


def plot_local_slopes(scan: StepSizeScan, title: str | None = None) -> plt.Figure:
    """Four panels of a :class:`~flowlaws.conservation.discrete.StepSizeScan`, one line per ``τ``.

    Top: the local slope in ``k`` against ``t = τk``; the local slope in ``τ`` at fixed ``t``
    (solid) and at fixed ``k`` (dashed, drawn at ``t = τk``). Bottom: ``err / τ²`` against
    ``k`` (the curves coincide where the error is ``τ² k`` times a constant) and ``err / τ``
    against ``t`` (they coincide where the error is ``τ`` times a function of ``t``).

    Explained in: book/01_conservation/05_discrete_steps.ipynb.
    """
    fig, (k_ax, lr_ax, k_err, t_err) = column_panels(4, height=3.2)
    colors = plt.cm.viridis(np.linspace(0.0, 0.85, scan.lrs.size))
    for i, (lr, color) in enumerate(zip(scan.lrs, colors, strict=True)):
        label = f"τ = {lr:.2g}"
        k_ax.plot(scan.ts, scan.k_slope[i], color=color, lw=1.4, label=label)
        lr_ax.plot(scan.ts, scan.lr_slope_t[i], color=color, lw=1.4)
        lr_ax.plot(lr * scan.ks, scan.lr_slope_k[i], "--", color=color, lw=1.2)
        k_err.plot(scan.ks, scan.by_k[i] / lr**2, color=color, lw=1.4)
        t_err.plot(scan.ts, scan.by_t[i] / lr, color=color, lw=1.4)
    for ax, refs in ((k_ax, (1, 0)), (lr_ax, (2, 1))):
        for ref in refs:
            ax.axhline(ref, color="0.5", ls=":", lw=1)
        ax.set(xscale="log", xlabel="time t = τk")
    k_ax.set(ylabel="d log err / d log k", title="slope in k, fixed τ")
    lr_ax.set(ylabel="d log err / d log τ", title="slope in τ: fixed t (—), fixed k (--)")
    k_err.set(xscale="log", yscale="log", xlabel="step k", ylabel="err / τ²",
              title="err / τ² against k")
    t_err.set(xscale="log", yscale="log", xlabel="time t = τk", ylabel="err / τ",
              title="err / τ against t")
    k_ax.legend(ncol=2, fontsize=8)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig
