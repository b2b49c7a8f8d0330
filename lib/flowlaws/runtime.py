"""Where the book's computations run, and how they are made reproducible.

Every notebook calls :func:`pick_device` once and prints what it got (STYLE.md, habit 8).
"""

from __future__ import annotations

import random

import numpy as np
import torch


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
