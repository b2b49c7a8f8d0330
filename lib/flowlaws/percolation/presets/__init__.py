"""Part II's full presets: the sizes that decide a chapter's claims, and how each is computed.

A :class:`~flowlaws.percolation.presets.base.FullPreset` names a chapter, the computation
(``compute(params, **where)`` → ``(verdicts, numbers)``), its ``full`` parameters and a
``smoke`` size that runs the same code path in seconds (the tests), the modules whose code
decides the result (their hash is the stored file's code version, :mod:`flowlaws.common.stored`),
and the device it needs. ``make full`` (``tools/full.py``) runs one or all of them and writes
``book/02_percolation/stored/<chapter>_full.json``; ``make gpu-check`` runs those that need
``cuda``. The ensembles run seeded run by run and chunked over Dask
(:mod:`flowlaws.common.chunks`), so a full preset resumes after an interruption and spreads over a
cluster (``where``: ``workers``, ``scheduler``, ``cache_dir``, ``progress``).

Each preset lives in a module of its own (its ``PRESET`` and ``compute``), whose code, with what
it imports, is its stored file's code version: adding or changing one preset leaves the other
presets' stored results current. What they share is :mod:`~flowlaws.percolation.presets.base`.
This module only lists them; no stored result hashes it.

To add one: write a module here with ``compute`` (a function of ``params`` that calls the
chapter's own library functions) and ``PRESET`` (``smoke`` values that run in seconds,
``modules=(__name__,)``), and list it in :data:`PRESETS` (CONTRIBUTING.md, "A full preset").

Explained in: book/02_percolation/08_real_data.ipynb.
"""
from __future__ import annotations

from flowlaws.percolation.presets import (
    adaptive_cascade,
    cascade_calibration,
    controls,
    grokking_cascade,
    grokking_delay,
    real_data,
    sgd_search,
)
from flowlaws.percolation.presets.base import VERDICT_KEYS, FullPreset

__all__ = ["FullPreset", "PRESETS", "preset", "VERDICT_KEYS"]

PRESETS: dict[str, FullPreset] = {
    m.PRESET.chapter: m.PRESET
    for m in (real_data, cascade_calibration, controls, sgd_search, adaptive_cascade,
              grokking_delay, grokking_cascade)}
"""Every Part II full preset, by chapter key (its stored file's name). The grokking chapter's
GPU preset (Nanda et al.'s setting, 64 runs) is run by ``tools/gpu_check.py`` itself, into its
checkpoint store."""


def preset(chapter: str) -> FullPreset:
    """The full preset of ``chapter`` (``"08_real_data"``), refused by name when none."""
    if chapter not in PRESETS:
        raise KeyError(f"no full preset for chapter {chapter!r}; there are {sorted(PRESETS)}")
    return PRESETS[chapter]
