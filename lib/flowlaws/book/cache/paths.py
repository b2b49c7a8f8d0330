"""Files in a cache key: described by their content, never by their size and time stamp.

A :class:`pathlib.Path` (or a ``str`` naming an existing file) passed to a cached computation
is part of its key through the SHA-256 of its bytes; a folder through the relative names and
content hashes of every file under it. An edit that keeps a file's size and modification time
(``os.utime``, a copy with ``cp -p``, a coarse file-system clock) still changes the key.

Hashes are remembered for the life of the process by ``(device, inode, size, mtime, ctime)``:
``ctime`` changes at every write and cannot be set back by ``os.utime``, so a remembered hash
is never stale, and a large data folder is read once per process, not once per call.

Explained in: book/02_percolation/06_adaptive.ipynb (every result cached on disk)
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path, PurePath
from typing import Any

__all__ = ["file_sha256", "describe_path", "existing_file"]

_known: dict[tuple[str, int, int, int, int, int], str] = {}  # stamp -> sha256 of the content


def file_sha256(path: Path) -> str:
    """The hex SHA-256 of the bytes of the file ``path`` (remembered while it is unchanged)."""
    st = path.stat()
    stamp = (str(path.resolve()), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns,
             st.st_ctime_ns)
    if stamp not in _known:
        digest = hashlib.sha256()
        with path.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        _known[stamp] = digest.hexdigest()
    return _known[stamp]


def existing_file(text: str) -> Path | None:
    """``text`` as the path of an existing file, or ``None`` (not a path, or no file there)."""
    if not text or len(text) > 4096 or "\0" in text or "\n" in text:
        return None
    try:
        path = Path(text).expanduser()
        return path if path.is_file() else None
    except (OSError, ValueError):
        return None


def describe_path(path: PurePath) -> Any:
    """``path`` with the content of what it names: a file's SHA-256, a folder's files (relative
    names and SHA-256, recursively, in sorted order), or only its name when nothing is there."""
    p = Path(path).expanduser()
    try:
        if p.is_file():
            return {"path": str(path), "sha256": file_sha256(p)}
        if p.is_dir():
            files = []
            for root, dirs, names in os.walk(p):
                dirs.sort()
                for n in sorted(names):
                    f = Path(root) / n
                    if f.is_file():
                        files.append([f.relative_to(p).as_posix(), file_sha256(f)])
            return {"path": str(path), "folder": files}
    except OSError as error:
        raise OSError(f"cache key: cannot read {path} to describe it ({error})") from error
    return {"path": str(path)}
