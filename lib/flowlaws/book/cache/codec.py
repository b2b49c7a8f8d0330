"""The closed format of a stored result: plain values, and only the types the library registers.

Entries are loaded with ``torch.load(..., weights_only=True)``, which reads tensors, numbers,
strings, lists, tuples and dicts and runs no code. Every other value of a result is written as
a tagged dict (:func:`encode`) and rebuilt on loading (:func:`decode`): numpy arrays and
scalars, sets, paths and ranges from their data, and dataclasses, named tuples and enums
**only** when their class is registered with :func:`stored_type`. A stored file names its
classes; a class that is not registered -- ``subprocess:Popen`` planted in a shared cache
folder, say -- is never imported or called: decoding raises :class:`RefusedTypeError` naming it.
The library registers its result types where it defines them (``@stored_type``); a reader's
own dataclass is stored once it is registered the same way.

Explained in: book/02_percolation/06_adaptive.ipynb (every result cached on disk)
"""
from __future__ import annotations

import dataclasses
import enum
import importlib
import json
from pathlib import Path, PurePath
from typing import Any

import numpy as np
import torch

from flowlaws.book.cache.keys import qualname

__all__ = ["TAG", "RefusedTypeError", "stored_type", "registered_types", "encode", "decode"]

TAG = "__flowlaws_cache_type__"  # marks a dict that encodes a value torch.load cannot hold

_REGISTRY: dict[str, type] = {}


class RefusedTypeError(LookupError):
    """A stored entry names a class that is not registered with :func:`stored_type`."""


def _is_namedtuple(cls: type) -> bool:
    return issubclass(cls, tuple) and hasattr(cls, "_fields")


def stored_type(cls: type) -> type:
    """Register ``cls`` (a dataclass, a named tuple or an enum) as a type that a cached result
    may hold; use it as a class decorator. Returns ``cls``.

    A class defined inside a function is refused (a later process cannot find it).
    """
    if not isinstance(cls, type) or not (dataclasses.is_dataclass(cls) or _is_namedtuple(cls)
                                         or issubclass(cls, enum.Enum)):
        raise TypeError(f"stored_type registers dataclasses, named tuples and enums, got {cls!r}")
    if "<locals>" in cls.__qualname__:
        raise TypeError(f"{cls.__qualname__} is defined inside a function, which a later "
                        "process cannot find; define it at module level to store it")
    _REGISTRY[qualname(cls)] = cls
    return cls


def registered_types() -> dict[str, type]:
    """The registered classes, by ``module:qualname`` (a copy)."""
    return dict(_REGISTRY)


def _registered(name: str) -> type:
    """The registered class ``module:qualname``; a library module is imported first (it
    registers its classes when imported), nothing else ever is."""
    if name not in _REGISTRY:
        module = name.partition(":")[0]
        if module.startswith("flowlaws.") and all(p.isidentifier() for p in module.split(".")):
            try:
                importlib.import_module(module)
            except ImportError:
                pass
    if name not in _REGISTRY:
        raise RefusedTypeError(f"it names the type {name}, which the cache does not rebuild (only "
                          "classes registered with flowlaws.book.cache.stored_type)")
    return _REGISTRY[name]


_PLAIN = (type(None), bool, int, float, complex, str, bytes)


def encode(obj: Any, where: str) -> Any:
    """``obj`` with every value that ``weights_only`` loading refuses turned into a tagged dict;
    a dataclass, named tuple or enum whose class is not registered is a ``TypeError``."""
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
            return {TAG: kind + "_object", "shape": list(arr.shape),
                    "items": [encode(x, f"{where}[{i}]") for i, x in enumerate(arr.flat)]}
        return {TAG: kind, "dtype": json.dumps(np.lib.format.dtype_to_descr(arr.dtype)),
                "shape": list(arr.shape), "data": np.ascontiguousarray(arr).tobytes()}
    if "<locals>" in type(obj).__qualname__:
        raise TypeError(f"{where} is a {type(obj).__qualname__}, a class defined inside a "
                        "function, which a later call cannot find; define it at module level")
    named = dataclasses.is_dataclass(obj) or isinstance(obj, enum.Enum) or (
        isinstance(obj, tuple) and hasattr(obj, "_fields"))
    if named and _REGISTRY.get(qualname(obj)) is not type(obj):
        raise TypeError(f"{where} is a {qualname(obj)}, which is not registered as a stored "
                        "type: decorate its class with flowlaws.book.cache.stored_type")
    if isinstance(obj, enum.Enum):
        return {TAG: "enum", "class": qualname(obj), "value": encode(obj.value, where)}
    if dataclasses.is_dataclass(obj):
        return {TAG: "dataclass", "class": qualname(obj),
                "fields": {f.name: encode(getattr(obj, f.name), f"{where}.{f.name}")
                           for f in dataclasses.fields(obj)}}
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # a namedtuple
        return {TAG: "namedtuple", "class": qualname(obj),
                "fields": {k: encode(v, f"{where}.{k}") for k, v in obj._asdict().items()}}
    if isinstance(obj, dict):
        items = {k: encode(v, f"{where}[{k!r}]") for k, v in obj.items()}
        if TAG in obj or not all(type(k) in (str, int, float, bool) for k in obj):
            return {TAG: "dict", "items": [[encode(k, f"{where} key"), v]
                                           for k, v in zip(obj, items.values(), strict=True)]}
        return items if type(obj) is dict else {TAG: "dict", "items": list(map(list,
                                                                             items.items()))}
    if isinstance(obj, list):
        return [encode(x, f"{where}[{i}]") for i, x in enumerate(obj)]
    if isinstance(obj, tuple):
        return tuple(encode(x, f"{where}[{i}]") for i, x in enumerate(obj))
    if isinstance(obj, set | frozenset):
        return {TAG: type(obj).__name__, "items": [encode(x, f"{where} item") for x in obj]}
    if isinstance(obj, PurePath):
        return {TAG: "path", "value": str(obj)}
    if isinstance(obj, range):
        return {TAG: "range", "value": [obj.start, obj.stop, obj.step]}
    raise TypeError(f"{where} has type {qualname(obj)}, which the cache cannot store "
                    "(tensors, arrays, numbers, strings, registered dataclasses and containers "
                    "of them)")


def decode(obj: Any) -> Any:
    """The value :func:`encode` wrote; an unregistered class is :class:`RefusedTypeError`."""
    if isinstance(obj, list):
        return [decode(x) for x in obj]
    if isinstance(obj, tuple) and type(obj) is tuple:
        return tuple(decode(x) for x in obj)
    if not isinstance(obj, dict):
        return obj
    tag = obj.get(TAG)
    if tag is None:
        return {k: decode(v) for k, v in obj.items()}
    if tag in ("ndarray", "numpy_scalar"):
        dtype = np.lib.format.descr_to_dtype(_lists_to_tuples(json.loads(obj["dtype"])))
        if dtype.hasobject:
            raise LookupError("a stored numpy array claims an object dtype")
        arr = np.frombuffer(obj["data"], dtype=dtype).reshape(obj["shape"]).copy()
        return arr if tag == "ndarray" else arr[()]
    if tag in ("ndarray_object", "numpy_scalar_object"):
        arr = np.empty(len(obj["items"]), dtype=object)
        arr[:] = [decode(x) for x in obj["items"]]
        arr = arr.reshape(obj["shape"])
        return arr if tag == "ndarray_object" else arr[()]
    if tag in ("dataclass", "namedtuple", "enum"):
        return _rebuild(tag, obj)
    if tag == "dict":
        return {decode(k): decode(v) for k, v in obj["items"]}
    if tag in ("set", "frozenset"):
        return (set if tag == "set" else frozenset)(decode(x) for x in obj["items"])
    if tag == "path":
        return Path(obj["value"])
    if tag == "range":
        return range(*obj["value"])
    raise LookupError(f"unknown stored type {tag!r}")


def _rebuild(tag: str, obj: dict) -> Any:
    name = obj["class"]
    if not isinstance(name, str):
        raise LookupError(f"a stored {tag} names no class")
    cls = _registered(name)
    kind = ("dataclass" if dataclasses.is_dataclass(cls) else
            "enum" if issubclass(cls, enum.Enum) else "namedtuple")
    if kind != tag:
        raise LookupError(f"{name} is a {kind}, stored as a {tag}")
    if tag == "enum":
        return cls(decode(obj["value"]))
    values = {k: decode(v) for k, v in obj["fields"].items()}
    names = [f.name for f in dataclasses.fields(cls)] if tag == "dataclass" else cls._fields
    if set(names) != set(values):
        raise LookupError(f"the fields of {name} changed since the entry was saved")
    if tag == "namedtuple":
        return cls(**values)
    fields = dataclasses.fields(cls)
    instance = cls(**{f.name: values[f.name] for f in fields if f.init})
    for f in fields:
        if not f.init:
            object.__setattr__(instance, f.name, values[f.name])
    return instance


def _lists_to_tuples(descr: Any) -> Any:
    # a structured dtype's descr is a list of tuples; JSON turned them into lists
    if isinstance(descr, list):
        return [tuple(_lists_to_tuples(x) for x in d) if isinstance(d, list) else d
                for d in descr]
    return descr
