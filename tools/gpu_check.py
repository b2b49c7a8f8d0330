"""``make gpu-check``: on a CUDA machine, the unit tests, every notebook at smoke size on ``cuda``,
then the grokking chapter's full preset (Nanda et al.'s setting, 64 runs) within a time budget.
The results go to a small JSON file (device, date, command, versions, the runs' records and
verdicts) that book/02_percolation/07_grokking.ipynb reads and labels as a stored run.

    python tools/gpu_check.py [--out PATH] [--budget SECONDS]
    python tools/gpu_check.py --cpu-smoke --out PATH

Without CUDA it refuses (exit status 2) unless ``--cpu-smoke``, which runs the same path on the
CPU at tiny size: one unit-test file, the notebooks' smoke overrides checked (none executed), a
tiny grokking ensemble judged with few deals; the unit tests run this in seconds. The full
preset trains in chunks of ``checkpoint_every`` steps into the run's checkpoint folder and stops
when the budget is spent; a second call resumes it, and the file says how far it got.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
STORED = ROOT / "book" / "02_percolation" / "stored" / "grokking_full_gpu.json"
FULL = {"n_runs": 64, "n_steps": 15_000, "log_every": 50, "checkpoint_every": 1000}
TINY = {"p": 11, "fraction": 0.4, "d_model": 16, "n_heads": 2, "d_mlp": 16, "lr": 1e-2,
        "n_runs": 4, "n_steps": 200, "log_every": 2, "checkpoint_every": 100}
SHARE, TOL, LAM = 0.5, 0.05, 2.11  # the chapter's fixed tolerances and the seed's λ


def _step(name: str, started: float, **fields) -> dict:
    return {"step": name, "seconds": round(time.perf_counter() - started, 1), **fields}


def unit_tests(cpu_smoke: bool, timeout: float) -> dict:
    """``pytest tests/unit`` (one file at ``--cpu-smoke``), with its exit status and last lines."""
    t0 = time.perf_counter()
    target = ("tests/unit/percolation/grokking/test_fourier.py" if cpu_smoke else "tests/unit")
    cmd = [sys.executable, "-m", "pytest", target, "-q", "-x", "-p", "no:cacheprovider",
           *([] if cpu_smoke else ["-n", str(min(8, os.cpu_count() or 1))])]  # pytest-xdist
    try:
        done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
        rc, tail = done.returncode, (done.stdout + done.stderr).strip().splitlines()[-3:]
    except subprocess.TimeoutExpired:
        rc, tail = None, [f"stopped after {timeout:.0f} s"]
    return _step("unit tests", t0, command=shlex.join(cmd[1:]), returncode=rc, tail=tail)


def notebooks(cpu_smoke: bool, device: str, timeout: float) -> dict:
    """Every notebook of ``_toc.yml`` at smoke size with ``device`` forced where the parameters
    cell has one (papermill, two at a time); at ``--cpu-smoke`` only the overrides are
    checked."""
    t0 = time.perf_counter()
    sys.path.insert(0, str(ROOT / "tests" / "book"))
    import nbformat
    from _harness import checked_overrides, execute_smoke, parameters_cell, toc_notebooks

    plans = {}
    for path in toc_notebooks():
        checked_overrides(path)  # a smoke override the notebook does not have fails here
        has_device = "device" in parameters_cell(nbformat.read(ROOT / path, 4), path)
        plans[path] = {"device": device} if has_device else {}
    if cpu_smoke:
        return _step("notebooks at smoke size", t0, device=device, executed=0,
                     checked=len(plans), failed=[])
    from flowlaws.book.progress import STATIC_BUILD_ENV

    out = Path(tempfile.mkdtemp(prefix="gpu-check-"))
    saved = {k: os.environ.get(k) for k in ("FLOWLAWS_CACHE", STATIC_BUILD_ENV)}
    # the kernels inherit these: smoke caches in a throw-away folder, no live widgets
    os.environ["FLOWLAWS_CACHE"], os.environ[STATIC_BUILD_ENV] = str(out / "cache"), "1"

    def run(item: tuple[str, dict]) -> str | None:
        path, extra = item
        try:
            execute_smoke(path, out / Path(path).name, int(timeout), extra=extra)
            return None
        except Exception as error:  # noqa: BLE001 - every failure is listed, none stops the rest
            return f"{path}: {type(error).__name__}: {str(error).splitlines()[-1:]}"

    try:
        with ThreadPoolExecutor(max_workers=2) as pool:
            failed = [f for f in pool.map(run, plans.items()) if f]
    finally:  # the full preset trains into the reader's cache, where a rerun resumes it
        for k, v in saved.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
    return _step("notebooks at smoke size", t0, device=device, executed=len(plans),
                 checked=len(plans), failed=failed)


def full_preset(cpu_smoke: bool, device: str, budget: float) -> dict:
    """Train the full preset (``TINY`` at ``--cpu-smoke``) until done or the budget is spent,
    then its delay, both order parameters, and the verdicts for raw and aligned steps."""
    import torch

    from flowlaws.percolation.cascade.config import CascadeConfig
    from flowlaws.percolation.grokking.analysis import align_to_grok, delay_summary, judge_series
    from flowlaws.percolation.grokking.fourier import frequency_cmax
    from flowlaws.percolation.grokking.training import GrokConfig, train_grokking

    t0 = time.perf_counter()
    kw = TINY if cpu_smoke else FULL
    final = GrokConfig(**kw)
    cache = os.environ.get("FLOWLAWS_GPU_CHECK_CACHE") or None
    run, per_chunk = None, 0.0
    for target in range(final.checkpoint_every, final.n_steps + 1, final.checkpoint_every):
        if run is not None and time.perf_counter() - t0 + 1.5 * per_chunk > budget:
            break
        tc = time.perf_counter()
        run = train_grokking(GrokConfig(**{**kw, "n_steps": target}), device=device,
                             cache_dir=cache, progress=False)
        per_chunk = max(per_chunk, time.perf_counter() - tc) if run.resumed_from < target else 0
    steps = run.steps
    delay = delay_summary(steps, run.train_acc, run.test_acc)
    orders = {"frequency": frequency_cmax(run.freqs, SHARE),
              "weight": run.c_max[:, :, list(final.tols).index(TOL)] if TOL in final.tols
              else run.c_max[:, :, 0]}
    series = {}
    last = np.nanmax(delay.grokked) if delay.n_grokked else steps[-1]
    for name, C in orders.items():
        window = steps <= last
        series[f"{name}, raw step"] = (C[window].T, steps[window].astype(float))
        if delay.n_grokked >= 2:
            lags, aligned, _ = align_to_grok(steps, C, delay.grokked,
                                             before=np.nanmin(delay.grokked))
            if len(aligned) >= 2 and len(lags) >= 80:
                series[f"{name}, aligned"] = (aligned, lags)
    config = (CascadeConfig(n_null=19, n_power=0, n_boot=20, sizes=(), n_surrogates=19)
              if cpu_smoke else CascadeConfig(n_null=199, n_power=50, n_boot=100,
                                              sizes=(128, 256), n_surrogates=200))
    aligned_pc = {name: (0.0, float(final.log_every)) for name in series
                  if name.endswith("aligned")}  # each run's grokking step, as in II.7
    rows = judge_series(series, config.replace(lam_claimed=LAM), p_c=aligned_pc)
    keep = ("name", "verdict", "p_value", "power", "lam", "lam_err", "surrogate_p", "holm",
            "runs_needed", "n_runs", "n_points", "summary")
    return _step("full grokking preset", t0, config={**kw, "n_steps": int(steps[-1])},
                 planned_steps=final.n_steps, finished=bool(steps[-1] >= final.n_steps),
                 device=str(torch.device(device)), seconds_per_step=run.seconds_per_step,
                 delay=delay.line(), steps=steps.tolist(),
                 memorised=delay.memorised.tolist(), grokked=delay.grokked.tolist(),
                 mean_test_acc=np.round(run.test_acc.mean(1), 4).tolist(),
                 mean_train_acc=np.round(run.train_acc.mean(1), 4).tolist(),
                 c_max={k: np.round(v, 3).tolist() for k, v in orders.items()},
                 verdicts=[{k: r.get(k) for k in keep} for r in rows])


def versions() -> dict:
    import torch

    import flowlaws

    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    return {"python": platform.python_version(), "torch": torch.__version__,
            "cuda": torch.version.cuda, "flowlaws": flowlaws.__version__, "commit": commit}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cpu-smoke", action="store_true",
                        help="run the same path on the CPU at tiny size (no CUDA needed)")
    parser.add_argument("--out", type=Path, default=None,
                        help=f"results file (default {STORED.relative_to(ROOT)}; required with "
                             "--cpu-smoke, which never writes the stored results)")
    parser.add_argument("--budget", type=float, default=470.0,
                        help="seconds for the whole check (default 470, under 8 minutes)")
    args = parser.parse_args(argv)
    import torch

    if args.cpu_smoke:
        if args.out is None or args.out.resolve() == STORED:
            parser.error("--cpu-smoke needs --out, a path other than the stored results")
        device, name = "cpu", platform.processor() or platform.machine()
    elif not torch.cuda.is_available():
        print("gpu-check: no CUDA device here (torch.cuda.is_available() is False); nothing was "
              "run. Run it on a machine with a GPU, or test this script's CPU path with "
              "`python tools/gpu_check.py --cpu-smoke --out /tmp/gpu-check.json`.",
              file=sys.stderr)
        return 2
    else:
        device, name = "cuda", torch.cuda.get_device_name(0)
    t0 = time.perf_counter()
    out = args.out or STORED
    steps = [unit_tests(args.cpu_smoke, timeout=max(120.0, 0.3 * args.budget))]
    steps.append(notebooks(args.cpu_smoke, device, timeout=120))
    steps.append(full_preset(args.cpu_smoke, device,
                             budget=args.budget - (time.perf_counter() - t0)))
    result = {"device": name, "device_type": device,
              "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
              "command": shlex.join(["python", "tools/gpu_check.py", *(argv or sys.argv[1:])]),
              "cpu_smoke": args.cpu_smoke, "versions": versions(),
              "seconds": round(time.perf_counter() - t0, 1), "steps": steps}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1, allow_nan=True) + "\n")
    ok = steps[0]["returncode"] == 0 and not steps[1]["failed"]
    print(f"gpu-check on {name}: {'passed' if ok else 'FAILED'} in {result['seconds']:.0f} s; "
          f"{steps[2]['delay']}; results in {out}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
