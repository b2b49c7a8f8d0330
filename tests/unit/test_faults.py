"""Fault test: kill a cached sweep and a checkpointed grokking run (SIGKILL, in a subprocess)
at random points and in the middle of a write, corrupt the newest file, and check that the
rerun finishes with the same result as an uninterrupted run (issue 16).

Small sizes: the whole file runs in well under a minute on two cores.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

import flowlaws
from flowlaws.book.cache import CacheWarning, cached_call
from flowlaws.percolation.grokking import training
from flowlaws.percolation.grokking.checkpoints import GrokStoreWarning
from flowlaws.percolation.grokking.training import GrokConfig
from flowlaws.percolation.toys.quartic import quartic_collapse

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")

LIB = str(Path(flowlaws.__file__).resolve().parents[1])

SLOW_WRITE = """
import torch
_real_save = torch.save
def _slow_save(obj, f, *a, **k):  # half a file on disk, then a pause to be killed in
    import io
    buf = io.BytesIO()
    _real_save(obj, buf, *a, **k)
    data = buf.getvalue()
    f.write(data[: len(data) // 2])
    f.flush()
    print("WRITING", flush=True)
    time.sleep(60)
    f.write(data[len(data) // 2 :])
torch.save = _slow_save
"""

SWEEP = """
from flowlaws.book.cache import cached_call
from flowlaws.percolation.toys.quartic import quartic_collapse
for T in T_FINALS:
    cached_call(quartic_collapse, ZETAS, t_final=T, dt=0.01, n_runs=40, seed=3,
                cache_dir=FOLDER)
"""

GROK = """
from flowlaws.percolation.grokking import training
training.train_grokking(training.GrokConfig(**CONFIG), cache_dir=FOLDER, progress=False)
"""

ZETAS, T_FINALS = [1.0, 1.5, 2.0], [2.0, 3.0, 4.0, 5.0, 6.0]
GROK_CONFIG = {"p": 7, "fraction": 0.5, "d_model": 8, "n_heads": 2, "d_mlp": 12, "n_runs": 2,
               "lr": 3e-3, "log_every": 2, "checkpoint_every": 4, "n_steps": 40}


def _kill_run(body: str, folder: Path, *, mid_write: bool, delay: float, **values) -> None:
    """Run ``body`` in a fresh interpreter and SIGKILL it: at ``delay`` seconds after its
    imports, or (``mid_write``) while a file is half written."""
    head = f"import time\nFOLDER = {str(folder)!r}\n" + "".join(
        f"{k} = {v!r}\n" for k, v in values.items())
    script = head + (SLOW_WRITE if mid_write else "") + 'print("READY", flush=True)\n' + body
    env = {**os.environ, "PYTHONPATH": LIB + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(script)], env=env,
                            stdout=subprocess.PIPE, text=True)
    try:
        wanted = "WRITING" if mid_write else "READY"
        for line in proc.stdout:
            if line.strip() == wanted:
                break
        if not mid_write:
            time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait(timeout=30)


def _sweep(folder: Path) -> list:
    return [cached_call(quartic_collapse, ZETAS, t_final=T, dt=0.01, n_runs=40, seed=3,
                        cache_dir=folder) for T in T_FINALS]


def _newest(folder: Path, pattern: str) -> Path:
    return max(folder.rglob(pattern), key=lambda p: p.stat().st_mtime_ns)


def test_a_killed_cached_sweep_reruns_to_the_uninterrupted_result(tmp_path):
    rng = random.Random(16)
    clean = _sweep(tmp_path / "clean")
    folder = tmp_path / "killed"
    values = {"ZETAS": ZETAS, "T_FINALS": T_FINALS}
    _kill_run(SWEEP, folder, mid_write=True, delay=0, **values)
    assert list(folder.glob("*.partial")), "the kill did not land in a write"
    for _ in range(2):
        _kill_run(SWEEP, folder, mid_write=False, delay=rng.uniform(0.0, 1.5), **values)
    rerun = _sweep(folder)
    for a, b in zip(clean, rerun, strict=True):
        np.testing.assert_array_equal(a, b)
    _newest(folder, "*.pt").write_bytes(b"\x80\x02 half a file")  # the newest entry corrupt
    with pytest.warns(CacheWarning, match="could not be read"):
        again = _sweep(folder)
    for a, b in zip(clean, again, strict=True):
        np.testing.assert_array_equal(a, b)


def test_a_killed_grokking_run_resumes_to_the_uninterrupted_result(tmp_path):
    rng = random.Random(7)
    cfg = GrokConfig(**GROK_CONFIG)
    clean = training.train_grokking(cfg, cache_dir=tmp_path / "clean", progress=False)
    folder = tmp_path / "killed"
    _kill_run(GROK, folder, mid_write=False, delay=rng.uniform(0.3, 1.0), CONFIG=GROK_CONFIG)
    _kill_run(GROK, folder, mid_write=True, delay=0, CONFIG=GROK_CONFIG)
    run_folder = training.run_folder(cfg, "cpu", folder)
    assert list(run_folder.glob("*.partial")), "the kill did not land in a write"
    _kill_run(GROK, folder, mid_write=False, delay=rng.uniform(0.0, 1.0), CONFIG=GROK_CONFIG)
    with warnings.catch_warnings():
        warnings.simplefilter("error", GrokStoreWarning)  # nothing unreadable after kills
        resumed = training.train_grokking(cfg, cache_dir=folder, progress=False)
    _same_run(clean, resumed)
    _newest(run_folder, "checkpoint*.pt").write_bytes(b"PK\x03\x04 broken")  # corrupt newest
    with pytest.warns(GrokStoreWarning, match="could not be read.*previous checkpoint is used"):
        again = training.train_grokking(cfg, cache_dir=folder, progress=False)
    assert again.resumed_from < cfg.n_steps
    _same_run(clean, again)


def _same_run(a, b) -> None:
    for k in a.params:
        assert torch.equal(a.params[k], b.params[k]), k
    np.testing.assert_array_equal(a.steps, b.steps)
    for name in training.METRICS:
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
