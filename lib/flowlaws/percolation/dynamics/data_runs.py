"""Chapter II.8's experiment: an SGD ensemble of two-layer networks on a real data set, its
order parameter C_max and relative variance R, a one-line report and its figure.

Every function takes what decides its result as arguments, so
:func:`flowlaws.book.call_cache.cached_call` keys it by them (the data included).

Explained in: book/02_percolation/08_real_data.ipynb
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import torch

from flowlaws.book.style import COLUMN_INCHES
from flowlaws.percolation.cascade.variance import noise_scale, relative_variance
from flowlaws.percolation.cascade.verdicts import EnsembleVerdict
from flowlaws.percolation.dynamics.adaptive import train_ensemble
from flowlaws.percolation.dynamics.ensemble import TwoLayerShape, ensemble_forward, ensemble_init
from flowlaws.percolation.topology.clusters import cmax_curves

__all__ = ["data_run", "run_figure", "run_report"]


def data_run(X: torch.Tensor, Y: torch.Tensor, width: int, steps: int, *, n_runs: int, lr: float,
             batch_size: int, init_scale: float, record_every: int, seed: int,
             name: str = "data") -> dict:
    """``n_runs`` tanh networks of ``width`` neurons trained with SGD (mini-batch noise of
    ``batch_size``) on ``X`` ``(n, d)``, ``Y`` ``(n, k)`` from small initialisations
    (``init_scale``, seed + 1; noise seed ``seed``), all at once on ``X``'s device.

    Returns ``steps`` ``(T,)``, ``C`` ``(n_runs, T)`` (C_max every ``record_every`` steps),
    ``R`` ``(T,)`` its relative variance, ``acc`` the mean training accuracy (sign of the output
    for one output, argmax otherwise), ``noise`` R's robust noise scale and ``flat`` the share
    of R's steps that are exactly flat.
    """
    shape = TwoLayerShape(X.shape[1], width, Y.shape[1], "tanh")
    theta0 = ensemble_init(shape, n_runs, seed=seed + 1, scale=init_scale, dtype=torch.float32)
    p = train_ensemble(theta0.to(X.device), shape, X, Y, optimizer="sgd", lr=lr, n_steps=steps,
                       batch_size=batch_size, seed=seed, record_every=record_every,
                       progress=f"SGD on {name}")
    out = ensemble_forward(p.final, shape, X)
    acc = ((out.argmax(-1) == Y.argmax(-1)) if Y.shape[1] > 1
           else ((out[..., 0] > 0) == (Y[:, 0] > 0)))
    C = cmax_curves(p.theta, shape)
    R = relative_variance(C)
    return {"steps": p.steps, "C": C, "R": R, "acc": acc.float().mean().item(),
            "noise": noise_scale(R), "flat": float(np.mean(np.diff(R) == 0))}


def run_report(name: str, r: dict) -> str:
    """Two lines on a :func:`data_run`: accuracy, mean C_max at the start, its largest and its
    end value; R's noise scale and its share of flat steps."""
    C = r["C"]
    return (f"{name}: training accuracy {r['acc']:.1%}; mean C_max at the start "
            f"{C[:, 0].mean():.2f}, largest {C.mean(0).max():.2f}, at the end "
            f"{C[:, -1].mean():.2f}\n  noise scale of R: {r['noise']:.2g} ({r['flat']:.0%} of "
            "its steps are exactly flat)")


def run_figure(r: dict, verdict: EnsembleVerdict, title: str) -> plt.Figure:
    """Mean C_max and R against the step, with the raw detector's chain (open circles, not
    evidence) and the persistent peaks of a cascade the test found (triangles, drawn only when
    the verdict is "cascade"); the title carries the verdict and its p-value."""
    fig, axes = plt.subplots(2, 1, figsize=(COLUMN_INCHES, 4.6), sharex=True)
    axes[0].plot(r["steps"], r["C"].mean(0))
    axes[1].plot(r["steps"], r["R"], lw=0.8)
    v = verdict.cascade
    found = v.peaks if v.verdict == "cascade" else ()
    marks = ((verdict.seed.raw_peaks, "o", "raw detector's chain (not evidence)"),
             (found, "v", "persistent peaks of the cascade found"))
    for peaks, mark, text in marks:
        pk = np.asarray(peaks, dtype=float)
        if len(pk):
            y = np.interp(pk, r["steps"], r["R"])
            axes[1].plot(pk, y, mark, mfc="none" if mark == "o" else None, ms=8, label=text)
    if len(verdict.seed.raw_peaks) or len(found):
        axes[1].legend()
    axes[0].set(ylabel="mean C_max", title=f"{title}: {v.verdict}, p = {v.p_value:.3f}")
    axes[1].set(xlabel="step", ylabel="relative variance R", xscale="log")
    return fig
