"""Shared set-up for the library's unit tests."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True, scope="session")
def one_torch_thread():
    """One torch thread for the whole unit suite.

    The tests use small tensors, where a second thread only adds synchronisation: on the
    2-core machines this suite runs on, one thread was measured ~10x faster than two.
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
