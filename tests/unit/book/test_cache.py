"""Tests of flowlaws.book.cache, against answers known in advance."""

from __future__ import annotations

import pytest
import torch

from flowlaws.book import cache


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

    monkeypatch.setattr(cache.torch, "save", broken_save)
    with pytest.raises(KeyboardInterrupt):
        cache.cached("demo", {"lr": 0.1}, lambda: 1.0, tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_a_failing_computation_stores_nothing(tmp_path):
    with pytest.raises(RuntimeError):
        cache.cached("demo", {}, lambda: (_ for _ in ()).throw(RuntimeError("boom")), tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_a_change_of_library_code_changes_the_key(monkeypatch):
    before = cache.cache_key("demo", {"lr": 0.1})
    monkeypatch.setattr(cache, "library_fingerprint", lambda: "another version")
    assert cache.cache_key("demo", {"lr": 0.1}) != before
