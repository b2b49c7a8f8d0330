"""``make full``: run a chapter's full preset (or all) and store its result.

    python tools/full.py [--chapter 08_real_data] [--workers N] [--scheduler ADDRESS]
    python tools/full.py --smoke --out-dir DIR [--chapter ...]

Each preset of :data:`flowlaws.percolation.presets.PRESETS` is computed with its ``full``
parameters and written to ``book/02_percolation/stored/<chapter>_full.json``
(:func:`flowlaws.common.stored.write_stored`: the verdicts and their numbers, the parameters, the
code version, the device, the date, wall and CPU time). Its chunks of runs are cached as they
finish, so an interrupted run resumes where it stopped; ``--workers`` spreads them over a
``LocalCluster`` on this machine, ``--scheduler`` (or ``$FLOWLAWS_DASK_SCHEDULER``) over a
cluster. A preset that needs ``cuda`` is skipped without a GPU (``make gpu-check`` runs it).
``--smoke`` runs the same code path at the presets' smoke size into ``--out-dir`` (never into
the stored folder): the tests use it.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from flowlaws.percolation.full_run import STORED_DIR, run_full_preset, stored_path

__all__ = ["STORED_DIR", "stored_path", "main"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chapter", default="all", help="e.g. 08_real_data (default: all)")
    parser.add_argument("--smoke", action="store_true", help="smoke size, into --out-dir")
    parser.add_argument("--out-dir", type=Path, default=None)
    parser.add_argument("--workers", type=int, default=None,
                        help="a LocalCluster of this many processes (default: this process)")
    parser.add_argument("--scheduler", default=None, help="a Dask scheduler address")
    parser.add_argument("--cache-dir", type=Path, default=None,
                        help="chunk and run cache (default: the folder full-presets inside "
                             "$FLOWLAWS_CACHE or ~/.cache/flowlaws)")
    parser.add_argument("--gpu", action="store_true", help="also the presets that need cuda")
    args = parser.parse_args(argv)
    import torch

    from flowlaws.percolation.presets import PRESETS

    if args.smoke and (args.out_dir is None or args.out_dir.resolve() == STORED_DIR):
        parser.error("--smoke needs --out-dir, a folder other than the stored results")
    out_dir = args.out_dir or STORED_DIR
    chapters = list(PRESETS) if args.chapter == "all" else [args.chapter]
    unknown = [c for c in chapters if c not in PRESETS]
    if unknown:
        parser.error(f"no full preset for {unknown}; there are {sorted(PRESETS)}")
    cuda = torch.cuda.is_available()
    where = {"workers": args.workers, "scheduler": args.scheduler, "cache_dir": args.cache_dir}
    status = 0
    for chapter in chapters:
        needs_gpu = PRESETS[chapter].device == "cuda" and not args.smoke
        if needs_gpu and not (cuda and (args.gpu or args.chapter != "all")):
            print(f"{chapter}: needs a GPU ({'none here' if not cuda else 'pass --gpu'}); "
                  "skipped", file=sys.stderr)
            status = status or (2 if args.chapter != "all" else 0)
            continue
        record = run_full_preset(chapter, smoke=args.smoke, out_dir=out_dir, **where)
        print(f"{chapter}: {stored_path(chapter, out_dir)} ({record['wall_s']:.0f} s)")
        for name, v in record["verdicts"].items():
            print(f"  {name}: {v['summary']}")
    return status


if __name__ == "__main__":
    sys.exit(main())
