"""Run a chapter's full preset and store its result: the one function behind ``make full``
(``tools/full.py``), ``make gpu-check`` and a chapter's ``full_preset = True`` parameter.

A chapter's reader preset runs in minutes on a laptop; its full preset
(:data:`flowlaws.percolation.presets.PRESETS`) has the sizes that decide its claims and takes
tens of minutes. Each chapter reads the stored full result beside its own
(:func:`flowlaws.common.stored.read_if_current`); setting its ``full_preset`` parameter to
``True`` first runs :func:`run_full_preset` here, so the reader's own machine computes and stores
what the chapter then shows. The runs are cached in chunks in a folder of their own
(:func:`full_cache_dir`), so an interrupted run resumes where it stopped.

Explained in: book/02_percolation/05_dsi.ipynb.
"""
from __future__ import annotations

import datetime
import os
import platform
import time
from pathlib import Path

from flowlaws.common.chunks import scheduler_address
from flowlaws.common.stored import stored_path

__all__ = ["STORED_DIR", "stored_path", "full_cache_dir", "default_device", "cpu_seconds",
           "run_full_preset"]

STORED_DIR = Path(__file__).resolve().parents[3] / "book" / "02_percolation" / "stored"


def full_cache_dir() -> Path:
    """The chunk and run cache of the full presets: ``full-presets`` inside the book's cache
    (``$FLOWLAWS_CACHE`` or ``~/.cache/flowlaws``). A folder of its own: the grokking store keeps
    one run per configuration and extends it in place, so a full preset trained in the
    chapters' folder would replace the reader's 8,000-step run by a longer one."""
    from flowlaws.book.cache import cache_dir

    return cache_dir() / "full-presets"


def default_device(chapter: str, workers: int | None = None, *, smoke: bool = False,
                   scheduler: str | None = None) -> str:
    """The device text a stored result records: the GPU's name for a preset that needs
    ``cuda`` (at full size; its smoke size runs on the CPU), else the CPU and the number of
    processes, or the Dask cluster at ``scheduler`` (default ``$FLOWLAWS_DASK_SCHEDULER``),
    whose CPU seconds the record does not count."""
    import torch

    from flowlaws.percolation.presets import preset

    if preset(chapter).device == "cuda" and not smoke:
        if not torch.cuda.is_available():
            raise RuntimeError(f"the full preset of {chapter} needs a GPU (cuda); none here")
        return torch.cuda.get_device_name(0)
    scheduler = scheduler_address(scheduler)
    if scheduler:
        return f"Dask cluster at {scheduler} (CPU seconds: this process only)"
    return f"cpu ({platform.processor() or platform.machine()}, {workers or 1} process(es))"


def cpu_seconds() -> float:
    """CPU seconds (user and system) of this process and of its finished child processes, the
    workers of a Dask ``LocalCluster`` among them once it is closed (``os.times``; on Windows it
    reports no children, so there this process only). A remote cluster's CPU is not counted."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def run_full_preset(chapter: str, *, smoke: bool = False, out_dir: Path | str = STORED_DIR,
                    device: str | None = None, workers: int | None = None,
                    scheduler: str | None = None, cache_dir: Path | str | None = None,
                    progress: str | None = "chunks", deadline: float | None = None) -> dict:
    """Compute ``chapter``'s full preset (``smoke``: its smoke size, the tests' code path) and
    write its stored file ``out_dir/<chapter>_full.json``
    (:func:`flowlaws.common.stored.write_stored`: verdicts, numbers, parameters, code version,
    ``device``, date, wall and CPU seconds); returns the record. ``workers``/``scheduler``:
    spread its chunks of runs over a Dask ``LocalCluster`` or a cluster; ``cache_dir``: the
    chunk cache (default :func:`full_cache_dir`); ``deadline`` (``time.monotonic()`` seconds):
    stop after the chunk that passes it (``ChunksUnfinishedError``; a call again resumes)."""
    from flowlaws.common.stored import write_stored
    from flowlaws.percolation.presets import preset

    p = preset(chapter)
    params = p.smoke if smoke else p.full
    device = (default_device(chapter, workers, smoke=smoke, scheduler=scheduler)
              if device is None else device)
    where = {"workers": workers, "scheduler": scheduler,
             "cache_dir": Path(cache_dir) if cache_dir is not None else full_cache_dir(),
             "progress": progress} | ({} if deadline is None else {"deadline": deadline})
    started = datetime.datetime.now(datetime.UTC)
    t0, c0 = time.perf_counter(), cpu_seconds()
    verdicts, numbers = p.compute(params, **where)
    return write_stored(stored_path(chapter, out_dir), chapter=chapter, params=params,
                        verdicts=verdicts, numbers=numbers, modules=p.modules, device=device,
                        started=started, wall_s=time.perf_counter() - t0,
                        cpu_s=cpu_seconds() - c0, preset="smoke" if smoke else "full")
