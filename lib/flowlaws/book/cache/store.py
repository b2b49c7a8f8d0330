"""Entries on disk: a checksummed closed format, atomic writes, loading, ``store_or_load``.

An entry ``<folder>/<stem>.pt`` is a header line, a payload and a checksum line::

    flowlaws-cache 3\n<payload>\nsha256 <64 hex digits of the SHA-256 of the payload>\n

The payload is :func:`torch.save` of ``{"name": ..., "result": encode(result)}``
(:mod:`flowlaws.book.cache.codec`), streamed to disk while it is hashed, and read with
``torch.load(..., weights_only=True)``. Loading checks the checksum first: an entry whose bytes
changed after it was written (one flipped bit on a disk, an edit, a truncated copy) is named in
a :class:`CacheWarning` and recomputed, never served. An entry naming a class the cache does
not rebuild is refused the same way, without importing or calling it.

An entry is written atomically (a temporary file in the same folder, then ``os.replace``), so
an interrupted run never leaves half a file behind (a ``*.partial`` file older than
:data:`PARTIAL_MAX_AGE_S` that a killed process left is removed at the next save). Nothing is
lost when the disk fails: a result that cannot be saved (an unwritable folder, a type that
cannot be stored) is returned with a :class:`CacheWarning` naming the file.

The folder is ``$FLOWLAWS_CACHE`` or ``~/.cache/flowlaws``, read at every call
(:func:`cache_dir`).

Explained in: book/02_percolation/05_dsi.ipynb (sweeps cached between runs).
"""
from __future__ import annotations

import hashlib
import io
import os
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from flowlaws.book.cache.codec import decode, encode

__all__ = ["PARTIAL_MAX_AGE_S", "FORMAT", "CacheWarning", "cache_dir", "write_entry",
           "entry_bytes", "read_entry", "atomic_write", "atomic_save", "remove_stale_partials",
           "short_reason", "store_or_load"]

PARTIAL_MAX_AGE_S = 3600.0
"""A ``*.partial`` file older than this (seconds) belongs to a write that was killed."""

FORMAT = 3
"""The layout of a stored entry (3: a checksummed header line, then the payload)."""

_MAGIC = f"flowlaws-cache {FORMAT}\n".encode()
_TRAILER = len(b"\nsha256 ") + 64 + 1  # the checksum line


class CacheWarning(UserWarning):
    """A cache entry could not be written or read; the result was returned or recomputed."""


def cache_dir() -> Path:
    """The cache folder: ``$FLOWLAWS_CACHE`` if set (read now, not at import), else
    ``~/.cache/flowlaws``."""
    env = os.environ.get("FLOWLAWS_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "flowlaws"


_default_dir = cache_dir  # for functions whose argument is called cache_dir


class _Hashing:
    """A binary file that hashes what is written to it."""

    def __init__(self, f: Any) -> None:
        self.f, self.sha = f, hashlib.sha256()

    def write(self, data: bytes) -> int:
        self.sha.update(data)
        return self.f.write(data)

    def flush(self) -> None:
        self.f.flush()


def write_entry(f: Any, stored: dict) -> None:
    """Write an entry holding ``stored`` (already encoded) to the binary file ``f``."""
    f.write(_MAGIC)
    hashing = _Hashing(f)
    torch.save(stored, hashing)
    f.write(b"\nsha256 " + hashing.sha.hexdigest().encode() + b"\n")


def entry_bytes(stored: dict) -> bytes:
    """The bytes of an entry holding ``stored`` (already encoded)."""
    buffer = io.BytesIO()
    write_entry(buffer, stored)
    return buffer.getvalue()


def read_entry(path: Path) -> Any:
    """The stored dict of the entry ``path``, checksum verified; a ``ValueError`` saying what
    is wrong (another format, a checksum mismatch), ``FileNotFoundError`` when it is absent."""
    raw = Path(path).read_bytes()
    if not raw.startswith(_MAGIC):
        raise ValueError(f"it is not a flowlaws cache entry of format {FORMAT} (an older cache "
                         "format, or another file)")
    payload, trailer = raw[len(_MAGIC):-_TRAILER], raw[-_TRAILER:]
    if len(raw) < len(_MAGIC) + _TRAILER or not trailer.startswith(b"\nsha256 ") \
            or hashlib.sha256(payload).hexdigest().encode() != trailer[8:-1]:
        raise ValueError("its checksum does not match its content: the file changed after it "
                         "was written (a flipped bit, an edit or a truncated copy)")
    return torch.load(io.BytesIO(payload), weights_only=True)


def remove_stale_partials(folder: Path | str, max_age: float = PARTIAL_MAX_AGE_S) -> list[Path]:
    """Delete the ``*.partial`` files in ``folder`` older than ``max_age`` seconds.

    A killed write leaves its temporary file behind; a younger one may belong to a write still
    running in another process, so it is kept. Returns the files removed; errors are ignored.
    """
    removed = []
    now = time.time()
    try:
        candidates = list(Path(folder).glob("*.partial"))
    except OSError:
        return removed
    for path in candidates:
        try:
            if now - path.stat().st_mtime > max_age:
                path.unlink()
                removed.append(path)
        except OSError:
            continue
    return removed


def atomic_write(write: Callable[[Any], None], path: Path) -> None:
    """Call ``write(f)`` on a temporary binary file in ``path``'s folder, then move it to
    ``path`` (``os.replace``): ``path`` is either the old file or the whole new one.

    Stale ``*.partial`` files of earlier killed writes in the folder are removed first.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_partials(path.parent)
    handle, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".partial")
    try:
        with os.fdopen(handle, "wb") as f:
            write(f)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_save(obj: Any, path: Path) -> None:
    """``torch.save`` to ``path`` through a temporary file and ``os.replace``."""
    atomic_write(lambda f: torch.save(obj, f), path)


def short_reason(error: BaseException) -> str:
    """A one-line reason for an unreadable file that never suggests unsafe loading."""
    text = str(error)
    if "weights_only" in text or "Weights only" in text:
        return ("it holds a type that safe loading (torch.load with weights_only=True) "
                "does not read")
    first = text.strip().splitlines()[0] if text.strip() else ""
    return f"{type(error).__name__}: {first[:200]}" if first else type(error).__name__


def _load(path: Path) -> tuple[bool, Any]:
    """``(True, result)`` for a sound entry, ``(False, None)`` when missing or refused."""
    try:
        stored = read_entry(path)
        if not (isinstance(stored, dict) and "result" in stored):
            raise ValueError("it holds no result")
        return True, decode(stored["result"])
    except FileNotFoundError:
        return False, None
    except Exception as error:  # noqa: BLE001 - any unreadable entry is recomputed, named
        warnings.warn(f"cache entry {path} could not be read ({short_reason(error)}); recomputing "
                      "it and overwriting the file", CacheWarning, stacklevel=4)
        return False, None


def store_or_load(stem: str, compute: Callable[[], Any], cache_dir: Path | str | None = None,
                  name: str = "") -> Any:
    """The entry ``<cache_dir>/<stem>.pt``: loaded when sound, else computed and saved.

    ``cache_dir=None`` uses :func:`cache_dir` (read at this call). A result that cannot be
    saved is returned anyway, with a :class:`CacheWarning` naming the file; an entry that is
    unreadable, fails its checksum or names a class the cache does not rebuild is named in a
    :class:`CacheWarning` and recomputed.
    """
    folder = Path(cache_dir).expanduser() if cache_dir is not None else _default_dir()
    path = folder / f"{stem}.pt"
    found, result = _load(path)
    if found:
        return result
    result = compute()
    try:
        stored = {"name": name, "result": encode(result, "the result")}
        atomic_write(lambda f: write_entry(f, stored), path)
    except Exception as error:  # noqa: BLE001 - the computed result is never thrown away
        warnings.warn(f"could not save the result to the cache file {path} "
                      f"({type(error).__name__}: {error}); it is returned but not cached",
                      CacheWarning, stacklevel=3)
    return result
