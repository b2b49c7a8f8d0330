"""``make gpu-check``: on a CUDA machine, the unit tests, every notebook at smoke size on ``cuda``,
then the grokking chapter's full preset (Nanda et al.'s setting, 64 runs) and any other full
preset of :data:`flowlaws.percolation.presets.PRESETS` declared to need a GPU (none is now:
II.6's Adam and AdamW fit a CPU) within a time budget.
The results go to a small JSON file (device, date, command, versions, the runs' records and
verdicts) that book/02_percolation/07_grokking.ipynb reads and labels as a stored run.

    python tools/gpu_check.py [--out PATH] [--budget SECONDS]
    python tools/gpu_check.py --cpu-smoke --out PATH

Without CUDA it refuses (exit status 2) unless ``--cpu-smoke``, which runs the same path on the
CPU at tiny size: one unit-test file, the notebooks' smoke overrides checked (none executed), a
tiny grokking ensemble judged with few deals; the unit tests run this in seconds. The full
preset trains in chunks of ``checkpoint_every`` steps into the run's checkpoint folder and stops
when the budget is spent; a second call resumes it, and the file says how far it got. The other
GPU presets run in chunks of runs cached as they finish (:mod:`flowlaws.common.chunks`), each
written to ``book/02_percolation/stored/<chapter>_full.json`` once complete; a call that runs out
of budget says how many chunks are done, and the next resumes.
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
    then judge its records (:func:`analyse_records`)."""
    import torch

    from flowlaws.percolation.grokking.fourier import frequency_cmax
    from flowlaws.percolation.grokking.model import GrokConfig
    from flowlaws.percolation.grokking.training import train_grokking

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
    column = list(final.tols).index(TOL) if TOL in final.tols else 0
    records = {"steps": run.steps, "train_acc": run.train_acc, "test_acc": run.test_acc,
               "weight_cmax": run.c_max[:, :, column],
               "frequency_cmax": frequency_cmax(run.freqs, SHARE)}
    meta = {"config": {**kw, "n_steps": int(run.steps[-1])}, "planned_steps": final.n_steps,
            "device": str(torch.device(device)), "seconds_per_step": run.seconds_per_step}
    return analyse_records(records, meta, cpu_smoke, started=t0)


def analyse_records(records: dict, meta: dict, cpu_smoke: bool,
                    started: float | None = None) -> dict:
    """The delay, both order parameters and the cascade verdicts (raw and aligned steps) of a
    trained grokking ensemble's records (``steps`` ``(T,)``; ``train_acc``, ``test_acc``,
    ``weight_cmax``, ``frequency_cmax`` ``(T, R)``), judged by the book's cascade test at the
    FULL configuration (SMOKE at ``--cpu-smoke``) and the seed's λ = 2.11."""
    from flowlaws.percolation.cascade.config import FULL as FULL_TEST
    from flowlaws.percolation.cascade.config import SMOKE as SMOKE_TEST
    from flowlaws.percolation.grokking.analysis import align_to_grok, delay_summary, judge_series

    t0 = time.perf_counter() if started is None else started
    steps = np.asarray(records["steps"])
    delay = delay_summary(steps, np.asarray(records["train_acc"]),
                          np.asarray(records["test_acc"]))
    orders = {"frequency": np.asarray(records["frequency_cmax"], float),
              "weight": np.asarray(records["weight_cmax"], float)}
    series, p_c = {}, {}
    last = np.nanmax(delay.grokked) if delay.n_grokked else steps[-1]
    for name, C in orders.items():
        window = steps <= last
        series[f"{name}, raw step"] = (C[window].T, steps[window].astype(float))
        if delay.n_grokked >= 2:
            lags, aligned, _ = align_to_grok(steps, C, delay.grokked,
                                             before=np.nanmin(delay.grokked))
            if len(aligned) >= 2 and len(lags) >= 80:
                series[f"{name}, aligned"] = (aligned, lags)
                p_c[f"{name}, aligned"] = (0.0, float(steps[1] - steps[0]))
    config = (SMOKE_TEST.replace(n_power=0, n_surrogates=19) if cpu_smoke
              else FULL_TEST.replace(n_surrogates=200)).replace(lam_claimed=LAM)
    rows = judge_series(series, config, p_c=p_c)
    keep = ("name", "p_value", "power", "lam", "lam_err", "surrogate_p", "holm",
            "runs_needed", "n_runs", "n_points")
    verdicts = [{**{k: r.get(k) for k in keep},
                 "verdict": getattr(r.get("verdict"), "verdict", "inconclusive"),
                 "summary": (str(r["verdict"]) if hasattr(r.get("verdict"), "verdict")
                             else f"inconclusive: {r.get('reason') or 'not judged'}")}
                for r in rows]
    return _step("full grokking preset", t0, config=meta["config"],
                 planned_steps=meta["planned_steps"],
                 finished=bool(steps[-1] >= meta["planned_steps"]), device=meta["device"],
                 seconds_per_step=meta["seconds_per_step"], delay=delay.line(),
                 steps=steps.tolist(), memorised=delay.memorised.tolist(),
                 grokked=delay.grokked.tolist(),
                 mean_test_acc=np.round(np.asarray(records["test_acc"]).mean(1), 4).tolist(),
                 mean_train_acc=np.round(np.asarray(records["train_acc"]).mean(1), 4).tolist(),
                 c_max={k: np.round(v, 3).tolist() for k, v in orders.items()},
                 verdicts=verdicts)


def from_dump(folder: Path, out: Path) -> int:
    """Judge the records a device machine wrote (``tools/gpu_grokking_dump.py``) and write the
    stored results file the chapter reads, labelled with the run's device, date and time."""
    records = dict(np.load(folder / "grokking_full_gpu.npz"))
    meta = json.loads((folder / "grokking_full_gpu_meta.json").read_text())
    step = analyse_records(records, meta, cpu_smoke=False)
    result = {"device": meta["device"], "device_type": meta["device_type"], "date": meta["date"],
              "command": "python3 tools/gpu_grokking_dump.py --out DIR --budget 215 --device "
                         "cuda; then python tools/gpu_check.py --from-dump DIR",
              "cpu_smoke": False,
              "versions": {k: meta[k] for k in ("python", "torch", "cuda", "commit")},
              "seconds": meta["wall_seconds"], "cpu_seconds": meta["cpu_seconds"],
              "steps": [step]}
    out.write_text(json.dumps(result, indent=1, allow_nan=True) + "\n")
    print(f"judged the stored GPU run ({meta['config']['n_steps']} of {meta['planned_steps']} "
          f"steps): {step['delay']}; results in {out}")
    return 0


def gpu_presets(cpu_smoke: bool, device: str, budget: float, out_dir: Path) -> dict:
    """The full presets declared to need ``cuda`` (:data:`flowlaws.percolation.presets.PRESETS`;
    none is now), each until done or the budget is spent: their
    chunks of runs are cached as they finish (``$FLOWLAWS_GPU_CHECK_CACHE`` or the full presets'
    cache), so the next call resumes them; a finished preset is written to
    ``out_dir/<chapter>_full.json``
    (:func:`flowlaws.percolation.full_run.run_full_preset`). At ``--cpu-smoke`` the same path
    runs the presets' smoke sizes on the CPU."""
    from flowlaws.common.chunks import ChunksUnfinishedError
    from flowlaws.percolation.full_run import run_full_preset
    from flowlaws.percolation.presets import PRESETS

    t0 = time.perf_counter()
    cache = os.environ.get("FLOWLAWS_GPU_CHECK_CACHE") or None
    done, unfinished = {}, {}
    for chapter, p in PRESETS.items():
        if p.device != "cuda":
            continue
        left = budget - (time.perf_counter() - t0)
        try:
            record = run_full_preset(chapter, smoke=cpu_smoke, out_dir=out_dir, device=device,
                                     cache_dir=cache, deadline=time.monotonic() + max(left, 0.0))
            done[chapter] = {n: v["summary"] for n, v in record["verdicts"].items()}
        except ChunksUnfinishedError as stopped:
            unfinished[chapter] = f"{stopped.done} of {stopped.total} chunks (call again)"
    return _step("full presets that need a GPU", t0, finished=done, unfinished=unfinished,
                 out_dir=str(out_dir))


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
    parser.add_argument("--from-dump", type=Path, default=None,
                        help="judge the records tools/gpu_grokking_dump.py wrote in this folder "
                             "(no CUDA needed) and write the stored results file")
    args = parser.parse_args(argv)
    if args.from_dump is not None:
        return from_dump(args.from_dump, args.out or STORED)
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
                             budget=0.6 * (args.budget - (time.perf_counter() - t0))))
    steps.append(gpu_presets(args.cpu_smoke, name if device == "cuda" else "cpu",
                             budget=args.budget - (time.perf_counter() - t0),
                             out_dir=out.parent if args.cpu_smoke else STORED.parent))
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
