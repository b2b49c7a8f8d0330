"""flowlaws.common.chunks: chunked sweeps give one process's result, on two Dask workers too,
and an interrupted sweep resumes without recomputing the chunks it finished."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from flowlaws.common.chunks import (
    SCHEDULER_ENV,
    chunk_stem,
    concat_runs,
    run_chunked,
    run_seeds,
    split_seeds,
)
from flowlaws.percolation.dynamics.seeded import data_ensemble_chunk, teacher_ensemble_chunk

TINY = {"data": "heart", "width": 4, "n_steps": 30, "record_every": 3}


def test_run_seeds_are_prefix_stable_distinct_and_checked():
    assert run_seeds(3, 40)[:8] == run_seeds(3, 8)
    assert len(set(run_seeds(3, 40))) == 40
    assert not set(run_seeds(3, 40)) & set(run_seeds(4, 40))
    with pytest.raises(ValueError, match="n_runs"):
        run_seeds(0, 0)
    with pytest.raises(ValueError, match="chunk_size"):
        split_seeds([1, 2], 0)
    assert split_seeds([1, 2, 3, 4, 5], 2) == [[1, 2], [3, 4], [5]]


def test_runs_do_not_depend_on_the_chunking(tmp_path):
    seeds = run_seeds(0, 6)
    one = data_ensemble_chunk(seeds, **TINY)
    chunks, report = run_chunked(data_ensemble_chunk, seeds, TINY, chunk_size=4,
                                 cache_dir=tmp_path)
    joined = concat_runs(chunks)
    assert report.n_chunks == 2 and report.computed == 2 and report.where == "this process"
    assert np.array_equal(joined["C"], one["C"], equal_nan=True)  # bit for bit
    assert np.array_equal(joined["acc"], one["acc"])
    assert np.array_equal(joined["steps"], one["steps"])
    other = teacher_ensemble_chunk(seeds[2:4], n_steps=20, record_every=2)
    assert np.array_equal(teacher_ensemble_chunk(seeds[:4], n_steps=20, record_every=2)["C"][2:],
                          other["C"], equal_nan=True)


def test_two_worker_local_cluster_gives_the_single_process_result_bit_for_bit(tmp_path):
    from dask.distributed import Client, LocalCluster

    seeds = run_seeds(1, 8)
    local, _ = run_chunked(data_ensemble_chunk, seeds, TINY, chunk_size=2,
                           cache_dir=tmp_path / "here")
    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        spread, report = run_chunked(data_ensemble_chunk, seeds, TINY, chunk_size=2,
                                     client=client, cache_dir=tmp_path / "there")
        pids = set(client.run(os.getpid).values())
    assert report.computed == 4 and "client" in report.where
    assert len(pids) == 2 and os.getpid() not in pids
    a, b = concat_runs(local), concat_runs(spread)
    for key in ("C", "acc", "steps"):
        assert np.array_equal(a[key], b[key], equal_nan=True), key


def test_scheduler_address_comes_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv(SCHEDULER_ENV, "tcp://127.0.0.1:9")  # nothing listens there
    with pytest.raises(OSError):
        run_chunked(data_ensemble_chunk, [1, 2], TINY, chunk_size=1, cache_dir=tmp_path)


CALLS: list[list[int]] = []


def counted(seeds: list[int], *, power: int) -> dict:
    """A chunk that records its calls and stops the sweep at the seed 13."""
    CALLS.append(list(seeds))
    if 13 in seeds and os.environ.get("CHUNK_TEST_STOP"):
        raise KeyboardInterrupt("interrupted")
    return {"y": np.asarray(seeds, dtype=float) ** power, "steps": np.arange(3)}


def test_an_interrupted_sweep_resumes_without_recomputing(monkeypatch, tmp_path):
    seeds = list(range(10, 20))
    monkeypatch.setenv("CHUNK_TEST_STOP", "1")
    CALLS.clear()
    with pytest.raises(KeyboardInterrupt):
        run_chunked(counted, seeds, {"power": 2}, chunk_size=2, cache_dir=tmp_path)
    assert CALLS == [[10, 11], [12, 13]]
    monkeypatch.delenv("CHUNK_TEST_STOP")
    CALLS.clear()
    chunks, report = run_chunked(counted, seeds, {"power": 2}, chunk_size=2, cache_dir=tmp_path)
    assert CALLS == [[12, 13], [14, 15], [16, 17], [18, 19]]
    assert (report.loaded, report.computed) == (1, 4)
    assert np.array_equal(concat_runs(chunks)["y"], np.arange(10, 20.0) ** 2)
    CALLS.clear()
    run_chunked(counted, seeds, {"power": 3}, chunk_size=2, cache_dir=tmp_path)
    assert len(CALLS) == 5  # other parameters: another key


SCRIPT = """
import sys, time
from flowlaws.common.chunks import run_chunked

def slow(seeds, *, tag):
    with open(sys.argv[2], "a") as log:
        log.write(f"{seeds[0]}\\n")
    time.sleep(0.4)
    return {"y": [s * 2 for s in seeds]}

if __name__ == "__main__":
    chunks, report = run_chunked(slow, list(range(8)), {"tag": "t"}, chunk_size=1,
                                 cache_dir=sys.argv[1])
    print(report.loaded, report.computed, sum(c["y"][0] for c in chunks))
"""


def test_a_killed_sweep_resumes_where_it_stopped(tmp_path):
    script, log, cache = tmp_path / "sweep.py", tmp_path / "log", tmp_path / "cache"
    script.write_text(textwrap.dedent(SCRIPT))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen([sys.executable, str(script), str(cache), str(log)], env=env)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(list(cache.glob("chunk-slow-*.pt"))) < 3:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    finished = len(list(cache.glob("chunk-slow-*.pt")))
    assert 3 <= finished < 8
    done = subprocess.run([sys.executable, str(script), str(cache), str(log)], env=env,
                          capture_output=True, text=True, check=True)
    loaded, computed, total = map(int, done.stdout.split())
    assert (loaded, computed, total) == (finished, 8 - finished, 56)
    started = [int(x) for x in log.read_text().split()]
    assert sorted(set(started)) == list(range(8))
    assert len(started) <= 9  # at most the chunk running at the kill is computed twice


def test_concat_runs_refuses_chunks_that_disagree_on_shared_values():
    with pytest.raises(ValueError, match="steps"):
        concat_runs([{"steps": np.arange(3)}, {"steps": np.arange(4)}])
    assert concat_runs([[1], [2, 3]]) == [1, 2, 3]
    assert chunk_stem(counted, [1], {"power": 2}) != chunk_stem(counted, [2], {"power": 2})
