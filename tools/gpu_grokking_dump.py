"""The device half of the grokking full preset: train Nanda et al.'s setting on ``cuda`` within
a budget and write the run's records (no verdicts) for the analysis that runs here.

A device machine has PyTorch but not the book's environment (no papermill, no dask), and what
comes back from it is limited to a few small files. So the expensive part, training the
64-run ensemble, runs there (``python3 tools/gpu_grokking_dump.py --out DIR --budget S``) and
writes ``grokking_full_gpu.npz`` (steps, accuracies, losses, weight-space C_max at the
chapter's tolerance, the frequency C_max of every record) and ``grokking_full_gpu_meta.json``
(configuration, steps reached, device, versions, date, wall and CPU time). The verdicts are
computed from those records by ``tools/gpu_check.py --from-dump DIR`` with the book's own code,
so a later change of the cascade test re-judges the stored run without training it again.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "lib"))

FULL = {"n_runs": 64, "n_steps": 15_000, "log_every": 50, "checkpoint_every": 1000}
SHARE, TOL = 0.5, 0.05  # the chapter's neuron-share threshold and weight-space tolerance


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for the two files")
    parser.add_argument("--budget", type=float, default=300.0, help="seconds of training")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--smoke", action="store_true", help="a tiny run (tests, CPU)")
    args = parser.parse_args(argv)

    import torch

    from flowlaws.percolation.grokking.fourier import frequency_cmax
    from flowlaws.percolation.grokking.model import GrokConfig
    from flowlaws.percolation.grokking.training import train_grokking

    kw = ({"p": 11, "d_model": 16, "n_heads": 2, "d_mlp": 16, "n_runs": 4, "n_steps": 200,
           "log_every": 2, "checkpoint_every": 100} if args.smoke else FULL)
    final = GrokConfig(**kw)
    cache = Path(os.environ.get("FLOWLAWS_GPU_CHECK_CACHE", "/tmp/flowlaws-gpu-cache"))
    t0, c0 = time.perf_counter(), time.process_time()
    run, per_chunk = None, 0.0
    for target in range(final.checkpoint_every, final.n_steps + 1, final.checkpoint_every):
        if run is not None and time.perf_counter() - t0 + 1.5 * per_chunk > args.budget:
            break
        tc = time.perf_counter()
        run = train_grokking(GrokConfig(**{**kw, "n_steps": target}), device=args.device,
                             cache_dir=cache, progress=False)
        per_chunk = max(per_chunk, time.perf_counter() - tc)
        print(f"step {target}: {time.perf_counter() - t0:.0f} s", flush=True)
    tol_column = list(final.tols).index(TOL) if TOL in final.tols else 0
    args.out.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(
        args.out / "grokking_full_gpu.npz", steps=run.steps, train_acc=run.train_acc,
        test_acc=run.test_acc, train_loss=run.train_loss, test_loss=run.test_loss,
        weight_cmax=run.c_max[:, :, tol_column], frequency_cmax=frequency_cmax(run.freqs, SHARE))
    meta = {"config": {**kw, "n_steps": int(run.steps[-1])}, "planned_steps": final.n_steps,
            "finished": bool(run.steps[-1] >= final.n_steps), "share": SHARE, "tol": TOL,
            "device": (torch.cuda.get_device_name(0) if args.device == "cuda"
                       else platform.processor() or platform.machine()),
            "device_type": args.device, "commit": os.environ.get("FLOWLAWS_COMMIT", "unknown"),
            "python": platform.python_version(), "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "wall_seconds": round(time.perf_counter() - t0, 1),
            "cpu_seconds": round(time.process_time() - c0, 1),
            "seconds_per_step": run.seconds_per_step}
    (args.out / "grokking_full_gpu_meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    print(json.dumps(meta))
    return 0


if __name__ == "__main__":
    sys.exit(main())
