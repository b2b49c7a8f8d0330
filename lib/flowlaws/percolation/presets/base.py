"""What every full preset shares: the :class:`FullPreset` record, the judge's declared full and
smoke settings, and the small steps each preset's ``compute`` takes (an ensemble chunked over
Dask, the cascade test at the preset's settings, the stored fields of a verdict, a ledger row).

A preset module imports this one, so a change here makes every stored full result stale (its
code version hashes this module); a change in one preset's own module stales that preset alone.

Explained in: book/02_percolation/08_real_data.ipynb.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from flowlaws.common.chunks import concat_runs, run_chunked, run_seeds
from flowlaws.percolation.cascade.config import READER, SMOKE, CascadeConfig
from flowlaws.percolation.cascade.judge import judge_cascade

__all__ = ["FullPreset", "VERDICT_KEYS", "FULL_JUDGE", "SMOKE_JUDGE", "keep_fields", "judge_at",
           "claim_row", "ensemble"]

VERDICT_KEYS = ("verdict", "reason", "p_value", "power", "power_low", "power_high", "lam",
                "lam_err", "lam_low", "lam_high", "p_c", "p_c_err", "peaks", "lam_claimed",
                "n_runs", "n_dropped", "n_points", "n_null", "n_power", "decides_at",
                "decision", "summary", "x", "R")
"""What a stored verdict keeps of a judged record (``x`` and ``R`` for the figure)."""

FULL_JUDGE: CascadeConfig = READER.replace(n_null=199)
"""The cascade test's declared full settings, shared by every full preset that judges a cascade."""
SMOKE_JUDGE: CascadeConfig = SMOKE
"""The cascade test's settings at smoke size (the tests' code path)."""


@dataclass(frozen=True)
class FullPreset:
    """One chapter's full preset: the ``chapter`` key of its stored file, what it ``decides``,
    its computation (``compute(params, **where)`` → ``(verdicts, numbers)``), its ``full``
    parameters and a ``smoke`` size that runs the same code path in seconds, the ``modules``
    whose code decides the result (their hash is the stored file's code version,
    :mod:`flowlaws.common.stored`), the ``device`` it needs, the minutes it is expected to take
    and the ledger ``claims`` whose rows its stored file keeps."""

    chapter: str
    decides: str
    compute: Callable[..., tuple[dict, dict]]
    full: dict
    smoke: dict
    modules: tuple[str, ...]
    device: str = "cpu"
    expected_minutes: float = 30.0
    claims: tuple[str, ...] = ()


def keep_fields(rec) -> dict:
    """The stored fields (:data:`VERDICT_KEYS`) of a verdict; a ``CascadeVerdict`` and a row
    dict both read by key."""
    out = {}
    for k in VERDICT_KEYS:
        try:
            out[k] = rec[k]
        except (KeyError, AttributeError):
            continue
    return out


def judge_at(C, steps, params: dict, lam: float, sizes: tuple[int, ...] | None = None):
    """The cascade test at the preset's declared configuration (``params["judge"]``, its
    ``alpha`` and ``seed``), claimed ``lam`` and, when given, the ensemble ``sizes`` of its
    power curve."""
    config = params["judge"].replace(alpha=params["alpha"], seed=params["seed"], lam_claimed=lam)
    return judge_cascade(C, np.asarray(steps, float),
                         config if sizes is None else config.replace(sizes=tuple(sizes)))


def claim_row(verdict: str, number: str, first_verdict: str | None) -> dict:
    """A ledger row as the stored file keeps it (``flowlaws.common.stored.stored_claim``)."""
    return {"verdict": verdict, "number": number, "first_verdict": first_verdict}


def ensemble(chunk: Callable, n_runs: int, seed: int, params: dict, chunk_size: int,
             **where) -> dict:
    """``n_runs`` runs of the chunk function ``chunk`` seeded from ``seed``, chunked over Dask
    (``where``: workers, scheduler, cache_dir, progress), concatenated along the run axis, with
    the chunks' ``report``."""
    chunks, report = run_chunked(chunk, run_seeds(seed, n_runs), params, chunk_size=chunk_size,
                                 **where)
    return concat_runs(chunks) | {"report": report}
