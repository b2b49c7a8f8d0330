"""Checked paths for the data readers: a folder or file that is missing or unreadable is named.

Explained in: book/01_conservation/06_real_data.ipynb.
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

__all__ = [
    "checked_folder",
    "first_existing",
    "unreadable",
    "not_utf8",
]


def checked_folder(path: str | Path, expected: str) -> Path:
    """``path`` as a folder that exists, or a ``FileNotFoundError`` saying what belongs in it."""
    folder = Path(path).expanduser()
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder} is not a folder; expected a folder with {expected}")
    return folder


def first_existing(folder: Path, names: Sequence[str]) -> Path:
    """The first of ``names`` present in ``folder``; the error lists them all."""
    for name in names:
        if (folder / name).is_file():
            return folder / name
    raise FileNotFoundError(f"none of {list(names)} found in {folder}")


def unreadable(path: Path, what: str, error: BaseException) -> ValueError:
    """The error for a file that exists but cannot be read (truncated, damaged), naming it.

    Raise it ``from error``: the original exception stays attached.
    """
    reason = str(error).strip().splitlines()[0] if str(error).strip() else ""
    reason = f"{type(error).__name__}: {reason}" if reason else type(error).__name__
    return ValueError(f"{path}: cannot read this {what} ({reason}); the file may be truncated "
                      "or damaged: download or copy it again")


def not_utf8(path: Path, error: UnicodeDecodeError, hint: str = "re-save it as UTF-8"
             ) -> ValueError:
    """The error for a text file that is not UTF-8 (a latin-1 CSV, say), naming it and the byte."""
    bad = error.object[error.start : error.start + 1]
    return ValueError(f"{path} is not UTF-8 text: byte {bad.hex() or '?'} at offset "
                      f"{error.start} cannot be decoded ({error.reason}); {hint}")
