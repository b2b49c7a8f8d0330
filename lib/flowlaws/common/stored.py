"""Stored results of full presets: written by ``make full``, read and checked by the chapters.

A chapter's reader preset runs in minutes; its *full* preset (the sizes that decide a claim)
runs once, on a machine with time or a GPU, and its result is kept in the repository as a JSON
file, ``book/<part>/stored/<chapter>_full.json``, which the chapter shows beside its own
reader-size result. A stored file holds

- ``schema`` (:data:`SCHEMA`), ``chapter``, ``preset`` ("full"), ``params`` (every size, seed
  and setting the computation was given), ``verdicts`` (name → verdict record: ``verdict``,
  ``p_value``, ``power``, ``lam``, ``lam_err``, ``n_runs``, ``n_points``, ``summary``),
  ``numbers`` (anything else the chapter prints);
- ``code``: the code version, :func:`code_version`: the git commit (and whether the work tree
  had changes), the library's fingerprint, and ``computation``: a hash of the source of the
  modules the computation runs (the ``modules`` named and every ``flowlaws`` module they import,
  recursively, but for the plumbing of ``flowlaws.book``);
- ``device``, ``started`` (UTC, ISO 8601), ``wall_s`` and ``cpu_s`` (seconds), ``host``
  (:func:`host_description`).

:func:`read_stored` refuses a file whose ``computation`` hash differs from the current code's,
naming the file and both hashes (:class:`StaleStoredResultError`): the code that produced the stored
numbers is not the code the chapter runs. Only the computation's own modules count, so an edit
of a figure or a table helper does not invalidate a stored run, while an edit of the training
loop or the cascade test does. The commit and the library fingerprint are kept for the record.

Explained in: book/02_percolation/08_real_data.ipynb (the stored full preset beside the reader's).
"""
from __future__ import annotations

import ast
import dataclasses
import datetime
import hashlib
import importlib.metadata
import importlib.util
import json
import math
import os
import platform
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from flowlaws.book.cache import library_fingerprint
from flowlaws.book.ledger import VERDICTS

__all__ = [
    "SCHEMA",
    "REQUIRED",
    "StaleStoredResultError",
    "computation_fingerprint",
    "host_description",
    "code_version",
    "to_json",
    "write_stored",
    "read_stored",
    "stored_rows",
    "STORED_COLUMNS",
    "stored_table",
    "stored_claim",
    "beside_stored",
    "stored_path",
    "read_if_current",
]

SCHEMA = 1

REQUIRED = ("schema", "chapter", "preset", "params", "verdicts", "numbers", "code", "device",
            "started", "wall_s", "cpu_s")

VERDICT_KEYS = ("verdict", "p_value", "power", "n_runs", "summary")
CASCADE_VERDICTS = ("cascade", "no cascade", "inconclusive")
"""A stored verdict is a cascade test's or, for a claim decided otherwise (the grokking delay),
one of the ledger's :data:`~flowlaws.book.ledger.VERDICTS`."""


class StaleStoredResultError(ValueError):
    """A stored result computed by other code than the code that would compute it now."""


def _module_file(name: str) -> Path | None:
    spec = importlib.util.find_spec(name)
    return Path(spec.origin) if spec is not None and spec.origin else None


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # ``name`` is an attribute of a module, not a submodule
        return False


def _flowlaws_imports(path: Path, name: str) -> set[str]:
    """The ``flowlaws`` modules that the module ``name`` (file ``path``) imports."""
    found = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("flowlaws")}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            if base.startswith("flowlaws"):
                found.add(base)
                found |= {f"{base}.{a.name}" for a in node.names if _is_module(f"{base}.{a.name}")}
    return found


def computation_fingerprint(modules: Sequence[str]) -> str:
    """A hash of the source of ``modules`` and of every ``flowlaws`` module they import,
    recursively (16 hex digits), except the plumbing of ``flowlaws.book`` (cache, progress bars,
    sliders: they decide no number). A module that does not exist is a
    ``ModuleNotFoundError``."""
    seen: dict[str, Path] = {}
    todo = list(modules)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        path = _module_file(name)
        if path is None:
            raise ModuleNotFoundError(f"no module {name!r} to fingerprint")
        seen[name] = path
        todo.extend(m for m in _flowlaws_imports(path, name) - set(seen)
                    if not m.startswith("flowlaws.book") and m != "flowlaws")
    digest = hashlib.sha256()
    for name in sorted(seen):
        digest.update(name.encode() + b"\0" + seen[name].read_bytes())
    return digest.hexdigest()[:16]


def _git(*args: str) -> str:
    root = Path(__file__).resolve().parents[3]
    try:
        return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True,
                              timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def code_version(modules: Sequence[str]) -> dict:
    """``{"commit", "dirty", "library", "computation", "modules"}`` of the code now."""
    return {"commit": _git("rev-parse", "HEAD") or "unknown",
            "dirty": bool(_git("status", "--porcelain", "--untracked-files=no", "lib")),
            "library": library_fingerprint(), "computation": computation_fingerprint(modules),
            "modules": sorted(modules)}


def to_json(obj: Any) -> Any:
    """``obj`` as JSON values: numpy and torch numbers and arrays as numbers and lists, tuples
    as lists, a dataclass (a test's configuration) as the dict of its fields, NaN and
    infinities as the strings ``"nan"``, ``"inf"``, ``"-inf"`` (JSON has no NaN;
    :func:`read_stored` turns them back into floats)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return to_json(dataclasses.asdict(obj))
    if isinstance(obj, Mapping):
        return {str(k): to_json(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [to_json(v) for v in obj]
    if hasattr(obj, "tolist") and not isinstance(obj, str):  # numpy / torch
        return to_json(obj.tolist())
    if isinstance(obj, bool | np.bool_):
        return bool(obj)
    if isinstance(obj, float | np.floating):
        x = float(obj)
        return x if math.isfinite(x) else ("nan" if math.isnan(x) else
                                           ("inf" if x > 0 else "-inf"))
    if isinstance(obj, np.integer):
        return int(obj)
    return obj


def _from_json(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _from_json(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_from_json(v) for v in obj]
    if obj in ("nan", "inf", "-inf"):
        return float(obj)
    return obj


def _cpu_model() -> str:
    """The processor's model name (``/proc/cpuinfo`` on Linux, else :func:`platform.processor`)."""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def host_description() -> dict:
    """What else a rerun must match to reproduce a stored result bit for bit: Python, the CPU
    count and model (float kernels differ between processors, and a chaotic SGD run amplifies
    a last bit), torch's intra-op thread count, and the versions of torch and numpy."""
    versions = {}
    for package in ("torch", "numpy"):
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = "absent"
    import torch

    # torch's intra-op threads: training the grokking ensemble can round differently with them
    return {"python": platform.python_version(), "cpus": os.cpu_count(), "cpu": _cpu_model(),
            "torch_threads": torch.get_num_threads(), **versions}


def write_stored(path: Path | str, *, chapter: str, params: dict, verdicts: dict,
                 numbers: dict, modules: Sequence[str], device: str, started: datetime.datetime,
                 wall_s: float, cpu_s: float, preset: str = "full") -> dict:
    """Write the stored result (module docstring) to ``path`` atomically; returns it."""
    record = to_json({
        "schema": SCHEMA, "chapter": chapter, "preset": preset, "params": params,
        "verdicts": verdicts, "numbers": numbers, "code": code_version(modules),
        "device": device, "started": started.astimezone(datetime.UTC).isoformat(
            timespec="seconds"),
        "wall_s": round(float(wall_s), 1), "cpu_s": round(float(cpu_s), 1),
        "host": host_description(),
    })
    _check(record, Path(path))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".partial")
    tmp.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return record


def _check(record: Any, path: Path) -> None:
    if not isinstance(record, dict):
        raise ValueError(f"{path}: a stored result must be a JSON object")
    missing = [k for k in REQUIRED if k not in record]
    if missing:
        raise ValueError(f"{path}: missing key(s) {missing}")
    if record["schema"] != SCHEMA:
        raise ValueError(f"{path}: schema {record['schema']!r}, this library reads {SCHEMA}")
    for name, v in record["verdicts"].items():
        absent = [k for k in VERDICT_KEYS if k not in v]
        if absent:
            raise ValueError(f"{path}: verdict {name!r} lacks {absent}")
        if v["verdict"] not in (*CASCADE_VERDICTS, *VERDICTS):
            raise ValueError(f"{path}: verdict {name!r} is {v['verdict']!r}")
    if not {"commit", "library", "computation", "modules"} <= set(record["code"]):
        raise ValueError(f"{path}: 'code' must hold commit, library, computation and modules")


def read_stored(path: Path | str, *, check_code: bool = True) -> dict:
    """The stored result at ``path``, validated (a missing key, an unknown schema or verdict is
    a ``ValueError`` naming the file); with ``check_code``, refused with
    :class:`StaleStoredResultError` when its computation's code differs from the code now."""
    path = Path(path)
    try:
        record = _from_json(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, json.JSONDecodeError) as error:
        raise ValueError(f"{path}: cannot read a stored result ({error})") from error
    _check(record, path)
    if check_code:
        now = computation_fingerprint(record["code"]["modules"])
        if now != record["code"]["computation"]:
            raise StaleStoredResultError(
                f"{path} was computed by other code (computation {record['code']['computation']}"
                f", commit {record['code']['commit'][:10]}) than the library's now ({now}): "
                "run its full preset again (make full CHAPTER=" + record["chapter"] + ")")
    return record


def _field(v: Any, key: str) -> Any:
    """``v[key]`` of a record (a dict, or a verdict object read by key or attribute), else
    None."""
    if isinstance(v, Mapping):
        return v.get(key)
    try:
        return v[key]
    except (KeyError, TypeError, AttributeError):
        return getattr(v, key, None)


def _finite(x: Any) -> float | None:
    return float(x) if isinstance(x, float | int | np.floating) and math.isfinite(x) else None


def _row(label: str, name: str, v: Any, when: str) -> dict:
    lam, err = _finite(_field(v, "lam")), _finite(_field(v, "lam_err"))
    both = lam is not None and err is not None  # no-break spaces: "1.91 ± 0.04" stays one line
    return {"run": label, "set": name, "verdict": _field(v, "verdict"),
            "p": _finite(_field(v, "p_value")), "power": _finite(_field(v, "power")),
            "lam": f"{lam:.2f}\u00a0±\u00a0{err:.2f}" if both else None,
            "size": f"{_field(v, 'n_runs')} runs × {_field(v, 'n_points') or '?'} points",
            "when": when}


def stored_rows(reader: Mapping[str, dict], stored: dict | None) -> list[dict]:
    """Rows for :func:`flowlaws.book.tables.show_table`: each verdict of the chapter's reader
    run (``reader``: name → a judged record, a dict or a verdict object that reads by key)
    and, beside it, the stored full preset's (``stored``: :func:`read_stored`'s record, None
    when there is none). Columns: ``run``,
    ``set``, ``verdict``, ``p``, ``power``, ``lam``, ``size``, ``when``."""
    rows = []
    for name, v in reader.items():
        rows.append(_row("reader preset (this run)", name, v, "now"))
        if stored is not None and name in stored["verdicts"]:
            when = (f"{stored['started'][:10]}, {stored['device']}, "
                    f"{stored['wall_s'] / 60:.0f} min")
            rows.append(_row("stored run, full preset", name, stored["verdicts"][name], when))
    return rows


STORED_COLUMNS = {"run": "run", "set": "ensemble", "verdict": "verdict", "p": "p",
                  "power": "power", "lam": "λ̂", "size": "size", "when": "when, where, wall time"}


def stored_table(chapter: str, reader: Mapping[str, dict], folder: Path | str = "stored"
                 ) -> tuple[Any, str]:
    """``(table, note)`` for a chapter: its reader verdicts (name → judged record) with the
    stored full preset's beside them (``folder/<chapter>_full.json``, relative to the
    notebook), and a line saying which stored run is shown, that none is stored here (a copy
    without the repository's ``stored`` folder, on Colab say), or that the stored file was
    refused because its computation's code changed since (then only the reader rows show)."""
    from flowlaws.book.tables import show_table

    stored, note = read_if_current(chapter, folder)
    return show_table(stored_rows(reader, stored), STORED_COLUMNS,
                      {"p": ".3f", "power": ".2f"}), note


def stored_path(chapter: str, folder: Path | str = "stored") -> Path:
    """Where ``chapter``'s full result is stored: ``folder/<chapter>_full.json``."""
    return Path(folder) / f"{chapter}_full.json"


def read_if_current(chapter: str, folder: Path | str = "stored") -> tuple[dict | None, str]:
    """``(record, note)``: ``folder/<chapter>_full.json`` when it exists and its computation's
    code is the library's now, else ``None`` with the reason (missing, or refused as stale)."""
    path = stored_path(chapter, folder)
    if not path.exists():
        return None, f"no stored full-preset run here ({path} is missing)"
    try:
        record = read_stored(path)
    except StaleStoredResultError as refused:
        return None, f"stored run refused: {refused}"
    return record, (f"stored run, full preset: {path.name}, commit "
                    f"{record['code']['commit'][:10]}, {record['device']}, {record['started']}, "
                    f"wall {record['wall_s'] / 60:.1f} min, CPU {record['cpu_s'] / 60:.1f} min")


def beside_stored(record: dict, stored: str, this: str) -> str:
    """One line that gives both runs of a number: "stored run, full preset (date, device, wall
    time): ``stored`` · this build, reader preset: ``this``" (``record``: the stored file)."""
    when = (f"{record['started'][:16].replace('T', ' ')} UTC, {record['device']}, "
            f"{record['wall_s'] / 60:.0f} min wall")
    return f"stored run, full preset ({when}): {stored} · this build, reader preset: {this}"


def stored_claim(record: dict | None, claim_id: str, verdict: str, number: str,
                 first_verdict: str | None = None) -> tuple[str, str, str | None]:
    """The ledger row ``(verdict, number, first_verdict)`` of ``claim_id`` given this build's
    (reader preset) ``verdict``, ``number`` and ``first_verdict``: when ``record`` (a current
    stored full preset, :func:`read_if_current`) decided the claim, its verdict and first
    verdict, and a number that gives both runs (:func:`beside_stored`, this build's as
    "<verdict> (…)"); else this build's row unchanged."""
    stored = ((record or {}).get("numbers", {}).get("claims") or {}).get(claim_id)
    if stored is None:
        return verdict, number, first_verdict
    both = beside_stored(record, stored["number"], f"{verdict} ({number})")
    return stored["verdict"], both, stored["first_verdict"]
