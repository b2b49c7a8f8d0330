"""Cached calls: ``cached_call(fn, *args, **kwargs)``, keyed by the function and all it reads.

A key listed by hand goes stale as soon as the computation reads something the list forgot (a
chapter's key that left out ``n_samples`` served the 64-sample result to a 16-sample run).
:func:`cached_call` derives the key instead, from

- the function: its module and qualified name; for a function written in a notebook or a
  script (module ``__main__``) or inside another function, also its code (bytecode and
  constants, not its comments or line numbers), its default arguments, the content of its
  closure and of every global variable it reads (``LOAD_GLOBAL``, in nested functions and
  comprehensions too), recursively through the notebook functions it calls. A library function
  (``flowlaws.*``) is covered by :func:`flowlaws.book.cache.library_fingerprint`, a function
  of another installed package by its name;
- the content of every argument (:func:`flowlaws.book.cache.cache_key`: tensors, arrays and
  modules by their bytes);
- files and folders: a :class:`pathlib.Path` that exists is described by the names, sizes and
  modification times of its files (recursively for a folder), so an edited data folder is read
  again; a missing path by its name;
- a ``torch.Generator`` or a numpy random generator by its state.

A value whose content cannot be hashed (an open figure read as a global, say) is refused with a
``TypeError`` naming it and the function that reads it.

Explained in: book/02_percolation/06_adaptive.ipynb (every result cached on disk)
"""
from __future__ import annotations

import dis
import functools
import os
import re
import threading
import types
from collections.abc import Callable
from pathlib import Path, PurePath
from typing import Any

import numpy as np
import torch

from flowlaws.book import cache as _cache

__all__ = ["call_key", "cached_call", "describe_function", "describe_path"]


_active = threading.local()  # the functions being described (a recursive function ends)


def _is_user_code(fn: types.FunctionType) -> bool:
    """Code whose text no fingerprint covers: a notebook's or a script's, or a local function."""
    return fn.__module__ in (None, "__main__", "__mp_main__") or "<locals>" in fn.__qualname__ \
        or "<lambda>" in fn.__qualname__


def _code(code: types.CodeType) -> dict:
    consts = [_code(c) if isinstance(c, types.CodeType) else
              _cache._canonical(c, f"a constant of {code.co_qualname}") for c in code.co_consts]
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
                "args": _cache._canonical(list(fn.args), f"{where}.args"),
                "keywords": _cache._canonical(dict(fn.keywords), f"{where}.keywords")}
    if isinstance(fn, types.MethodType):
        return {"method": describe_function(fn.__func__, where),
                "self": _cache._canonical(fn.__self__, f"{where}.__self__")}
    name = f"{getattr(fn, '__module__', None)}:{getattr(fn, '__qualname__', type(fn).__name__)}"
    if isinstance(fn, type):
        if fn.__module__ not in ("__main__", "__mp_main__") and "<locals>" not in fn.__qualname__:
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
                       _cache._canonical(value, f"the global {g!r} read by {qual}"))
        cells = [_cache._canonical(c.cell_contents, f"a variable of {qual}'s closure")
                 for c in fn.__closure__ or ()]
        return {"function": name, "code": _code(fn.__code__),
                "defaults": _cache._canonical(list(fn.__defaults__ or ()), f"{qual}'s defaults"),
                "kwdefaults": _cache._canonical(dict(fn.__kwdefaults__ or {}),
                                                f"{qual}'s keyword defaults"),
                "closure": cells, "globals": read}
    finally:
        active.discard(id(fn))


def describe_path(path: PurePath) -> Any:
    """A path with the names, sizes and modification times of the files it holds."""
    p = Path(path)
    try:
        if p.is_file():
            st = p.stat()
            return {"path": str(path), "file": [st.st_size, st.st_mtime_ns]}
        if p.is_dir():
            files = []
            for root, dirs, names in os.walk(p):
                dirs.sort()
                for n in sorted(names):
                    f = Path(root) / n
                    st = f.stat()
                    files.append([f.relative_to(p).as_posix(), st.st_size, st.st_mtime_ns])
            return {"path": str(path), "folder": files}
    except OSError as error:
        raise OSError(f"cache key: cannot read {path} to describe it ({error})") from error
    return {"path": str(path)}


def describe_other(obj: Any, where: str) -> Any:
    """The description of a value :func:`flowlaws.book.cache._canonical` does not know, or
    ``NotImplemented``."""
    if obj is Ellipsis:  # x[..., 0] in a function's code
        return {"ellipsis": True}
    if isinstance(obj, bytes | bytearray):
        return {"bytes": _cache._digest(bytes(obj))}
    if isinstance(obj, np.random.Generator | np.random.RandomState):
        state = obj.bit_generator.state if isinstance(obj, np.random.Generator) else \
            obj.get_state(legacy=False)
        return {"numpy_generator": type(obj).__name__, "state": _cache._canonical(state, where)}
    if isinstance(obj, torch.Generator):
        return {"generator": str(obj.device), "state": _cache._canonical(obj.get_state(), where)}
    if callable(obj) and isinstance(obj, functools.partial | types.MethodType):
        return describe_function(obj, where)
    return NotImplemented


def call_key(fn: Callable, args: tuple, kwargs: dict) -> str:
    """The key of ``fn(*args, **kwargs)``: the function (:func:`describe_function`), the
    content of every argument and the library's fingerprint."""
    if not callable(fn):
        raise TypeError(f"cached_call needs a function, got {type(fn).__name__}")
    return _cache.cache_key("call", {"function": describe_function(fn),
                                     "args": list(args), "kwargs": dict(kwargs)})


def _file_stem(fn: Callable) -> str:
    name = getattr(fn, "__name__", None) or getattr(getattr(fn, "func", None), "__name__", "call")
    return re.sub(r"[^A-Za-z0-9_.-]", "", name.replace("<lambda>", "lambda")) or "call"


def cached_call(fn: Callable, *args: Any, cache_dir: Path | str | None = None,
                **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)``, loaded from the cache when the same call was stored before.

    The key is :func:`call_key`: change any argument, any global a notebook function reads, or
    the function's code, and the call is computed again. The entry is stored and read as by
    :func:`flowlaws.book.cache.cached` (atomic writes; a result that cannot be saved is returned
    with a warning; an unreadable entry is recomputed with a warning naming it). ``cache_dir``
    (keyword only, not passed to ``fn``): the folder, ``None`` for
    :func:`flowlaws.book.cache.cache_dir`. ``fn`` should be a function of what it reads: one
    that appends to a global it also reads changes its own key at every call.
    """
    key = call_key(fn, args, kwargs)
    return _cache.store_or_load(f"{_file_stem(fn)}-{key}", lambda: fn(*args, **kwargs),
                                cache_dir, name=_file_stem(fn))
