"""The closed, checksummed cache format and keys that see content (issue 27): a planted entry
cannot run code, a flipped bit is never served, and a key changes with a file's content, a
helper module's code and a number's dtype."""

from __future__ import annotations

import enum
import importlib
import os
import sys
import time
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pytest

from flowlaws.book import cache
from flowlaws.book.cache import codec, store


def double(x):
    return np.asarray([2.5, x], dtype=np.float64)


def _only_entry(folder: Path) -> Path:
    (path,) = folder.glob("*.pt")
    return path


def _plant_popen(path: Path, marker: Path) -> None:
    """A well-formed entry (valid checksum: an attacker can compute it) whose result names
    ``subprocess:Popen`` with a shell command."""
    payload = {codec.TAG: "namedtuple", "class": "subprocess:Popen",
               "fields": {"args": f"touch {marker}", "shell": True}}
    path.write_bytes(store.entry_bytes({"name": "double", "result": payload}))


@pytest.mark.parametrize("kind", ["cached_call", "store_or_load"])
def test_a_planted_entry_naming_popen_never_runs(tmp_path, kind):
    import subprocess  # noqa: F401 - the attacker's module is imported, as in any notebook

    folder, marker = tmp_path / "cache", tmp_path / "marker"

    def call():
        if kind == "cached_call":
            return cache.cached_call(double, 1.0, cache_dir=folder)
        return cache.store_or_load("stem", lambda: double(1.0), folder)

    call()
    path = _only_entry(folder)
    _plant_popen(path, marker)
    with pytest.warns(cache.CacheWarning, match=rf"{path}.*subprocess:Popen.*recomputing"):
        result = call()
    time.sleep(0.2)
    assert not marker.exists()
    np.testing.assert_array_equal(result, [2.5, 1.0])
    np.testing.assert_array_equal(call(), [2.5, 1.0])  # the repaired entry loads


def test_an_unregistered_library_class_is_refused_too(tmp_path):
    path = tmp_path / "stem.pt"
    payload = {codec.TAG: "dataclass", "class": "flowlaws.common.optim:UpdateRule",
               "fields": {"optimizer": "sgd"}}
    path.write_bytes(store.entry_bytes({"result": payload}))
    with pytest.warns(cache.CacheWarning, match="UpdateRule, which the cache does not rebuild"):
        assert cache.store_or_load("stem", lambda: 3, tmp_path) == 3


def test_an_unregistered_dataclass_is_returned_but_not_stored(tmp_path):
    from flowlaws.common.optim import UpdateRule

    rule = UpdateRule("sgd", 0.1)
    with pytest.warns(cache.CacheWarning, match="not registered as a stored type"):
        assert cache.store_or_load("stem", lambda: rule, tmp_path) == rule
    assert not list(tmp_path.glob("*.pt"))


def test_one_flipped_bit_in_a_stored_float64_is_named_and_recomputed(tmp_path):
    cache.cached_call(double, 1.0, cache_dir=tmp_path)
    path = _only_entry(tmp_path)
    raw = bytearray(path.read_bytes())
    at = raw.find(np.float64(2.5).tobytes())
    assert at > 0
    raw[at + 6] ^= 0x01  # 2.5 would read 2.625
    path.write_bytes(bytes(raw))
    with pytest.warns(cache.CacheWarning, match=rf"{path}.*checksum does not match"):
        again = cache.cached_call(double, 1.0, cache_dir=tmp_path)
    np.testing.assert_array_equal(again, [2.5, 1.0])


class Colour(enum.Enum):
    RED = 1
    BLUE = 2


class Pair(NamedTuple):
    a: int
    b: np.ndarray


def test_registered_enums_and_named_tuples_round_trip(tmp_path):
    cache.stored_type(Colour)
    cache.stored_type(Pair)
    value = {"c": Colour.BLUE, "p": Pair(1, np.arange(3))}
    for _ in range(2):
        got = cache.store_or_load("rt", lambda: value, tmp_path)
        assert got["c"] is Colour.BLUE and type(got["p"]) is Pair
        np.testing.assert_array_equal(got["p"].b, np.arange(3))
    with pytest.raises(TypeError, match="registers dataclasses, named tuples and enums"):
        cache.stored_type(dict)


def test_numbers_keep_their_dtype_in_the_key(tmp_path):
    assert cache.cache_key("k", {"x": np.float32(2.0)}) != cache.cache_key("k", {"x": 2.0})
    assert cache.cache_key("k", {"x": np.float64(2.0)}) == cache.cache_key("k", {"x": 2.0})
    assert cache.cache_key("k", {"x": np.int32(2)}) != cache.cache_key("k", {"x": 2})

    def same(x):
        return x * 1

    assert type(cache.cached_call(same, 2.0, cache_dir=tmp_path)) is float
    assert type(cache.cached_call(same, np.float32(2.0), cache_dir=tmp_path)) is np.float32


def _read(p):
    return Path(p).read_text()


def test_a_str_naming_a_file_is_keyed_by_its_content(tmp_path):
    data = tmp_path / "data.txt"
    data.write_text("one")
    assert cache.cached_call(_read, str(data), cache_dir=tmp_path / "c") == "one"
    data.write_text("two")
    assert cache.cached_call(_read, str(data), cache_dir=tmp_path / "c") == "two"
    assert cache.cache_key("k", {"s": "not a file name"}) == cache.cache_key(
        "k", {"s": "not a file name"})


def test_a_path_is_keyed_by_content_not_size_and_time(tmp_path):
    data = tmp_path / "folder" / "data.txt"
    data.parent.mkdir()
    data.write_text("one")
    stamp = data.stat()
    for arg in (data, data.parent):
        assert cache.cached_call(_read_any, arg, cache_dir=tmp_path / "c") == "one"
    data.write_text("two")  # the same size, and the same modification time
    os.utime(data, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    for arg in (data, data.parent):
        assert cache.cached_call(_read_any, arg, cache_dir=tmp_path / "c") == "two"


def _read_any(p: Path) -> str:
    return (p if p.is_file() else p / "data.txt").read_text()


def test_a_function_from_the_readers_helper_module_is_keyed_by_its_code(tmp_path, monkeypatch):
    helpers = tmp_path / "helpers"
    helpers.mkdir()
    module = helpers / "hsec_reader_helper.py"
    module.write_text("SCALE = 1\n\ndef f(x):\n    return x + SCALE\n")
    monkeypatch.syspath_prepend(str(helpers))
    import hsec_reader_helper as helper

    try:
        assert cache.cached_call(helper.f, 1, cache_dir=tmp_path / "c") == 2
        module.write_text("SCALE = 1\n\ndef f(x):\n    return x + 100 * SCALE\n")
        importlib.invalidate_caches()
        helper = importlib.reload(helper)
        assert cache.cached_call(helper.f, 1, cache_dir=tmp_path / "c") == 101
        helper.SCALE = 2  # a global it reads
        assert cache.cached_call(helper.f, 1, cache_dir=tmp_path / "c") == 201
    finally:
        sys.modules.pop("hsec_reader_helper", None)
    # library and installed functions stay keyed by name
    assert cache.describe_function(np.mean) == {"function": "numpy:mean"}
    assert cache.describe_function(cache.cached_call) == {
        "function": "flowlaws.book.cache.calls:cached_call"}
