"""Counting conservation laws: the algorithms side by side, measured in one run.

Two comparisons. Small models (issue 3): the batched count, each level's brackets in one
``vmap``, against the same algorithm with a Python loop over single brackets
(``count(..., batched=False)``); targets: two- to four-layer linear and ReLU networks of widths
2–5 under 1 s each, RoPE attention with 256 parameters under 30 s. The reference SageMath code
of Marcotte et al. (2023) takes 41 s and 136 s per architecture on 64 threads.

Attention layers of D ≈ 1,000–4,000 parameters (issue 14): the count against the earlier
algorithm, ``count(..., exact_svd=True, use_known=False)`` (every rank from all D singular
values, and one more level to confirm the last; what ``count`` did when issue 14 was filed,
except that a wide block's singular values already come from the QR of its transpose), with
the wall and CPU seconds of each (the count runs on one thread, so on an idle machine the two
agree; on a shared one the CPU seconds are the measure), and the largest D counted within a
minute of CPU (D = 6,400 is the largest tried, to keep the run to a few minutes). Target:
MultiHeadAttention(32, 4, 8, 8), D = 4,096, counted and certified in under 60 s on a 2-core CPU.
"""

from __future__ import annotations

import os
import time

import torch

from bench import best_time, report
from flowlaws.common.models import Deep, MultiHeadAttention
from flowlaws.conservation import laws, lie_count
from flowlaws.conservation.relu_units import nondegenerate


def _one(name: str, model: torch.nn.Module, X: torch.Tensor, target_s: float) -> None:
    found = lie_count.count(model, X)
    fast = best_time(lambda: lie_count.count(model, X), repeat=2)
    start = time.perf_counter()
    slow_found = lie_count.count(model, X, batched=False)
    slow = time.perf_counter() - start
    same = "same result" if slow_found.dims == found.dims else "RESULTS DIFFER"
    verdict = "ok" if fast < target_s else "MISSED"
    report(name, fast, slow, f"target < {target_s:g} s: {verdict}; {same}")
    print(f"    {found}".replace("\n", "\n    "))


def _timed(fn, *args, **kwargs) -> tuple[object, float, float]:
    """``fn(*args, **kwargs)``, its wall and its CPU seconds (``time.process_time``)."""
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - wall, time.process_time() - cpu


def _attention(sizes: tuple[int, int, int, int]) -> tuple[torch.nn.Module, torch.Tensor]:
    """The layer (float64, seed 0) and 16 random sequences of 4 tokens."""
    torch.manual_seed(0)
    layer = MultiHeadAttention(*sizes).double()
    return layer, laws.random_inputs(layer, 16, tokens=4)


def large() -> None:
    """The count against the earlier algorithm at D ≈ 1,000–4,000, then the largest D in 60 s."""
    print(f"  load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; wall and CPU s")
    for sizes in [(16, 4, 4, 4), (24, 4, 6, 6), (32, 4, 8, 8)]:
        layer, X = _attention(sizes)
        D = sum(p.numel() for p in layer.parameters())
        new, wall, cpu = _timed(lie_count.count, layer, X)
        old, old_wall, old_cpu = _timed(
            lie_count.count, layer, X, exact_svd=True, use_known=False
        )
        same = (new.n_laws, new.certified) == (old.n_laws, old.certified)
        verdict = "" if D != 4096 else f"target < 60 s CPU: {'ok' if cpu < 60 else 'MISSED'}; "
        report(f"count MHA{sizes} (D={D}), CPU", cpu, old_cpu,
               f"{verdict}{'same result' if same else 'RESULTS DIFFER'}")
        report(f"count MHA{sizes} (D={D}), wall", wall, old_wall)
        print(f"    {new}".replace("\n", "\n    "))
    largest, tried = (4096 if cpu < 60 else 0), "4,096"
    if largest:  # one larger layer (D = 6,400): 5,184 took 38 s of CPU on a loaded machine
        layer, X = _attention((40, 4, 10, 10))
        found, wall, cpu = _timed(lie_count.count, layer, X)
        print(f"  count MHA(40, 4, 10, 10) (D=6400): {cpu:.1f} s CPU, {wall:.1f} s wall, "
              f"{found.n_laws} laws, {'certified' if found.certified else 'NOT certified'}")
        tried = "6,400"
        largest = 6400 if cpu < 60 and found.certified else largest
    print(f"  largest D counted and certified in under 60 s of CPU: {largest:,} (largest tried: "
          f"{tried}; load average {os.getloadavg()[0]:.1f})")


def main() -> None:
    torch.manual_seed(0)
    lie_count.count(Deep(2, [2], 2, "linear").double(), torch.randn(4, 2, dtype=torch.float64))
    for activation in ("linear", "relu"):
        for layers in (2, 3, 4):
            for width in (2, 3, 4, 5):
                D = layers * width * width
                n = 3 * width if activation == "linear" else 2 * D + 20
                gen = torch.Generator().manual_seed(layers * 10 + width)
                X = torch.randn(n, width, generator=gen, dtype=torch.float64)
                # every ReLU unit active on 20–80 % of X: dead or linear units are extra laws
                model, _ = nondegenerate(
                    lambda w=width, k=layers, a=activation: Deep(w, [w] * (k - 1), w, a).double(), X
                )
                _one(f"count {activation} {layers} layers width {width} (D={D})", model, X, 1.0)
    torch.manual_seed(0)
    attention = MultiHeadAttention(8, 2, 4, 4, pe="rope").double()
    X = laws.random_inputs(attention, 40, tokens=4)
    _one("count MultiHeadAttention(8, 2, 4, 4, rope) (D=256)", attention, X, 30.0)
    large()


if __name__ == "__main__":
    main()
