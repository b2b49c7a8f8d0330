"""Compute or load: results cached on disk, keyed by a hash of what produced them.

An entry is written atomically (a temporary file in the same folder, then ``os.replace``), so
an interrupted run never leaves half a file behind (a ``*.partial`` file older than
:data:`PARTIAL_MAX_AGE_S` that a killed process left is removed at the next save); a change
of any parameter, or of the library's code, changes the key, so the result is recomputed.

The key hashes the *content* of the parameters: tensors and numpy arrays by their dtype, shape
and bytes, ``nn.Module`` s by their class, structure and ``state_dict``, dataclasses field by
field, dicts independently of their order (:func:`cache_key`). ``repr`` is never used: it
elides the middle of large tensors and rounds their entries.

Entries are saved with :func:`torch.save` and loaded with ``torch.load(..., weights_only=True)``
(tensors, numbers, strings, lists, tuples and dicts). Numpy arrays and scalars, dataclasses,
paths and sets in a result are converted to those types when saved and back when loaded, so a
cached result loads the same way on every call. Nothing is lost when the disk fails: a result
that cannot be saved (an unwritable folder, a type that cannot be stored) is returned with a
:class:`CacheWarning` naming the file, and an entry that cannot be read (a corrupt or truncated
file) is recomputed, with a warning naming it.

The folder is ``$FLOWLAWS_CACHE`` or ``~/.cache/flowlaws``, read at every call
(:func:`cache_dir`); ``DEFAULT_DIR`` is the same value, also read when it is used.

Explained in: book/02_percolation/05_dsi.ipynb (sweeps cached between runs).
"""
from __future__ import annotations

import dataclasses
import enum
import functools
import hashlib
import importlib
import json
import math
import os
import sys
import tempfile
import time
import types
import warnings
from collections.abc import Callable
from pathlib import Path, PurePath
from typing import Any

import numpy as np
import torch

__all__ = [
    "PARTIAL_MAX_AGE_S",
    "CacheWarning",
    "cache_dir",
    "library_fingerprint",
    "cache_key",
    "atomic_save",
    "remove_stale_partials",
    "cached",
    "store_or_load",
]


PARTIAL_MAX_AGE_S = 3600.0
"""A ``*.partial`` file older than this (seconds) belongs to a write that was killed."""


_FORMAT = 2  # the layout of a stored entry: {"flowlaws_cache": _FORMAT, "result": ...}


_TAG = "__flowlaws_cache_type__"  # marks a dict that encodes a value torch.load cannot hold


class CacheWarning(UserWarning):
    """A cache entry could not be written or read; the result was returned or recomputed."""


def cache_dir() -> Path:
    """The cache folder: ``$FLOWLAWS_CACHE`` if set (read now, not at import), else
    ``~/.cache/flowlaws``."""
    env = os.environ.get("FLOWLAWS_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "flowlaws"


_default_dir = cache_dir  # for functions whose argument is called cache_dir


def __getattr__(name: str) -> Any:
    # DEFAULT_DIR, kept for callers: the current value of cache_dir() whenever it is read
    if name == "DEFAULT_DIR":
        return cache_dir()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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


# ---------------------------------------------------------------------------------------------
# keys: a canonical, JSON-serialisable description of the content of the parameters


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _tensor_bytes(t: torch.Tensor) -> bytes:
    if t.layout != torch.strided:  # sparse tensors: their dense content
        t = t.to_dense()
    t = t.detach().to("cpu").resolve_conj().resolve_neg().contiguous()
    if t.is_complex():
        t = torch.view_as_real(t)
    # every dtype (bfloat16, float8, bool included) read as raw bytes
    return t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""


def _qualname(obj: Any) -> str:
    cls = obj if isinstance(obj, type) else type(obj)
    return f"{cls.__module__}:{cls.__qualname__}"


def _canonical(obj: Any, where: str) -> Any:
    """``obj`` as plain JSON values that describe its content (``where`` names it in errors)."""
    if obj is None or isinstance(obj, bool | str):
        return obj
    if isinstance(obj, enum.Enum):
        return {"enum": _qualname(obj), "value": _canonical(obj.value, where)}
    if isinstance(obj, int | np.integer | np.bool_):
        return obj.item() if isinstance(obj, np.generic) else int(obj)
    if isinstance(obj, float | np.floating):
        value = float(obj)
        return value if math.isfinite(value) else {"float": repr(value)}
    if isinstance(obj, complex | np.complexfloating):
        return {"complex": [_canonical(obj.real, where), _canonical(obj.imag, where)]}
    if isinstance(obj, torch.Tensor):
        return {"tensor": str(obj.dtype), "shape": list(obj.shape),
                "sha256": _digest(_tensor_bytes(obj))}
    if isinstance(obj, np.ndarray):
        if obj.dtype.hasobject:
            return {"ndarray": "object", "shape": list(obj.shape),
                    "items": [_canonical(x, f"{where}[{i}]") for i, x in enumerate(obj.flat)]}
        return {"ndarray": np.lib.format.dtype_to_descr(obj.dtype), "shape": list(obj.shape),
                "sha256": _digest(np.ascontiguousarray(obj).tobytes())}
    if isinstance(obj, np.generic):  # datetime64, str_, void ...
        return {"numpy": str(obj.dtype), "value": _canonical(np.asarray(obj), where)}
    if isinstance(obj, torch.nn.Module):
        state = obj.state_dict()
        return {"module": _qualname(obj), "structure": _module_structure(obj),
                "state": {k: _canonical(v, f"{where}.{k}") for k, v in state.items()},
                "training": obj.training}
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {"dataclass": _qualname(obj),
                "fields": {f.name: _canonical(getattr(obj, f.name), f"{where}.{f.name}")
                           for f in dataclasses.fields(obj)}}
    if isinstance(obj, dict):
        if all(isinstance(k, str) for k in obj):
            return {"dict": {k: _canonical(v, f"{where}[{k!r}]") for k, v in obj.items()}}
        pairs = [[_canonical(k, f"{where} key {k!r}"), _canonical(v, f"{where}[{k!r}]")]
                 for k, v in obj.items()]
        return {"dict_items": sorted(pairs, key=lambda kv: json.dumps(kv, sort_keys=True))}
    if isinstance(obj, list | tuple):
        return [_canonical(x, f"{where}[{i}]") for i, x in enumerate(obj)]
    if isinstance(obj, set | frozenset):
        items = [_canonical(x, f"{where} item") for x in obj]
        return {"set": sorted(items, key=lambda x: json.dumps(x, sort_keys=True))}
    if isinstance(obj, range):
        return {"range": [obj.start, obj.stop, obj.step]}
    if isinstance(obj, slice):
        return {"slice": [_canonical(x, where) for x in (obj.start, obj.stop, obj.step)]}
    if isinstance(obj, PurePath):  # an existing file or folder: with its files' stamps
        return _calls().describe_path(obj)
    if isinstance(obj, torch.dtype | torch.device | np.dtype):
        return {_qualname(obj): str(obj)}
    if isinstance(obj, types.FunctionType | types.BuiltinFunctionType | type):
        return _calls().describe_function(obj, where)  # a notebook's: its code and globals
    if (described := _calls().describe_other(obj, where)) is not NotImplemented:
        return described
    raise TypeError(
        f"cache key: {where} has type {_qualname(obj)}, whose content the cache cannot hash; "
        "pass numbers, strings, arrays, tensors, modules, dataclasses or containers of them")


def _calls() -> types.ModuleType:
    return importlib.import_module("flowlaws.book.call_cache")  # it imports this module


def _module_structure(module: torch.nn.Module) -> str:
    # the architecture without the weights: nn.Module's repr lists submodules and their sizes
    return repr(module)


def cache_key(name: str, params: dict[str, Any]) -> str:
    """A stable hex key for ``name``, the *content* of ``params`` and the library code.

    Tensors, numpy arrays and modules (their ``state_dict``) are hashed by their bytes, so two
    values that differ anywhere give different keys; dicts give the same key in any order;
    ``np.int64(4)`` and ``4`` give the same key. A value whose content cannot be hashed (a
    lambda, an arbitrary object) is a ``TypeError`` naming it.
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, got {type(name).__name__}")
    canonical = _canonical(params, "params")
    blob = json.dumps({"name": name, "params": canonical, "library": library_fingerprint()},
                      sort_keys=True, allow_nan=False)
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


# ---------------------------------------------------------------------------------------------
# stored values: what torch.load(weights_only=True) can read, and back


_PLAIN = (type(None), bool, int, float, complex, str, bytes)


def _encode(obj: Any, where: str) -> Any:
    """``obj`` with every value that ``weights_only`` loading refuses turned into a tagged dict."""
    if type(obj) in _PLAIN:
        return obj
    if isinstance(obj, torch.Tensor):
        return obj.detach() if type(obj) in (torch.Tensor, torch.nn.Parameter) else \
            obj.detach().as_subclass(torch.Tensor)
    if isinstance(obj, torch.dtype | torch.device | torch.Size):
        return obj
    if isinstance(obj, np.ndarray | np.generic):
        arr = np.asarray(obj)
        kind = "ndarray" if isinstance(obj, np.ndarray) else "numpy_scalar"
        if arr.dtype.hasobject:
            return {_TAG: kind + "_object", "shape": list(arr.shape),
                    "items": [_encode(x, f"{where}[{i}]") for i, x in enumerate(arr.flat)]}
        return {_TAG: kind, "dtype": json.dumps(np.lib.format.dtype_to_descr(arr.dtype)),
                "shape": list(arr.shape), "data": np.ascontiguousarray(arr).tobytes()}
    if "<locals>" in type(obj).__qualname__:
        raise TypeError(f"{where} is a {type(obj).__qualname__}, a class defined inside a "
                        "function, which a later call cannot find; define it at module level")
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {_TAG: "dataclass", "class": _qualname(obj),
                "fields": {f.name: _encode(getattr(obj, f.name), f"{where}.{f.name}")
                           for f in dataclasses.fields(obj)}}
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # a namedtuple
        return {_TAG: "namedtuple", "class": _qualname(obj),
                "fields": {k: _encode(v, f"{where}.{k}") for k, v in obj._asdict().items()}}
    if isinstance(obj, dict):
        items = {k: _encode(v, f"{where}[{k!r}]") for k, v in obj.items()}
        if _TAG in obj or not all(type(k) in (str, int, float, bool) for k in obj):
            return {_TAG: "dict", "items": [[_encode(k, f"{where} key"), v]
                                            for k, v in zip(obj, items.values(), strict=True)]}
        return items if type(obj) is dict else {_TAG: "dict", "items": list(map(list,
                                                                              items.items()))}
    if isinstance(obj, list):
        return [_encode(x, f"{where}[{i}]") for i, x in enumerate(obj)]
    if isinstance(obj, tuple):
        return tuple(_encode(x, f"{where}[{i}]") for i, x in enumerate(obj))
    if isinstance(obj, set | frozenset):
        return {_TAG: type(obj).__name__, "items": [_encode(x, f"{where} item") for x in obj]}
    if isinstance(obj, PurePath):
        return {_TAG: "path", "value": str(obj)}
    if isinstance(obj, range):
        return {_TAG: "range", "value": [obj.start, obj.stop, obj.step]}
    raise TypeError(f"{where} has type {_qualname(obj)}, which the cache cannot store "
                    "(tensors, arrays, numbers, strings, dataclasses and containers of them)")


def _find_class(qualname: str) -> type:
    """A class named ``module:qualname`` from a module that is imported (or in flowlaws)."""
    module_name, _, name = qualname.partition(":")
    module = sys.modules.get(module_name)
    if module is None and module_name.split(".")[0] == "flowlaws":
        module = importlib.import_module(module_name)
    if module is None:
        raise LookupError(f"the module {module_name!r} of {qualname} is not imported")
    cls: Any = module
    for part in name.split("."):
        cls = getattr(cls, part)
    if not isinstance(cls, type):
        raise LookupError(f"{qualname} is not a class")
    return cls


def _decode(obj: Any) -> Any:
    if isinstance(obj, list):
        return [_decode(x) for x in obj]
    if isinstance(obj, tuple) and type(obj) is tuple:
        return tuple(_decode(x) for x in obj)
    if not isinstance(obj, dict):
        return obj
    tag = obj.get(_TAG)
    if tag is None:
        return {k: _decode(v) for k, v in obj.items()}
    if tag in ("ndarray", "numpy_scalar"):
        dtype = np.lib.format.descr_to_dtype(_lists_to_tuples(json.loads(obj["dtype"])))
        arr = np.frombuffer(obj["data"], dtype=dtype).reshape(obj["shape"]).copy()
        return arr if tag == "ndarray" else arr[()]
    if tag in ("ndarray_object", "numpy_scalar_object"):
        arr = np.empty(len(obj["items"]), dtype=object)
        arr[:] = [_decode(x) for x in obj["items"]]
        arr = arr.reshape(obj["shape"])
        return arr if tag == "ndarray_object" else arr[()]
    if tag == "dataclass":
        cls = _find_class(obj["class"])
        if not dataclasses.is_dataclass(cls):
            raise LookupError(f"{obj['class']} is no longer a dataclass")
        values = {k: _decode(v) for k, v in obj["fields"].items()}
        fields = dataclasses.fields(cls)
        if {f.name for f in fields} != set(values):
            raise LookupError(f"the fields of {obj['class']} changed since the entry was saved")
        instance = cls(**{f.name: values[f.name] for f in fields if f.init})
        for f in fields:
            if not f.init:
                object.__setattr__(instance, f.name, values[f.name])
        return instance
    if tag == "namedtuple":
        return _find_class(obj["class"])(**{k: _decode(v) for k, v in obj["fields"].items()})
    if tag == "dict":
        return {_decode(k): _decode(v) for k, v in obj["items"]}
    if tag in ("set", "frozenset"):
        return (set if tag == "set" else frozenset)(_decode(x) for x in obj["items"])
    if tag == "path":
        return Path(obj["value"])
    if tag == "range":
        return range(*obj["value"])
    raise LookupError(f"unknown stored type {tag!r}")


def _lists_to_tuples(descr: Any) -> Any:
    # a structured dtype's descr is a list of tuples; JSON turned them into lists
    if isinstance(descr, list):
        return [tuple(_lists_to_tuples(x) for x in d) if isinstance(d, list) else d
                for d in descr]
    return descr


# ---------------------------------------------------------------------------------------------
# files


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


def atomic_save(obj: Any, path: Path) -> None:
    """``torch.save`` to ``path`` through a temporary file and ``os.replace``.

    Stale ``*.partial`` files of earlier killed writes in the folder are removed first.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_partials(path.parent)
    handle, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".partial")
    try:
        with os.fdopen(handle, "wb") as f:
            torch.save(obj, f)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def short_reason(error: BaseException) -> str:
    """A one-line reason for an unreadable file that never suggests unsafe loading."""
    text = str(error)
    if "weights_only" in text or "Weights only" in text:
        return ("it holds a type that safe loading (torch.load with weights_only=True) "
                "does not read")
    first = text.strip().splitlines()[0] if text.strip() else ""
    return f"{type(error).__name__}: {first[:200]}" if first else type(error).__name__


def _load_entry(path: Path) -> tuple[bool, Any]:
    """``(True, result)`` for a readable entry, ``(False, None)`` when missing or unreadable."""
    try:
        stored = torch.load(path, weights_only=True)
    except FileNotFoundError:
        return False, None
    except Exception as error:  # noqa: BLE001 - any unreadable file is recomputed, named
        warnings.warn(f"cache entry {path} could not be read ({short_reason(error)}); "
                      "recomputing it and overwriting the file", CacheWarning, stacklevel=3)
        return False, None
    try:
        if not (isinstance(stored, dict) and stored.get("flowlaws_cache") == _FORMAT):
            raise LookupError("it was written in an older cache format")
        return True, _decode(stored["result"])
    except Exception as error:  # noqa: BLE001
        warnings.warn(f"cache entry {path} could not be decoded ({short_reason(error)}); "
                      "recomputing it and overwriting the file", CacheWarning, stacklevel=3)
        return False, None


def cached(
    name: str,
    params: dict[str, Any],
    compute: Callable[[], Any],
    cache_dir: Path | str | None = None,
) -> Any:
    """Return the stored result for ``(name, params)``, computing and storing it when missing.

    Prefer :func:`flowlaws.book.call_cache.cached_call`, whose key is derived from everything
    the computation reads: here ``params`` must list it by hand. ``cache_dir=None`` uses
    :func:`cache_dir` (read at this call). A result that cannot be saved is returned anyway,
    with a :class:`CacheWarning` naming the file; an unreadable entry is recomputed, named.
    """
    return store_or_load(f"{name}-{cache_key(name, params)}", compute, cache_dir, name=name)


def store_or_load(stem: str, compute: Callable[[], Any], cache_dir: Path | str | None = None,
                  name: str = "") -> Any:
    """The entry ``<cache_dir>/<stem>.pt``: loaded when readable, else computed and saved."""
    folder = Path(cache_dir).expanduser() if cache_dir is not None else _default_dir()
    path = folder / f"{stem}.pt"
    found, result = _load_entry(path)
    if found:
        return result
    result = compute()
    try:
        atomic_save({"flowlaws_cache": _FORMAT, "name": name,
                     "result": _encode(result, "the result")}, path)
    except Exception as error:  # noqa: BLE001 - the computed result is never thrown away
        warnings.warn(f"could not save the result to the cache file {path} "
                      f"({type(error).__name__}: {error}); it is returned but not cached",
                      CacheWarning, stacklevel=3)
    return result
