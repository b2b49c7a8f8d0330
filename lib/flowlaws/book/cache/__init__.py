"""Compute or load: results cached on disk, keyed by a hash of what produced them.

- :mod:`flowlaws.book.cache.paths`: files in a key, by their content.
- :mod:`flowlaws.book.cache.keys`: keys -- canonical descriptions of arguments, functions and
  paths, and the library's fingerprint.
- :mod:`flowlaws.book.cache.codec`: the closed format of a stored result (only registered
  classes are rebuilt: :func:`stored_type`).
- :mod:`flowlaws.book.cache.store`: entries on disk -- checksums, atomic writes, loading,
  :func:`store_or_load`.
- :mod:`flowlaws.book.cache.calls`: :func:`cached_call`, keyed by everything a call reads.

The names a notebook or another module needs are here: ``from flowlaws.book.cache import
cached_call``.

Explained in: book/02_percolation/05_dsi.ipynb (sweeps cached between runs).
"""
from __future__ import annotations

from typing import Any

from flowlaws.book.cache.calls import cached, cached_call, call_key
from flowlaws.book.cache.codec import RefusedTypeError, registered_types, stored_type
from flowlaws.book.cache.keys import cache_key, canonical, describe_function, library_fingerprint
from flowlaws.book.cache.paths import describe_path
from flowlaws.book.cache.store import (
    PARTIAL_MAX_AGE_S,
    CacheWarning,
    atomic_save,
    cache_dir,
    remove_stale_partials,
    short_reason,
    store_or_load,
)

__all__ = [
    "PARTIAL_MAX_AGE_S",
    "CacheWarning",
    "RefusedTypeError",
    "cache_dir",
    "library_fingerprint",
    "cache_key",
    "canonical",
    "describe_function",
    "describe_path",
    "stored_type",
    "registered_types",
    "atomic_save",
    "remove_stale_partials",
    "short_reason",
    "cached",
    "cached_call",
    "call_key",
    "store_or_load",
]


def __getattr__(name: str) -> Any:
    # DEFAULT_DIR, kept for callers: the current value of cache_dir() whenever it is read
    if name == "DEFAULT_DIR":
        return cache_dir()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
