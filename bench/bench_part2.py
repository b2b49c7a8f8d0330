"""Part 2 benchmarks: ensemble Euler–Maruyama against a loop over trajectories, surrogates, and
the time of one cascade verdict.

Both sides run with one torch thread: on a shared CPU, two threads on these small tensors are
slower than one, and the comparison is about batching, not threading.
"""

from __future__ import annotations

import os
from unittest import mock

import numpy as np
import torch

from bench import best_time, report
from flowlaws.common import threads
from flowlaws.percolation.cascade import config, judge, statistic, surrogates
from flowlaws.percolation.dynamics import ensemble, sde
from flowlaws.percolation.toys import cascades

N_RUNS, N_STEPS = 1000, 20


def _sde_problem() -> tuple:
    shape = ensemble.TwoLayerShape(n_in=4, width=8, n_out=1, activation="tanh")
    g = torch.Generator().manual_seed(0)
    X = torch.randn(32, 4, generator=g)
    Y = torch.sin(X[:, :1])
    theta0 = ensemble.ensemble_init(shape, N_RUNS, seed=1, dtype=torch.float32)
    return shape, X, Y, theta0


def bench_ensemble_em() -> None:
    """1,000 trajectories of SGD-as-SDE on a 4-8-1 network: one batch against 1,000 runs."""
    shape, X, Y, theta0 = _sde_problem()
    kw = {"lr": 0.05, "batch_size": 4, "n_steps": N_STEPS, "record_every": N_STEPS}

    def batched() -> None:
        sde.sgd_sde(theta0, shape, X, Y, **kw)

    def loop() -> None:
        for r in range(N_RUNS):
            sde.sgd_sde(theta0[r : r + 1], shape, X, Y, seed=r, **kw)

    report(f"Euler-Maruyama, {N_RUNS} trajectories x {N_STEPS} steps (batched vs loop)",
           best_time(batched), best_time(loop, repeat=1), "target >= 50x")


def bench_surrogates() -> None:
    """1,000 phase-randomized surrogates of a 4,096-point signal: vectorised against a loop."""
    x = np.random.default_rng(0).standard_normal(4096).cumsum()

    def vectorised() -> None:
        surrogates.phase_randomized_surrogates(x, 1000, seed=0)

    def loop() -> None:
        for s in range(1000):
            surrogates.phase_randomized_surrogates(x, 1, seed=s)

    fast = best_time(vectorised)
    report("1000 surrogates of 4096 points (vectorised vs loop)", fast, best_time(loop),
           f"target well under 1 s (got {fast:.3f} s)")


def bench_cascade_verdict() -> None:
    """One ``judge_cascade`` verdict on a planted λ = 2 cascade (64 runs, 1,024 points): the
    reader preset (99 deals, 40 injections) against the test alone (no power); then the DSI
    chapter's random-pair control at its sizes, with and without the detectable-jump ladder."""
    p = np.linspace(0, 1, 1024)
    C = cascades.planted_ensemble(p, 64, p_c=0.8, lam=2.0, first=0.4, n_levels=4, seed=0)

    def verdict() -> None:
        judge.judge_cascade(C, p, config.READER)

    def test_only() -> None:
        judge.judge_cascade(C, p, config.READER.replace(n_power=0))

    alone, full = best_time(test_only), best_time(verdict, repeat=1)
    report("cascade verdict, 64 runs x 1024 pts (test alone vs +power)", alone, full,
           f"reported, no target (full verdict {full:.1f} s)")

    # the DSI chapter's negative control with its detectable jump (the jump ladder)
    q = cascades.merged_fraction(256)
    R = cascades.asynchronous_runs(256, 64, seed=0) / 256
    cfg = config.READER.replace(n_power=20, sizes=())

    def with_ladder() -> None:
        judge.judge_cascade(R, q, cfg.replace(jump_ladder=config.JUMP_LADDER))

    plain, ladder = (best_time(lambda: judge.judge_cascade(R, q, cfg), repeat=1),
                     best_time(with_ladder, repeat=1))
    report("random-pair verdict, 64 runs x 256 pts (+power vs +detectable jump)", plain, ladder,
           f"reported, no target (with the ladder {ladder:.1f} s)")


def bench_null_threads() -> None:
    """The cascade test's permutation test (64 runs, 1,024 points, 99 deals, the reader preset)
    with its chunks scored on one thread per core against one thread: the same numbers, checked
    here (:mod:`flowlaws.common.threads`)."""
    p = np.linspace(0, 1, 1024)
    C = cascades.random_staircases(64, 1024, np.random.default_rng(0), "uniform")[0]
    grid = statistic.comb_grid(p)

    def run(n: str) -> tuple:
        with mock.patch.dict(os.environ, {threads.THREADS_ENV: n}):
            return statistic.permutation_test(C, grid, 99, np.random.default_rng(1))

    cores = str(threads.thread_count(4))
    assert run(cores)[0] == run("1")[0], "threads changed the p-value"
    report(f"permutation test, 99 deals ({cores} threads vs 1)", best_time(lambda: run(cores)),
           best_time(lambda: run("1")), "reported, no target (same p-value, checked)")


def main() -> None:
    torch_threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        bench_ensemble_em()
        bench_surrogates()
        bench_cascade_verdict()
        bench_null_threads()
    finally:
        torch.set_num_threads(torch_threads)


if __name__ == "__main__":
    main()
