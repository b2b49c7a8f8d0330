"""Tests of flowlaws.book.cache.calls: a cached call is keyed by everything it reads."""

from __future__ import annotations

import os
import textwrap

import numpy as np
import pytest
import torch

from flowlaws.book.cache import cached_call, call_key


def notebook(source: str, **values) -> dict:
    """Run ``source`` as a notebook's cells run: in a namespace whose ``__name__`` is
    ``__main__``, so its functions are the reader's code."""
    ns = {"__name__": "__main__", **values}
    exec(textwrap.dedent(source), ns)  # noqa: S102 - test code written here
    return ns


ADAPTIVE = """
import torch
from flowlaws.book.cache import cached_call

X = torch.randn(n_samples, 3, generator=torch.Generator().manual_seed(0))
Y = X.sum(1, keepdim=True)
calls = []

def fit(lr):
    calls.append(lr)
    w = torch.zeros(3, 1)
    for _ in range(20):
        w -= lr * 2 * X.T @ (X @ w - Y) / len(X)
    return ((X @ w - Y) ** 2).mean().item()

loss = cached_call(fit, 0.05, cache_dir=folder)
"""


def test_n_samples_is_part_of_the_key_without_being_listed(tmp_path):
    # issue 16: the adaptive chapter's hand-listed key left out n_samples, so a 16-sample run
    # was served the 64-sample result
    big = notebook(ADAPTIVE, n_samples=64, folder=tmp_path)
    small = notebook(ADAPTIVE, n_samples=16, folder=tmp_path)
    fresh = notebook(ADAPTIVE, n_samples=16, folder=tmp_path / "elsewhere")
    assert big["calls"] == small["calls"] == [0.05]  # computed both times
    assert small["loss"] == fresh["loss"] != big["loss"]
    again = notebook(ADAPTIVE, n_samples=16, folder=tmp_path)
    assert again["calls"] == [] and again["loss"] == small["loss"]  # the same call: loaded


def test_changing_any_input_recomputes(tmp_path):
    def f(x, scale=1.0, *, shift=0.0):  # the random draw tells a computed result from a load
        return [x * scale + shift, torch.rand(())]

    x = torch.linspace(0, 1, 2000)
    y = x.clone()
    y[1000] += 1e-6  # repr would elide this entry
    calls = [((x,), {}), ((y,), {}), ((x, 2.0), {}), ((x,), {"shift": 1.0}), ((x.double(),), {})]
    marks = [cached_call(f, *args, cache_dir=tmp_path, **kw)[1] for args, kw in calls]
    assert len(set(map(float, marks))) == 5  # five computations
    assert float(cached_call(f, x.clone(), cache_dir=tmp_path)[1]) == float(marks[0])  # loaded
    assert float(cached_call(f, y, cache_dir=tmp_path)[1]) == float(marks[1])


def test_the_function_s_code_globals_and_helpers_are_part_of_the_key():
    src = """
    scale = {scale}
    def helper(x):
        return x * scale
    def f(x):
        return [helper(v) {op} 1 for v in x]
    """
    keys = {call_key(notebook(src.format(scale=s, op=op))["f"], ([1.0],), {})
            for s, op in [(1, "+"), (2, "+"), (1, "-")]}
    assert len(keys) == 3  # a global read by a helper, an operator inside a comprehension
    comment = "\n    # a comment changes no result"
    assert (call_key(notebook(src.format(scale=1, op="+"))["f"], ([1.0],), {})
            == call_key(notebook(src.format(scale=1, op="+") + comment)["f"], ([1.0],), {}))
    # defaults and closures
    assert (call_key(notebook("def f(x, c=1): return x + c")["f"], (1,), {})
            != call_key(notebook("def f(x, c=2): return x + c")["f"], (1,), {}))
    make = notebook("def make(c):\n    return lambda x: x + c")["make"]
    assert call_key(make(1), (1,), {}) != call_key(make(2), (1,), {})


def test_a_recursive_function_and_a_library_function_have_keys():
    ns = notebook("def fact(n):\n    return 1 if n < 2 else n * fact(n - 1)")
    assert call_key(ns["fact"], (4,), {}) != call_key(ns["fact"], (5,), {})
    from flowlaws.percolation.cascade.variance import relative_variance
    assert call_key(relative_variance, (1,), {}) == call_key(relative_variance, (1,), {})


def test_a_global_whose_content_cannot_be_hashed_is_named():
    ns = notebook("def f(x):\n    return handle\n", handle=object())
    with pytest.raises(TypeError, match=r"the global 'handle' read by f"):
        call_key(ns["f"], (1,), {})


def test_an_image_folder_is_keyed_by_its_files(tmp_path):
    folder = tmp_path / "images"
    (folder / "cats").mkdir(parents=True)
    (folder / "cats" / "a.png").write_bytes(b"12345")

    def count_files(path):  # the random draw tells a computed result from a load
        return sum(len(files) for _, _, files in os.walk(path)), float(torch.rand(()))

    cache = tmp_path / "cache"
    first = cached_call(count_files, folder, cache_dir=cache)
    assert first[0] == 1 and cached_call(count_files, folder, cache_dir=cache) == first
    (folder / "cats" / "b.png").write_bytes(b"1")  # a file added
    added = cached_call(count_files, folder, cache_dir=cache)
    assert added[0] == 2 and added != first
    (folder / "cats" / "b.png").write_bytes(b"123")  # a file changed (size, mtime)
    os.utime(folder / "cats" / "b.png", ns=(1, 1))
    changed = cached_call(count_files, folder, cache_dir=cache)
    assert changed[0] == 2 and changed != added
    other = tmp_path / "other"
    (other / "cats").mkdir(parents=True)
    (other / "cats" / "a.png").write_bytes(b"9")
    assert cached_call(count_files, other, cache_dir=cache) != first


def test_a_generator_is_keyed_by_its_state():
    g = torch.Generator().manual_seed(0)
    before = call_key(torch.randn, (3,), {"generator": g})
    torch.randn(3, generator=g)
    assert call_key(torch.randn, (3,), {"generator": g}) != before
    rng = np.random.default_rng(0)
    before = call_key(np.random.Generator.normal, (rng,), {})
    rng.normal()
    assert call_key(np.random.Generator.normal, (rng,), {}) != before
