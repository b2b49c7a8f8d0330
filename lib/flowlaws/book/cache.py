"""Compute or load: results cached on disk, keyed by a hash of what produced them.

An entry is written atomically (a temporary file in the same folder, then ``os.replace``), so
an interrupted run never leaves half a file behind; a change of any parameter, or of the
library's code, changes the key, so the result is recomputed. Entries are saved with
:func:`torch.save` and loaded with ``torch.load(..., weights_only=True)``: tensors, numbers,
strings, lists and dicts only.

Explained in: book/02_percolation/05_dsi.ipynb (sweeps cached between runs).
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

__all__ = [
    "DEFAULT_DIR",
    "library_fingerprint",
    "cache_key",
    "atomic_save",
    "cached",
]


DEFAULT_DIR = Path(os.environ.get("FLOWLAWS_CACHE", Path.home() / ".cache" / "flowlaws"))


@functools.cache
def library_fingerprint() -> str:
    """A hash of the source of every ``flowlaws`` module, subpackages included.

    Part of every cache key: a result computed by an older version of the library is never
    served after its code changed (a fix in an estimator recomputes the sweeps that use it).
    Every ``.py`` file under the package is read, recursively, with its path relative to the
    package, so an edit inside any subpackage changes the fingerprint.
    """
    package = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def cache_key(name: str, params: dict[str, Any]) -> str:
    """A stable hex key for ``name``, a JSON-serialisable ``params`` dict and the library code."""
    blob = json.dumps({"name": name, "params": params, "library": library_fingerprint()},
                      sort_keys=True, default=repr)
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


def atomic_save(obj: Any, path: Path) -> None:
    """``torch.save`` to ``path`` through a temporary file and ``os.replace``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".partial")
    try:
        with os.fdopen(handle, "wb") as f:
            torch.save(obj, f)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def cached(
    name: str,
    params: dict[str, Any],
    compute: Callable[[], Any],
    cache_dir: Path | str | None = None,
) -> Any:
    """Return the stored result for ``(name, params)``, computing and storing it when missing.

    ``cache_dir=None`` uses ``$FLOWLAWS_CACHE`` or ``~/.cache/flowlaws``.
    """
    folder = Path(cache_dir) if cache_dir is not None else DEFAULT_DIR
    path = folder / f"{name}-{cache_key(name, params)}.pt"
    if path.exists():
        return torch.load(path, weights_only=True)
    result = compute()
    atomic_save(result, path)
    return result
