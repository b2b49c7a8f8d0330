"""Where the book's computations run, and how they are made reproducible.

:func:`pick_device` picks ``cuda`` when present and says so (every notebook prints what it
got) and starts the chapter's clock; :func:`seed_everything` seeds Python, NumPy and torch;
:func:`pin_threads` sets torch's intra-op threads for the rest of a notebook and
:func:`one_thread` for one block (small tensors run faster on one thread on a busy two-core
machine; a notebook pins its threads only through these two); :func:`record_run_time`, the
last cell of every chapter, glues the wall time since :func:`pick_device` and the machine's
load, which the book's intro pastes.

Explained in: book/01_conservation/01_gradient_flow.ipynb.
"""
from __future__ import annotations

import os
import random
import time
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import torch

__all__ = [
    "one_thread",
    "pin_threads",
    "pick_device",
    "check_device",
    "record_run_time",
    "run_time_text",
    "seed_everything",
]

RUN_TIME_KEY = "run_time"  # the glued key the intro's table pastes from each chapter
_clock: dict[str, float] = {}  # wall-clock start (time.monotonic) and load then


def _load() -> float | None:
    """The machine's 1-minute load average (``None`` where the OS has none: Windows)."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def pin_threads(n: int = 1) -> int:
    """Set torch's intra-op threads to ``n`` for the rest of the process; return the previous
    count (so a caller can restore it).

    The book's tensors are small (a few thousand numbers): on a shared two-core CPU one thread
    is much faster than two, so every chapter calls ``pin_threads(1)`` in its setup cell (II.7,
    whose transformer is larger, takes ``n_threads`` from its parameters).

    Explained in: book/01_conservation/01_gradient_flow.ipynb
    """
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"n must be a positive int (threads), got {n!r}")
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    return before


@contextmanager
def one_thread() -> Iterator[None]:
    """Run the block on one intra-op thread, then restore the previous number.

    The count's tensors are small (``D`` up to a few hundred): there OpenMP threads gain
    little, and on a shared, loaded machine they lose a lot (measured: 1.6 s on one thread
    against 12 s on two for ``MultiHeadAttention(8, 2, 4, 4, pe="rope")``).

    Explained in: book/01_conservation/01_gradient_flow.ipynb
    """
    before = pin_threads(1)
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
    _clock.update(start=time.monotonic(), load=_load() or float("nan"))
    if verbose:
        detail = torch.cuda.get_device_name(device) if name == "cuda" else "CPU"
        print(f"flowlaws computes on: {name} ({detail}), torch {torch.__version__}")
    return device


def check_device(value: torch.device | str | None, name: str = "device") -> torch.device:
    """``value`` as a :class:`torch.device` (``None``: the CPU), or a ``ValueError`` naming
    ``name`` (``"cpux"`` is not a device; ``"cuda"`` without a GPU is refused here too)."""
    if value is None:
        return torch.device("cpu")
    if not isinstance(value, torch.device | str):
        raise TypeError(f"{name} must be a torch.device or a str such as 'cpu' or 'cuda', "
                        f"got {type(value).__name__}")
    try:
        device = torch.device(value)
    except (RuntimeError, ValueError) as error:
        raise ValueError(f"{name} must name a torch device such as 'cpu', 'cuda' or 'cuda:0', "
                         f"got {value!r}") from error
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"{name}={value!r} but no CUDA device is available on this machine")
    return device


def seed_everything(seed: int) -> torch.Generator:
    """Seed Python, NumPy and torch; return a fresh ``torch.Generator`` seeded with ``seed``."""
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed)


def run_time_text(seconds: float, load_start: float | None, load_end: float | None,
                  cores: int | None, device: str = "cpu") -> str:
    """One line: ``"95 s on cpu, load 2.1 → 3.4 on 2 cores"`` (minutes from 120 s on)."""
    if not seconds >= 0:
        raise ValueError(f"seconds must be a non-negative number, got {seconds!r}")
    took = f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"
    loads = [f"{x:.1f}" for x in (load_start, load_end) if x is not None and x == x]
    load = f", load {' → '.join(loads)}" if loads else ""
    return f"{took} on {device}{load}" + (f" on {cores} cores" if cores else "")


def record_run_time(*, quiet: bool = False) -> None:
    """Glue (as ``run_time``) and print the wall time since this notebook's :func:`pick_device`
    call, with the machine's 1-minute load average then and now and its number of cores.

    The last cell of every chapter calls it; the book's intro pastes each chapter's line, so
    the run times it shows are the ones measured by the build that made it. Raises
    ``RuntimeError`` when :func:`pick_device` was not called in this kernel. Returns nothing
    (the notebook's last cell shows the printed line only).
    """
    if "start" not in _clock:
        raise RuntimeError("record_run_time() needs pick_device() first: it starts the clock")
    device = "cuda" if torch.cuda.is_available() and torch.cuda.is_initialized() else "cpu"
    text = run_time_text(time.monotonic() - _clock["start"], _clock["load"], _load(),
                         os.cpu_count(), device)
    from flowlaws.book.ledger import record_value  # glue, with or without myst-nb

    record_value(RUN_TIME_KEY, text)
    if not quiet:
        print(f"this chapter ran in {text}")
