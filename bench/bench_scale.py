"""Scale benchmarks (issue 25): runs x steps per second of the batched grokking ensemble against a
loop over runs with ``torch.optim.AdamW`` as a reader would write it; of the Heart Disease
ensemble (a chunk of runs seeded run by run) against a loop of ``torch.optim.SGD``; and the
speed-up of a sweep from one to two Dask workers (``LocalCluster``, started before the clock).

Sizes are small so that ``make bench`` stays short on a shared 2-core machine; the ratios, not
the absolute times, are the result. Torch runs on one thread on both sides.
"""
from __future__ import annotations

import tempfile
import time

import torch
from torch import nn

from bench import best_time, report

GROK = {"p": 23, "fraction": 0.3, "d_model": 32, "n_heads": 4, "d_mlp": 128, "n_runs": 16}
GROK_STEPS = 40
HEART_RUNS, HEART_STEPS = 64, 200


class ReaderTransformer(nn.Module):
    """Nanda et al.'s one-layer Transformer as a reader writes it (no layer norm, ReLU MLP)."""

    def __init__(self, p: int, d_model: int, n_heads: int, d_mlp: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(p + 1, d_model)
        self.pos = nn.Parameter(torch.randn(3, d_model) / d_model**0.5)
        self.attn = nn.MultiheadAttention(d_model, n_heads, bias=False, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(d_model, d_mlp), nn.ReLU(), nn.Linear(d_mlp, d_model))
        self.unembed = nn.Linear(d_model, p, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x) + self.pos
        h = h + self.attn(h, h, h, need_weights=False)[0]
        h = h + self.mlp(h)
        return self.unembed(h[:, -1])


def bench_grokking() -> None:
    from flowlaws.percolation.grokking.model import modular_data
    from flowlaws.percolation.grokking.training import GrokConfig, train

    cfg = GrokConfig(**GROK, n_steps=GROK_STEPS, log_every=GROK_STEPS,
                     checkpoint_every=GROK_STEPS)

    def batched() -> None:
        with tempfile.TemporaryDirectory() as d:
            train(cfg, cache_dir=d, progress=False)

    x, y, *_ = modular_data(GROK["p"], GROK["fraction"], 0)

    def loop() -> None:
        for r in range(GROK["n_runs"]):
            torch.manual_seed(r)
            model = ReaderTransformer(GROK["p"], GROK["d_model"], GROK["n_heads"],
                                      GROK["d_mlp"])
            opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1.0,
                                    betas=(0.9, 0.98))
            for _ in range(GROK_STEPS):
                opt.zero_grad()
                nn.functional.cross_entropy(model(x), y).backward()
                opt.step()

    fast, slow = best_time(batched, repeat=2), best_time(loop, repeat=1)
    work = GROK["n_runs"] * GROK_STEPS
    report(f"grokking p={GROK['p']}, {GROK['n_runs']} runs x {GROK_STEPS} steps (batched vs "
           "AdamW loop)", fast, slow, f"{work / fast:,.0f} vs {work / slow:,.0f} runs*steps/s")


def bench_heart() -> None:
    from flowlaws.common.chunks import run_seeds
    from flowlaws.percolation.dynamics.seeded import data_ensemble_chunk, data_set

    seeds = run_seeds(0, HEART_RUNS)
    kw = {"data": "heart", "n_steps": HEART_STEPS, "record_every": 2}

    def batched() -> None:
        data_ensemble_chunk(seeds, **kw)

    X, Y = data_set("heart")

    def loop() -> None:
        for s in seeds:
            g = torch.Generator().manual_seed(s)
            model = nn.Sequential(nn.Linear(X.shape[1], 16, bias=False), nn.Tanh(),
                                  nn.Linear(16, 1, bias=False))
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            for _ in range(HEART_STEPS):
                idx = torch.randint(len(X), (8,), generator=g)
                opt.zero_grad()
                (0.5 * (model(X[idx]) - Y[idx]).pow(2).sum(1).mean()).backward()
                opt.step()

    fast, slow = best_time(batched, repeat=2), best_time(loop, repeat=1)
    work = HEART_RUNS * HEART_STEPS
    report(f"Heart Disease, {HEART_RUNS} runs x {HEART_STEPS} steps (chunk vs SGD loop)", fast,
           slow, f"{work / fast:,.0f} vs {work / slow:,.0f} runs*steps/s (chunk records C_max)")


def bench_dask_workers() -> None:
    from dask.distributed import Client, LocalCluster

    from flowlaws.common.chunks import run_chunked, run_seeds
    from flowlaws.percolation.dynamics.seeded import data_ensemble_chunk

    seeds = run_seeds(0, 128)
    kw = {"data": "heart", "n_steps": HEART_STEPS, "record_every": 2}
    times = {}
    for n in (1, 2):
        with LocalCluster(n_workers=n, threads_per_worker=1, dashboard_address=None) as cluster, \
                Client(cluster) as client, tempfile.TemporaryDirectory() as d:
            client.submit(sum, [1]).result()  # workers up and importing before the clock
            start = time.perf_counter()
            run_chunked(data_ensemble_chunk, seeds, kw, chunk_size=16, client=client,
                        cache_dir=d)
            times[n] = time.perf_counter() - start
    report("Heart Disease sweep, 128 runs in 8 chunks (2 vs 1 Dask workers)", times[2],
           times[1], "at most 2x on 2 cores (shared cores give less)")


def main() -> None:
    torch.set_num_threads(1)
    bench_grokking()
    bench_heart()
    bench_dask_workers()


if __name__ == "__main__":
    main()
