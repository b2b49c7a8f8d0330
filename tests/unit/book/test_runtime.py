"""flowlaws.book.runtime: the chapter's clock (pick_device starts it, record_run_time glues it),
the one way a chapter pins torch's threads, and seeding."""

from __future__ import annotations

import pytest
import torch

from flowlaws.book import runtime
from flowlaws.book.runtime import (
    one_thread,
    pick_device,
    pin_threads,
    record_run_time,
    run_time_text,
    seed_everything,
)


def test_run_time_text_names_time_device_load_and_cores():
    assert run_time_text(95.4, 2.06, 3.4, 2) == "95 s on cpu, load 2.1 → 3.4 on 2 cores"
    assert run_time_text(300, None, None, None, "cuda") == "5.0 min on cuda"
    assert run_time_text(10, float("nan"), 1.0, 16) == "10 s on cpu, load 1.0 on 16 cores"
    with pytest.raises(ValueError, match="seconds"):
        run_time_text(float("nan"), 1, 1, 1)


def test_record_run_time_measures_from_pick_device(monkeypatch, capsys):
    glued = {}
    monkeypatch.setattr("flowlaws.book.ledger.record_value", lambda k, t: glued.update({k: t}))
    monkeypatch.setattr(runtime, "_clock", {})
    with pytest.raises(RuntimeError, match="pick_device"):
        record_run_time()
    clock = iter([100.0, 163.0])
    monkeypatch.setattr(runtime.time, "monotonic", lambda: next(clock))
    pick_device("cpu", verbose=False)
    assert record_run_time() is None
    text = glued["run_time"]
    assert text.startswith("63 s on cpu") and list(glued) == ["run_time"]
    assert capsys.readouterr().out == f"this chapter ran in {text}\n"


def test_pin_threads_sets_and_returns_previous() -> None:
    start = torch.get_num_threads()
    try:
        assert pin_threads(1) == start
        assert torch.get_num_threads() == 1
        assert pin_threads(2) == 1
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(start)


def test_one_thread_restores() -> None:
    start = torch.get_num_threads()
    with one_thread():
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == start


@pytest.mark.parametrize("bad", [0, -1, 1.0, True, "1"])
def test_pin_threads_refuses_bad_counts(bad: object) -> None:
    with pytest.raises(ValueError, match="n must be"):
        pin_threads(bad)  # type: ignore[arg-type]


def test_seed_everything_is_reproducible() -> None:
    seed_everything(3)
    a = torch.rand(3)
    seed_everything(3)
    assert torch.equal(a, torch.rand(3))
