"""Tests of flowlaws.book.cache (its store and keys), against answers known in advance."""

from __future__ import annotations

import dataclasses
import os
import time

import numpy as np
import pytest
import torch

from flowlaws.book import cache
from flowlaws.book.cache import codec, keys, store


def test_second_call_loads_instead_of_computing(tmp_path):
    calls = []

    def compute():
        calls.append(1)
        return {"x": torch.arange(3)}

    first = cache.cached("demo", {"lr": 0.1}, compute, tmp_path)
    second = cache.cached("demo", {"lr": 0.1}, compute, tmp_path)
    assert len(calls) == 1 and torch.equal(first["x"], second["x"])


def test_a_changed_parameter_is_recomputed(tmp_path):
    values = iter([1.0, 2.0])
    a = cache.cached("demo", {"lr": 0.1}, lambda: next(values), tmp_path)
    b = cache.cached("demo", {"lr": 0.2}, lambda: next(values), tmp_path)
    assert (a, b) == (1.0, 2.0)
    assert cache.cache_key("demo", {"lr": 0.1}) != cache.cache_key("demo", {"lr": 0.2})


def test_key_ignores_dict_order():
    assert cache.cache_key("n", {"a": 1, "b": 2}) == cache.cache_key("n", {"b": 2, "a": 1})


def test_an_interrupted_save_leaves_no_file(tmp_path, monkeypatch):
    def broken_save(obj, f):
        f.write(b"half")
        raise KeyboardInterrupt

    monkeypatch.setattr(store.torch, "save", broken_save)
    with pytest.raises(KeyboardInterrupt):
        cache.cached("demo", {"lr": 0.1}, lambda: 1.0, tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_a_failing_computation_stores_nothing(tmp_path):
    with pytest.raises(RuntimeError):
        cache.cached("demo", {}, lambda: (_ for _ in ()).throw(RuntimeError("boom")), tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_a_change_of_library_code_changes_the_key(monkeypatch):
    before = cache.cache_key("demo", {"lr": 0.1})
    monkeypatch.setattr(keys, "library_fingerprint", lambda: "another version")
    assert cache.cache_key("demo", {"lr": 0.1}) != before


# issue 16: keys hash the content; nothing computed is lost; every stored type loads again


def test_keys_see_the_content_of_tensors_arrays_and_modules():
    a = torch.zeros(2000)
    b = a.clone()
    b[1000] = 1.0  # repr elides the middle of a 2,000-element tensor
    assert cache.cache_key("k", {"x": a}) != cache.cache_key("k", {"x": b})
    near = (torch.tensor([1.000011]), torch.tensor([1.000012]))  # equal to 4 decimals
    assert cache.cache_key("k", {"x": near[0]}) != cache.cache_key("k", {"x": near[1]})
    assert cache.cache_key("k", {"x": a.numpy()}) != cache.cache_key("k", {"x": b.numpy()})
    torch.manual_seed(0)
    first, second = torch.nn.Linear(3, 2), torch.nn.Linear(3, 2)
    assert cache.cache_key("k", {"m": first}) != cache.cache_key("k", {"m": second})
    second.load_state_dict(first.state_dict())
    assert cache.cache_key("k", {"m": first}) == cache.cache_key("k", {"m": second})
    assert cache.cache_key("k", {"x": a}) == cache.cache_key("k", {"x": a.clone()})


def test_keys_of_dataclasses_numpy_scalars_and_nested_dicts():
    from flowlaws.percolation.dynamics.ensemble import TwoLayerShape

    assert (cache.cache_key("k", {"s": TwoLayerShape(2, 3, 1)})
            != cache.cache_key("k", {"s": TwoLayerShape(2, 4, 1)}))
    assert cache.cache_key("k", {"n": np.int64(4)}) == cache.cache_key("k", {"n": 4})
    assert (cache.cache_key("k", {"d": {"a": 1, "b": [1.0, 2.0]}, "e": 2})
            == cache.cache_key("k", {"e": 2, "d": {"b": [1.0, 2.0], "a": 1}}))
    assert cache.cache_key("k", {"x": float("nan")}) != cache.cache_key("k", {"x": float("inf")})


def test_a_value_whose_content_cannot_be_hashed_is_named():
    # a lambda is hashed by its code and what it reads (flowlaws.book.cache.keys)
    assert cache.cache_key("k", {"f": lambda: 1}) != cache.cache_key("k", {"f": lambda: 2})
    with pytest.raises(TypeError, match=r"params\['o'\]"):
        cache.cache_key("k", {"o": object()})


@cache.stored_type
@dataclasses.dataclass(frozen=True)
class _Summary:
    values: np.ndarray
    score: float
    note: str = "ok"


@pytest.mark.parametrize("value", [
    np.arange(6.0).reshape(2, 3),
    np.float64(2.5),
    np.int32(7),
    _Summary(np.array([1.0, np.nan]), np.float64(0.25)),
    {"curve": np.linspace(0, 1, 5), "n": np.int64(3), "s": {1, 2}, (1, "a"): [np.bool_(True)],
     np.float64(0.5): "a numpy key"},
], ids=["array", "float64", "int32", "dataclass", "nested"])
def test_numpy_values_and_dataclasses_load_on_every_later_call(tmp_path, value):
    calls = []

    def compute():
        calls.append(1)
        return value

    results = [cache.cached("np", {"v": 1}, compute, tmp_path) for _ in range(3)]
    assert len(calls) == 1
    for r in results:
        assert type(r) is type(value)
        if isinstance(value, dict):
            np.testing.assert_array_equal(r["curve"], value["curve"])
            assert r["n"] == 3 and type(r["n"]) is np.int64 and r["s"] == {1, 2}
            assert r[(1, "a")] == [True] and r[0.5] == "a numpy key"
            assert any(type(k) is np.float64 for k in r)
        elif isinstance(value, _Summary):
            np.testing.assert_array_equal(r.values, value.values)
            assert r.score == 0.25 and r.note == "ok"
        else:
            np.testing.assert_array_equal(r, value)
            assert np.asarray(r).dtype == np.asarray(value).dtype


def test_an_unwritable_folder_returns_the_result_with_a_warning(tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder should be")
    with pytest.warns(cache.CacheWarning, match="not-a-folder"):
        result = cache.cached("demo", {"lr": 0.1}, lambda: {"x": torch.ones(2)}, blocker)
    assert torch.equal(result["x"], torch.ones(2))


def test_an_unstorable_result_is_returned_with_a_warning_naming_the_file(tmp_path):
    thing = object()
    with pytest.warns(cache.CacheWarning, match=r"demo-[0-9a-f]+\.pt") as record:
        assert cache.cached("demo", {}, lambda: {"thing": thing}, tmp_path)["thing"] is thing
    assert "cannot store" in str(record[0].message)
    assert not list(tmp_path.glob("*.partial"))


def test_the_cache_folder_is_read_at_call_time(tmp_path, monkeypatch):
    monkeypatch.setenv("FLOWLAWS_CACHE", str(tmp_path / "one"))
    assert cache.cache_dir() == tmp_path / "one" and cache.DEFAULT_DIR == tmp_path / "one"
    cache.cached("demo", {"a": 1}, lambda: 1.0)
    monkeypatch.setenv("FLOWLAWS_CACHE", str(tmp_path / "two"))
    cache.cached("demo", {"a": 1}, lambda: 2.0)
    assert len(list((tmp_path / "one").iterdir())) == 1
    assert len(list((tmp_path / "two").iterdir())) == 1


def test_stale_partial_files_are_removed_and_fresh_ones_kept(tmp_path):
    old, young = tmp_path / "demo-x.ptabc.partial", tmp_path / "demo-y.ptdef.partial"
    old.write_bytes(b"left by a killed write")
    young.write_bytes(b"a write still running elsewhere")
    past = time.time() - 2 * cache.PARTIAL_MAX_AGE_S
    os.utime(old, (past, past))
    cache.cached("demo", {}, lambda: 1.0, tmp_path)
    assert not old.exists() and young.exists()


def _entry(tmp_path, name="demo", params=None):
    return tmp_path / f"{name}-{cache.cache_key(name, params or {})}.pt"


@pytest.mark.parametrize("damage", ["garbage", "truncated", "empty", "unsafe", "no result",
                                    "old format", "unknown type"])
def test_a_corrupt_entry_is_recomputed_with_a_warning_naming_it(tmp_path, damage):
    path = _entry(tmp_path)
    cache.cached("demo", {}, lambda: {"x": torch.arange(100)}, tmp_path)
    raw = path.read_bytes()
    if damage == "garbage":
        path.write_bytes(b"\x00not a torch file")
    elif damage == "truncated":
        path.write_bytes(raw[: len(raw) // 2])
    elif damage == "empty":
        path.write_bytes(b"")
    elif damage == "unsafe":  # a raw numpy array: safe loading refuses it
        torch.save(np.arange(3), path)
    elif damage == "no result":  # a KeyError inside
        path.write_bytes(store.entry_bytes({"name": "demo"}))
    elif damage == "old format":  # a bare result, as the cache wrote before
        torch.save({"x": torch.arange(100)}, path)
    else:
        path.write_bytes(store.entry_bytes({"result": {codec.TAG: "martian"}}))
    with pytest.warns(cache.CacheWarning, match=path.name) as record:
        result = cache.cached("demo", {}, lambda: {"x": torch.arange(5)}, tmp_path)
    message = str(record[0].message)
    assert "weights_only=False" not in message and "recomputing" in message
    assert torch.equal(result["x"], torch.arange(5))
    again = cache.cached("demo", {}, lambda: pytest.fail("the repaired entry is loaded"),
                         tmp_path)
    assert torch.equal(again["x"], torch.arange(5))


def test_a_local_class_is_returned_with_a_warning_not_stored(tmp_path):
    @dataclasses.dataclass
    class Local:
        x: int

    with pytest.warns(cache.CacheWarning, match="defined inside a function"):
        assert cache.cached("demo", {}, lambda: Local(1), tmp_path) == Local(1)
