"""Ensembles and sweeps split into chunks of runs, computed here or on a Dask cluster, cached.

A sweep is a function ``fn(seeds, **params)`` that computes one *chunk* of runs: ``seeds`` a
list of ints, one per run, and the result a dict whose arrays/tensors carry a leading run axis
(``(len(seeds), ...)``), or a list of per-run records. ``fn`` must compute run ``r`` from
``seeds[r]`` and ``params`` alone (seeds per run, never per chunk: no generator shared by the
runs of a chunk), so the same seeds give the same runs however they are chunked and wherever
they run. :func:`run_chunked` splits the seeds into chunks of ``chunk_size``, and

- **executes** them in this process (the default: no set-up, no other process), on a
  ``LocalCluster`` of ``workers`` processes on this machine (``threads_per_worker=1``,
  ``dashboard_address=None``), or on the cluster whose scheduler address is given as
  ``scheduler=`` or in the environment variable :data:`SCHEDULER_ENV`
  (``FLOWLAWS_DASK_SCHEDULER=tcp://host:8786``); a ``dask.distributed.Client`` can also be
  passed as ``client=``;
- **caches** every finished chunk on this machine as soon as it arrives
  (:func:`flowlaws.book.cache.store_or_load`, atomic writes), keyed by ``fn`` (for a library
  function its name and the library's fingerprint, as
  :func:`flowlaws.book.cache.calls.call_key`), the chunk's seeds and ``params``: a sweep that
  was interrupted resumes where it stopped, computing only the chunks not yet stored;
- **shows** the chunks done with a progress bar (:func:`flowlaws.book.progress.bar`).

:func:`concat_runs` joins the chunks' results along the run axis. Why Dask and not Ray: the
sweeps are a few hundred independent tasks of seconds to minutes, with results of a few
megabytes returned to the caller; ``dask.distributed`` runs them with no server to set up on one
machine and the same code on a cluster, and it is a pure-Python dependency of a few megabytes.

Explained in: book/02_percolation/08_real_data.ipynb (the full preset's 2,048 runs).
"""
from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from flowlaws.book.cache.calls import call_key
from flowlaws.book.cache.store import cache_dir as default_cache_dir
from flowlaws.book.cache.store import store_or_load
from flowlaws.book.progress import bar

__all__ = [
    "SCHEDULER_ENV",
    "scheduler_address",
    "run_seeds",
    "split_seeds",
    "chunk_stem",
    "ChunkReport",
    "ChunksUnfinishedError",
    "run_chunked",
    "concat_runs",
]


SCHEDULER_ENV = "FLOWLAWS_DASK_SCHEDULER"
"""An environment variable holding a Dask scheduler address: sweeps run on that cluster."""


def run_seeds(seed: int, n_runs: int) -> list[int]:
    """``n_runs`` per-run seeds drawn from ``seed`` (``numpy.random.SeedSequence``, 32 bits).

    Prefix-stable: the first 32 of ``run_seeds(s, 2048)`` are ``run_seeds(s, 32)``, so a full
    ensemble holds the reader's runs; different ``seed`` s give unrelated (fresh) runs.
    """
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    if isinstance(n_runs, bool) or not isinstance(n_runs, int | np.integer) or n_runs < 1:
        raise ValueError(f"n_runs must be a positive int, got {n_runs!r}")
    return [int(s) for s in np.random.SeedSequence(int(seed)).generate_state(int(n_runs))]


def split_seeds(seeds: Sequence[int], chunk_size: int) -> list[list[int]]:
    """``seeds`` in consecutive chunks of ``chunk_size`` (the last one may be shorter)."""
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int | np.integer) \
            or chunk_size < 1:
        raise ValueError(f"chunk_size must be a positive int, got {chunk_size!r}")
    seeds = [int(s) for s in seeds]
    if not seeds:
        raise ValueError("seeds is empty: a sweep needs at least one run")
    return [seeds[i:i + chunk_size] for i in range(0, len(seeds), int(chunk_size))]


def chunk_stem(fn: Callable, seeds: Sequence[int], params: dict) -> str:
    """The cache file name (without ``.pt``) of the chunk ``fn(seeds, **params)``."""
    name = getattr(fn, "__name__", "chunk")
    return f"chunk-{name}-{call_key(fn, (list(seeds),), dict(params))}"


@dataclass
class ChunkReport:
    """What :func:`run_chunked` did: ``n_chunks`` in all, ``loaded`` from the cache,
    ``computed`` now, and ``where`` ("this process", "LocalCluster(2 workers)", an address)."""

    n_chunks: int
    loaded: int
    computed: int
    where: str


class ChunksUnfinishedError(RuntimeError):
    """The ``deadline`` of :func:`run_chunked` passed: ``done`` of ``total`` chunks are stored;
    the same call resumes from there."""

    def __init__(self, done: int, total: int) -> None:
        super().__init__(f"{done} of {total} chunks done when the deadline passed; call again "
                         "to resume (finished chunks are cached)")
        self.done, self.total = done, total


def _stored(path: Path) -> bool:
    return path.is_file() and path.stat().st_size > 0


def scheduler_address(scheduler: str | None = None) -> str | None:
    """The Dask scheduler a sweep runs on: ``scheduler`` when given, else
    ``$FLOWLAWS_DASK_SCHEDULER`` (:data:`SCHEDULER_ENV`), else None (this process or a
    ``LocalCluster``)."""
    return scheduler or os.environ.get(SCHEDULER_ENV) or None


def _client(scheduler: str | None, workers: int | None, client: Any):
    """``(client, cluster, where)``: the Dask client to use (None: this process)."""
    if client is not None:
        return client, None, f"the given client ({client.scheduler.address})"
    scheduler = scheduler_address(scheduler)
    if scheduler is None and not workers:
        return None, None, "this process"
    from dask.distributed import Client, LocalCluster

    if scheduler is not None:
        return Client(scheduler), None, scheduler
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be a positive int or None, got {workers!r}")
    cluster = LocalCluster(n_workers=workers, threads_per_worker=1, dashboard_address=None,
                           processes=True)
    return Client(cluster), cluster, f"LocalCluster({workers} workers)"


def run_chunked(fn: Callable[..., Any], seeds: Sequence[int], params: dict | None = None, *,
                chunk_size: int = 64, scheduler: str | None = None, workers: int | None = None,
                client: Any = None, cache: bool = True, cache_dir: Path | str | None = None,
                progress: str | None = None, deadline: float | None = None
                ) -> tuple[list[Any], ChunkReport]:
    """``[fn(chunk, **params) for chunk in split_seeds(seeds, chunk_size)]`` and a report.

    Args:
        fn: a chunk of runs from its per-run seeds (module docstring); on a cluster it must be
            importable there (a library function) or picklable by value.
        params: keyword arguments of ``fn``, the same for every chunk (hashed into the key).
        scheduler: a Dask scheduler address; default ``$FLOWLAWS_DASK_SCHEDULER``, else none.
        workers: without a scheduler, a ``LocalCluster`` of this many processes; ``None``:
            every chunk in this process, one after the other.
        client: an existing ``dask.distributed.Client`` (it is not closed).
        cache: store each finished chunk and load stored ones (``cache_dir``: the folder,
            ``None`` for :func:`flowlaws.book.cache.cache_dir`).
        progress: a label for a bar over the chunks (None: no bar).
        deadline: a ``time.monotonic()`` value after which no chunk is started: the chunks
            finished by then are stored and :class:`ChunksUnfinishedError` is raised (a GPU
            run in calls of a few minutes each resumes this way).

    The results come back in the order of the chunks whatever order they finished in.
    """
    params = dict(params or {})
    chunks = split_seeds(seeds, chunk_size)
    folder = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    stems = [chunk_stem(fn, c, params) for c in chunks] if cache else [None] * len(chunks)
    results: list[Any] = [None] * len(chunks)
    todo = []
    for i, stem in enumerate(stems):
        if stem is not None and _stored(folder / f"{stem}.pt"):
            # loads; an unreadable entry is recomputed here, with a warning naming it
            results[i] = store_or_load(stem, lambda c=chunks[i]: fn(c, **params),
                                              folder, name=stem)
        else:
            todo.append(i)
    loaded = len(chunks) - len(todo)
    shown = bar(total=len(chunks), initial=loaded, desc=progress, enabled=progress is not None)

    def finish(i: int, result: Any) -> None:
        results[i] = (result if stems[i] is None else
                      store_or_load(stems[i], lambda: result, folder, name=stems[i]))
        shown.update(1)

    dask_client, cluster, where = _client(scheduler, workers, client) if todo else (
        None, None, "nothing computed")
    try:
        if dask_client is None:
            for i in todo:
                if deadline is not None and time.monotonic() > deadline:
                    break
                finish(i, fn(chunks[i], **params))
        else:
            from dask.distributed import as_completed

            futures = {dask_client.submit(fn, chunks[i], pure=False, **params): i
                       for i in todo}
            for future in as_completed(futures):
                finish(futures[future], future.result())
                if deadline is not None and time.monotonic() > deadline:
                    for other in futures:
                        other.cancel()
                    break
    finally:
        shown.close()
        if cluster is not None:
            dask_client.close()
            cluster.close()
        elif dask_client is not None and client is None:
            dask_client.close()
    done = sum(r is not None for r in results)
    if done < len(chunks):
        raise ChunksUnfinishedError(done, len(chunks))
    return results, ChunkReport(len(chunks), loaded, len(todo), where)


def concat_runs(results: Sequence[Any]) -> Any:
    """The chunks' results joined along the run axis.

    Dicts key by key (tensors with ``torch.cat``, arrays with ``numpy.concatenate``, lists
    chained; any other value must be equal in every chunk, e.g. the recorded steps, and is kept
    once); lists are chained. A value that differs between chunks is refused, naming its key.
    """
    if not results:
        raise ValueError("no chunk results to join")
    first = results[0]
    if isinstance(first, list):
        return [r for chunk in results for r in chunk]
    if not isinstance(first, dict):
        raise TypeError(f"a chunk result must be a dict or a list, got {type(first).__name__}")
    out = {}
    for key, value in first.items():
        values = [r[key] for r in results]
        if isinstance(value, torch.Tensor):
            out[key] = torch.cat(values)
        elif isinstance(value, np.ndarray) and value.ndim >= 1 and key != "steps":
            out[key] = np.concatenate(values)
        elif isinstance(value, list) and key != "steps":
            out[key] = [x for v in values for x in v]
        else:
            if any(not _equal(v, value) for v in values[1:]):
                raise ValueError(f"the chunks disagree on {key!r}, which has no run axis")
            out[key] = value
    return out


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.array_equal(np.asarray(a), np.asarray(b))
    return a == b
