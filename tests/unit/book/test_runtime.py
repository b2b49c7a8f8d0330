"""flowlaws.book.runtime: the one way a chapter pins torch's threads, and seeding."""
import pytest
import torch

from flowlaws.book.runtime import one_thread, pin_threads, seed_everything


def test_pin_threads_sets_the_count_and_returns_nothing() -> None:
    start = torch.get_num_threads()
    try:
        assert pin_threads(1) is None  # a setup cell ending with it displays nothing
        assert torch.get_num_threads() == 1
        pin_threads(2)
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
