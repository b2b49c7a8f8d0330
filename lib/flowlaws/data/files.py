"""Checked paths for the data readers: a folder or file that is missing is named.

Explained in: book/01_conservation/06_real_data.ipynb.
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

__all__ = [
    "checked_folder",
    "first_existing",
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
