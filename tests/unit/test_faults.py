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


# issue 27: no lost work, no diverged or corrupt state served as a result


def test_two_trainings_of_one_run_take_turns_and_lose_nothing(tmp_path):
    env = {**os.environ, "PYTHONPATH": LIB + os.pathsep + os.environ.get("PYTHONPATH", "")}
    script = f"FOLDER = {str(tmp_path)!r}\nCONFIG = {GROK_CONFIG!r}\n" + GROK
    procs = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(script)], env=env,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    errors = [p.communicate(timeout=300)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], errors
    cfg = GrokConfig(**GROK_CONFIG)
    with warnings.catch_warnings():
        warnings.simplefilter("error", GrokStoreWarning)
        again = training.train_grokking(cfg, cache_dir=tmp_path, progress=False)
    assert again.resumed_from == cfg.n_steps  # stored whole by one of them, loaded
    clean = training.train_grokking(cfg, cache_dir=tmp_path / "clean", progress=False)
    _same_run(clean, again)


def test_a_checkpoint_path_that_is_a_folder_is_refused_before_training(tmp_path):
    cfg = GrokConfig(**{**GROK_CONFIG, "n_steps": 4})
    folder = training.run_folder(cfg, "cpu", tmp_path)
    (folder / "checkpoint.pt").mkdir(parents=True)
    steps = []
    with pytest.raises(IsADirectoryError, match=rf"{folder / 'checkpoint.pt'} is a folder"):
        training.train_grokking(cfg, cache_dir=tmp_path, progress=False, callback=steps.append)
    assert steps == []


def test_a_finished_checkpoint_with_nan_parameters_is_named_corrupt_not_returned(tmp_path):
    cfg = GrokConfig(**{**GROK_CONFIG, "n_steps": 8})
    run = training.train_grokking(cfg, cache_dir=tmp_path, progress=False)
    newest = run.folder / "checkpoint.pt"
    ckpt = torch.load(newest, weights_only=True)
    ckpt["params"]["W_in"][0, 0, 0] = float("nan")
    torch.save(ckpt, newest)
    with pytest.warns(GrokStoreWarning, match=rf"{newest}.*corrupt.*W_in holds NaN") as record:
        again = training.train_grokking(cfg, cache_dir=tmp_path, progress=False)
    assert "learning rate" not in str(record[0].message)
    assert all(torch.isfinite(t).all() for t in again.params.values())
    _same_run(run, again)


def test_a_checkpoint_whose_version_is_not_an_integer_is_named(tmp_path):
    cfg = GrokConfig(**{**GROK_CONFIG, "n_steps": 8})
    run = training.train_grokking(cfg, cache_dir=tmp_path, progress=False)
    newest = run.folder / "checkpoint.pt"
    ckpt = torch.load(newest, weights_only=True)
    ckpt["training_code_version"] = "x"
    torch.save(ckpt, newest)
    with pytest.warns(GrokStoreWarning, match=rf"{newest} is corrupt.*'x', not an integer"):
        training.train_grokking(cfg, cache_dir=tmp_path, progress=False)


def test_params_of_a_shorter_n_steps_are_refused_not_the_longer_runs(tmp_path):
    long = training.train_grokking(GrokConfig(**{**GROK_CONFIG, "n_steps": 8}), cache_dir=tmp_path,
                          progress=False)
    short = training.train_grokking(GrokConfig(**{**GROK_CONFIG, "n_steps": 4}), cache_dir=tmp_path,
                           progress=False)
    assert short.steps[-1] == 4 and long.params_step == 8 and short.params_step == 4
    with pytest.raises(LookupError, match="parameters at step 4 are not stored.*step 8"):
        short.params["W_in"]
    with pytest.raises(LookupError):
        list(short.params)


def test_a_float64_run_that_blows_up_without_overflow_is_not_a_result(tmp_path):
    # lr 50 and no weight decay: finite, huge losses in float64 (1e12 in the probe)
    cfg = GrokConfig(**{**GROK_CONFIG, "lr": 50.0, "weight_decay": 0.0, "warmup": 0,
                        "n_steps": 20, "checkpoint_every": 10}, dtype="float64")
    with pytest.raises(training.GrokDivergenceError, match="above 100 times") as info:
        training.train_grokking(cfg, cache_dir=tmp_path, progress=False)
    ckpt = torch.load(training.run_folder(cfg, "cpu", tmp_path) / "checkpoint.pt",
                      weights_only=True)
    assert ckpt["step"] < info.value.step  # the diverged state was never saved


def test_adamw_decay_that_flips_the_weights_is_refused(tmp_path):
    cfg = GrokConfig(**{**GROK_CONFIG, "lr": 3.0, "weight_decay": 1.0})
    with pytest.raises(ValueError, match=r"cfg.lr · cfg.weight_decay = 3 ≥ 1.*flips the sign"):
        training.train_grokking(cfg, cache_dir=tmp_path, progress=False)
    assert not list(tmp_path.iterdir())  # refused before any folder
