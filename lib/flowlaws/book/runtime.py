"""Where the book's computations run, and how they are made reproducible.

:func:`pick_device` picks ``cuda`` when present and says so (every notebook prints what it
got); :func:`seed_everything` seeds Python, NumPy and torch; :func:`pin_threads` sets torch's
intra-op threads for the rest of a notebook and :func:`one_thread` for one block (small tensors
run faster on one thread on a busy two-core machine). A notebook pins its threads only through
these two.

Explained in: book/01_conservation/01_gradient_flow.ipynb.
"""
from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import torch

__all__ = [
    "one_thread",
    "pin_threads",
    "pick_device",
    "seed_everything",
]


def pin_threads(n: int = 1) -> None:
    """Set torch's intra-op threads to ``n`` for the rest of the process (returns nothing, so
    a setup cell that ends with it displays nothing).

    The book's tensors are small (a few thousand numbers): on a shared two-core CPU one thread
    is much faster than two, so every chapter calls ``pin_threads(1)`` in its setup cell (II.7,
    whose transformer is larger, takes ``n_threads`` from its parameters).

    Explained in: book/01_conservation/01_gradient_flow.ipynb
    """
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"n must be a positive int (threads), got {n!r}")
    torch.set_num_threads(n)


@contextmanager
def one_thread() -> Iterator[None]:
    """Run the block on one intra-op thread, then restore the previous number.

    The count's tensors are small (``D`` up to a few hundred): there OpenMP threads gain
    little, and on a shared, loaded machine they lose a lot (measured: 1.6 s on one thread
    against 12 s on two for ``MultiHeadAttention(8, 2, 4, 4, pe="rope")``).

    Explained in: book/01_conservation/01_gradient_flow.ipynb
    """
    before = torch.get_num_threads()
    pin_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def pick_device(prefer: str | None = None, *, verbose: bool = True) -> torch.device:
    """Return the device the notebook computes on: ``cuda`` when present, else ``cpu``.

    Args:
        prefer: ``"cpu"``, ``"cuda"`` or ``None`` (pick ``cuda`` when available).
            Asking for ``"cuda"`` on a machine without a GPU raises ``ValueError``.
        verbose: print one line naming the device, so every run says where it ran.
    """
    if prefer not in (None, "cpu", "cuda"):
        raise ValueError(f"prefer must be None, 'cpu' or 'cuda', got {prefer!r}")
    if prefer == "cuda" and not torch.cuda.is_available():
        raise ValueError("prefer='cuda' but no CUDA device is available on this machine")
    name = prefer or ("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if verbose:
        detail = torch.cuda.get_device_name(device) if name == "cuda" else "CPU"
        print(f"flowlaws computes on: {name} ({detail}), torch {torch.__version__}")
    return device


def seed_everything(seed: int) -> torch.Generator:
    """Seed Python, NumPy and torch; return a fresh ``torch.Generator`` seeded with ``seed``."""
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed)
