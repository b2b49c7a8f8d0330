"""Cache keys: a canonical, JSON-serialisable description of the content of what a call reads.

:func:`canonical` describes a value by its content: tensors and numpy arrays by their dtype,
shape and bytes, ``nn.Module`` s by their class, structure and ``state_dict``, dataclasses
field by field, dicts independently of their order. ``repr`` is never used: it elides the
middle of large tensors and rounds their entries. Numbers keep their precision: a Python
``float`` and ``np.float64`` are the same number, but ``np.float32(2.0)`` is not ``2.0`` (a
computation fed either returns another dtype), and likewise for integers other than
``int``/``np.int64``. Files are described by their content (:mod:`flowlaws.book.cache.paths`):
a ``Path``, and a ``str`` that names an existing file.

:func:`describe_function` describes a function so that the key changes whenever what it
computes may change: a library function (``flowlaws.*``) by its name, since
:func:`library_fingerprint` covers its code; a function of an installed package (the standard
library, site-packages) by its name; any other function -- a notebook's or a script's, a
local one, or one from the reader's own helper module beside the notebook -- by its code
(bytecode and constants, not comments or line numbers), its defaults, its closure and every
global it reads, recursively through the functions of such code it calls.

Explained in: book/02_percolation/06_adaptive.ipynb (every result cached on disk)
"""
from __future__ import annotations

import dataclasses
import dis
import enum
import functools
import hashlib
import json
import math
import sys
import sysconfig
import threading
import types
from collections.abc import Callable
from pathlib import Path, PurePath
from typing import Any

import numpy as np
import torch

from flowlaws.book.cache.paths import describe_path, existing_file, file_sha256

__all__ = ["library_fingerprint", "canonical", "describe_function", "cache_key", "qualname"]

_PACKAGE = Path(__file__).resolve().parents[2]  # lib/flowlaws


@functools.cache
def library_fingerprint() -> str:
    """A hash of the source of every ``flowlaws`` module, subpackages included.

    Part of every cache key: a result computed by an older version of the library is never
    served after its code changed (a fix in an estimator recomputes the sweeps that use it).
    Every ``.py`` file under the package is read, recursively, with its path relative to the
    package, so an edit inside any subpackage changes the fingerprint.
    """
    digest = hashlib.sha256()
    for path in sorted(_PACKAGE.rglob("*.py")):
        digest.update(path.relative_to(_PACKAGE).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


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


def qualname(obj: Any) -> str:
    """``module:qualified.name`` of ``obj``'s class (of ``obj`` itself if it is a class)."""
    cls = obj if isinstance(obj, type) else type(obj)
    return f"{cls.__module__}:{cls.__qualname__}"


_SAME_AS_PYTHON = (np.float64, np.int64, np.bool_)  # the precision of float, int and bool


def _number(obj: Any, where: str) -> Any:
    if isinstance(obj, np.generic) and not isinstance(obj, _SAME_AS_PYTHON):
        return {"numpy": str(obj.dtype), "value": _number(obj.item(), where)}
    if isinstance(obj, bool | np.bool_):
        return bool(obj)
    if isinstance(obj, int | np.integer):
        return int(obj)
    if isinstance(obj, float | np.floating):
        value = float(obj)
        return value if math.isfinite(value) else {"float": repr(value)}
    return {"complex": [_number(obj.real, where), _number(obj.imag, where)]}


def canonical(obj: Any, where: str) -> Any:
    """``obj`` as plain JSON values that describe its content (``where`` names it in errors)."""
    if obj is None:
        return obj
    if isinstance(obj, str):
        file = existing_file(obj)  # a str naming a file: its content too
        return obj if file is None else {"str": obj, "file_sha256": file_sha256(file)}
    if isinstance(obj, enum.Enum):
        return {"enum": qualname(obj), "value": canonical(obj.value, where)}
    if isinstance(obj, bool | int | float | complex | np.bool_ | np.number):
        return _number(obj, where)
    if isinstance(obj, torch.Tensor):
        return {"tensor": str(obj.dtype), "shape": list(obj.shape),
                "sha256": _digest(_tensor_bytes(obj))}
    if isinstance(obj, np.ndarray):
        if obj.dtype.hasobject:
            return {"ndarray": "object", "shape": list(obj.shape),
                    "items": [canonical(x, f"{where}[{i}]") for i, x in enumerate(obj.flat)]}
        return {"ndarray": np.lib.format.dtype_to_descr(obj.dtype), "shape": list(obj.shape),
                "sha256": _digest(np.ascontiguousarray(obj).tobytes())}
    if isinstance(obj, np.generic):  # datetime64, str_, void ...
        return {"numpy": str(obj.dtype), "value": canonical(np.asarray(obj), where)}
    if isinstance(obj, torch.nn.Module):
        state = obj.state_dict()
        return {"module": qualname(obj), "structure": repr(obj),  # the architecture
                "state": {k: canonical(v, f"{where}.{k}") for k, v in state.items()},
                "training": obj.training}
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {"dataclass": qualname(obj),
                "fields": {f.name: canonical(getattr(obj, f.name), f"{where}.{f.name}")
                           for f in dataclasses.fields(obj)}}
    if isinstance(obj, dict):
        if all(isinstance(k, str) for k in obj):
            return {"dict": {k: canonical(v, f"{where}[{k!r}]") for k, v in obj.items()}}
        pairs = [[canonical(k, f"{where} key {k!r}"), canonical(v, f"{where}[{k!r}]")]
                 for k, v in obj.items()]
        return {"dict_items": sorted(pairs, key=lambda kv: json.dumps(kv, sort_keys=True))}
    if isinstance(obj, list | tuple):
        return [canonical(x, f"{where}[{i}]") for i, x in enumerate(obj)]
    if isinstance(obj, set | frozenset):
        items = [canonical(x, f"{where} item") for x in obj]
        return {"set": sorted(items, key=lambda x: json.dumps(x, sort_keys=True))}
    if isinstance(obj, range):
        return {"range": [obj.start, obj.stop, obj.step]}
    if isinstance(obj, slice):
        return {"slice": [canonical(x, where) for x in (obj.start, obj.stop, obj.step)]}
    if isinstance(obj, PurePath):  # an existing file or folder: with its content
        return describe_path(obj)
    if isinstance(obj, torch.dtype | torch.device | np.dtype):
        return {qualname(obj): str(obj)}
    if isinstance(obj, types.FunctionType | types.BuiltinFunctionType | type
                  | functools.partial | types.MethodType):
        return describe_function(obj, where)  # a notebook's: its code and globals
    return _other(obj, where)


def _other(obj: Any, where: str) -> Any:
    if obj is Ellipsis:  # x[..., 0] in a function's code
        return {"ellipsis": True}
    if isinstance(obj, bytes | bytearray):
        return {"bytes": _digest(bytes(obj))}
    if isinstance(obj, np.random.Generator | np.random.RandomState):
        state = obj.bit_generator.state if isinstance(obj, np.random.Generator) else \
            obj.get_state(legacy=False)
        return {"numpy_generator": type(obj).__name__, "state": canonical(state, where)}
    if isinstance(obj, torch.Generator):
        return {"generator": str(obj.device), "state": canonical(obj.get_state(), where)}
    raise TypeError(
        f"cache key: {where} has type {qualname(obj)}, whose content the cache cannot hash; "
        "pass numbers, strings, arrays, tensors, modules, dataclasses or containers of them")


def cache_key(name: str, params: dict[str, Any]) -> str:
    """A stable hex key for ``name``, the *content* of ``params`` and the library code.

    Tensors, numpy arrays and modules (their ``state_dict``) are hashed by their bytes, so two
    values that differ anywhere give different keys; dicts give the same key in any order;
    ``np.int64(4)`` and ``4`` give the same key, ``np.float32(2.0)`` and ``2.0`` do not. A
    value whose content cannot be hashed (an arbitrary object) is a ``TypeError`` naming it.
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, got {type(name).__name__}")
    described = canonical(params, "params")
    blob = json.dumps({"name": name, "params": described, "library": library_fingerprint()},
                      sort_keys=True, allow_nan=False)
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


# ---------------------------------------------------------------------------------------------
# functions


_active = threading.local()  # the functions being described (a recursive function ends)


@functools.cache
def _installed_roots() -> tuple[str, ...]:
    """Folders of installed code: the standard library and site-packages."""
    paths = sysconfig.get_paths()
    roots = {str(Path(paths[k]).resolve()) for k in ("stdlib", "platstdlib", "purelib",
                                                      "platlib") if k in paths}
    return tuple(sorted(roots))


def _is_user_code(fn: Any) -> bool:
    """Code whose text no fingerprint covers: a notebook's, a script's, a local function, or a
    module outside the library and the installed packages (the reader's helper module)."""
    module_name = getattr(fn, "__module__", None)
    qual = getattr(fn, "__qualname__", "")
    if module_name in (None, "__main__", "__mp_main__") or "<locals>" in qual \
            or "<lambda>" in qual:
        return True
    if module_name == "flowlaws" or module_name.startswith("flowlaws."):
        return False  # library_fingerprint covers it
    file = getattr(sys.modules.get(module_name), "__file__", None)
    if file is None:
        return False  # a built-in module
    resolved = str(Path(file).resolve())
    return not (resolved.startswith(_installed_roots()) or "site-packages" in resolved
                or "dist-packages" in resolved)


def _code(code: types.CodeType) -> dict:
    consts = [_code(c) if isinstance(c, types.CodeType) else
              canonical(c, f"a constant of {code.co_qualname}") for c in code.co_consts]
    return {"bytecode": code.co_code.hex(), "consts": consts, "names": list(code.co_names),
            "args": [code.co_argcount, code.co_kwonlyargcount, list(code.co_varnames)]}


def _globals_read(code: types.CodeType) -> set[str]:
    names = {ins.argval for ins in dis.get_instructions(code)
             if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME")}
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _globals_read(const)
    return names


def describe_function(fn: Callable, where: str = "the function") -> Any:
    """A JSON description of ``fn`` that changes whenever what it computes may change."""
    if isinstance(fn, functools.partial):
        return {"partial": describe_function(fn.func, where),
                "args": canonical(list(fn.args), f"{where}.args"),
                "keywords": canonical(dict(fn.keywords), f"{where}.keywords")}
    if isinstance(fn, types.MethodType):
        return {"method": describe_function(fn.__func__, where),
                "self": canonical(fn.__self__, f"{where}.__self__")}
    name = f"{getattr(fn, '__module__', None)}:{getattr(fn, '__qualname__', type(fn).__name__)}"
    if isinstance(fn, type):
        if not _is_user_code(fn):
            return {"class": name}
        return {"class": name, "methods": {k: describe_function(v, f"{name}.{k}")
                                           for k, v in sorted(vars(fn).items())
                                           if isinstance(v, types.FunctionType)}}
    if not isinstance(fn, types.FunctionType) or not _is_user_code(fn):
        return {"function": name}
    active = _active.__dict__.setdefault("ids", set())
    if id(fn) in active:
        return {"function": name, "recursive": True}
    active.add(id(fn))
    try:
        qual = fn.__qualname__
        read = {}
        for g in sorted(_globals_read(fn.__code__)):
            if g not in fn.__globals__:
                continue  # a builtin (or a name not yet defined: the call will fail anyway)
            value = fn.__globals__[g]
            read[g] = ({"module": value.__name__} if isinstance(value, types.ModuleType) else
                       canonical(value, f"the global {g!r} read by {qual}"))
        cells = [canonical(c.cell_contents, f"a variable of {qual}'s closure")
                 for c in fn.__closure__ or ()]
        return {"function": name, "code": _code(fn.__code__),
                "defaults": canonical(list(fn.__defaults__ or ()), f"{qual}'s defaults"),
                "kwdefaults": canonical(dict(fn.__kwdefaults__ or {}),
                                        f"{qual}'s keyword defaults"),
                "closure": cells, "globals": read}
    finally:
        active.discard(id(fn))
