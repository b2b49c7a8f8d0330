"""Cached calls: ``cached_call(fn, *args, **kwargs)``, keyed by the function and all it reads.

A key listed by hand goes stale as soon as the computation reads something the list forgot (a
chapter's key that left out ``n_samples`` served the 64-sample result to a 16-sample run).
:func:`cached_call` derives the key instead (:mod:`flowlaws.book.cache.keys`), from

- the function: a library function by its name (its code is in the library's fingerprint); a
  notebook's, a script's, a local one or one from the reader's own helper module by its code,
  defaults, closure and every global it reads, recursively;
- the content of every argument: tensors, arrays and modules by their bytes, numbers with
  their precision (``np.float32(2.0)`` is not ``2.0``);
- files and folders by their content: a :class:`pathlib.Path`, and a ``str`` naming a file;
- a ``torch.Generator`` or a numpy random generator by its state.

A value whose content cannot be hashed (an open figure read as a global, say) is refused with a
``TypeError`` naming it and the function that reads it. The entry is stored and read by
:func:`flowlaws.book.cache.store.store_or_load` (atomic writes, checksums, a closed format).

Explained in: book/02_percolation/06_adaptive.ipynb (every result cached on disk)
"""
from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from flowlaws.book.cache.keys import cache_key, describe_function
from flowlaws.book.cache.store import store_or_load

__all__ = ["call_key", "cached_call", "cached"]


def call_key(fn: Callable, args: tuple, kwargs: dict) -> str:
    """The key of ``fn(*args, **kwargs)``: the function
    (:func:`flowlaws.book.cache.keys.describe_function`), the content of every argument and
    the library's fingerprint."""
    if not callable(fn):
        raise TypeError(f"cached_call needs a function, got {type(fn).__name__}")
    return cache_key("call", {"function": describe_function(fn),
                              "args": list(args), "kwargs": dict(kwargs)})


def _file_stem(fn: Callable) -> str:
    name = getattr(fn, "__name__", None) or getattr(getattr(fn, "func", None), "__name__", "call")
    return re.sub(r"[^A-Za-z0-9_.-]", "", name.replace("<lambda>", "lambda")) or "call"


def cached_call(fn: Callable, *args: Any, cache_dir: Path | str | None = None,
                **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)``, loaded from the cache when the same call was stored before.

    The key is :func:`call_key`: change any argument, any global a notebook function reads, or
    the function's code, and the call is computed again. ``cache_dir`` (keyword only, not
    passed to ``fn``): the folder, ``None`` for :func:`flowlaws.book.cache.store.cache_dir`.
    A result that cannot be saved is returned with a warning; an entry that is unreadable,
    fails its checksum or names an unregistered class is recomputed with a warning naming it.
    ``fn`` should be a function of what it reads: one that appends to a global it also reads
    changes its own key at every call.
    """
    key = call_key(fn, args, kwargs)
    return store_or_load(f"{_file_stem(fn)}-{key}", lambda: fn(*args, **kwargs),
                         cache_dir, name=_file_stem(fn))


def cached(name: str, params: dict[str, Any], compute: Callable[[], Any],
           cache_dir: Path | str | None = None) -> Any:
    """Return the stored result for ``(name, params)``, computing and storing it when missing.

    Prefer :func:`cached_call`, whose key is derived from everything the computation reads:
    here ``params`` must list it by hand.
    """
    return store_or_load(f"{name}-{cache_key(name, params)}", compute, cache_dir, name=name)
