"""Counting conservation laws: batched brackets against one bracket at a time, side by side.

The fast count evaluates each level's brackets in one ``vmap``; the reference is the same
algorithm (same random fields, same results) with a Python loop over single brackets and
single Jacobian rows: ``flowlaws.conservation.lie_count.count(..., batched=False)``. Targets
(issue 3): two- to four-layer linear and ReLU networks of widths 2–5 under 1 s each, RoPE
attention with 256 parameters under 30 s. The reference SageMath code of Marcotte et al.
(2023) takes 41 s and 136 s per architecture on 64 threads.
"""

from __future__ import annotations

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


if __name__ == "__main__":
    main()
