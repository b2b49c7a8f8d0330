"""Part II's full presets: the sizes that decide a chapter's claims, and how each is computed.

A :class:`FullPreset` names a chapter, the computation (``compute(params, **where)`` →
``(verdicts, numbers)``), its ``full`` parameters and a ``smoke`` size that runs the same code
path in seconds (the tests), the modules whose code decides the result (their hash is the
stored file's code version, :mod:`flowlaws.common.stored`), and the device it needs. ``make full``
(``tools/full.py``) runs one or all of them and writes
``book/02_percolation/stored/<chapter>_full.json``; ``make gpu-check`` runs those that need
``cuda``. The ensembles run seeded run by run and chunked over Dask
(:mod:`flowlaws.common.chunks`), so a full preset resumes after an interruption and spreads
over a cluster (``where``: ``workers``, ``scheduler``, ``cache_dir``, ``progress``).

To add one: write ``compute`` as a function of ``params`` that calls the chapter's own
library functions, give ``smoke`` values that run in seconds, list the modules it runs, and
add it to :data:`PRESETS` (CONTRIBUTING.md, "A full preset").

Explained in: book/02_percolation/08_real_data.ipynb.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from flowlaws.common.chunks import concat_runs, run_chunked, run_seeds
from flowlaws.percolation.cascade.config import READER, SMOKE, CascadeConfig
from flowlaws.percolation.cascade.judge import judge_cascade
from flowlaws.percolation.cascade.search import (
    SGD_SEARCH,
    SMOKE_SEARCH,
    run_search,
    search_text,
)
from flowlaws.percolation.cascade.stats import holm
from flowlaws.percolation.dynamics.seeded import data_ensemble_chunk, teacher_ensemble_chunk

__all__ = ["FullPreset", "PRESETS", "preset", "real_data", "sgd_search", "adaptive_cascade",
           "VERDICT_KEYS"]

VERDICT_KEYS = ("verdict", "p_value", "power", "lam", "lam_err", "p_c", "p_c_err", "peaks",
                "lam_claimed", "n_runs", "n_dropped", "n_points", "n_null", "n_power",
                "summary", "x", "R")
"""What a stored verdict keeps of a judged record (``x`` and ``R`` for the figure)."""


@dataclass(frozen=True)
class FullPreset:
    """One chapter's full preset (module docstring)."""

    chapter: str
    decides: str
    compute: Callable[..., tuple[dict, dict]]
    full: dict
    smoke: dict
    modules: tuple[str, ...]
    device: str = "cpu"
    expected_minutes: float = 30.0


def _keep(rec) -> dict:
    """The stored fields of a verdict (a ``CascadeVerdict`` reads its fields by key too)."""
    out = {}
    for k in VERDICT_KEYS:
        try:
            out[k] = rec[k]
        except (KeyError, AttributeError):
            continue
    return out


def _judge(C, steps, params: dict, lam: float):
    """The cascade test at the preset's declared configuration, claimed ``lam`` and seed."""
    config = params["judge"].replace(alpha=params["alpha"], seed=params["seed"], lam_claimed=lam)
    return judge_cascade(C, np.asarray(steps, float), config)


def _ensemble(chunk: Callable, n_runs: int, seed: int, params: dict, chunk_size: int,
              **where) -> dict:
    chunks, report = run_chunked(chunk, run_seeds(seed, n_runs), params, chunk_size=chunk_size,
                                 **where)
    return concat_runs(chunks) | {"report": report}


def real_data(params: dict, **where) -> tuple[dict, dict]:
    """II.8: the Heart Disease and digits ensembles (``params["sets"]``: name → chunk
    parameters with ``n_runs`` and the claimed ``lam``), each judged at its claimed λ, Holm
    over the sets."""
    verdicts, numbers = {}, {}
    for name, spec in params["sets"].items():
        chunk = {k: v for k, v in spec.items() if k not in ("n_runs", "lam")}
        runs = _ensemble(data_ensemble_chunk, spec["n_runs"], params["seed"], chunk,
                         params["chunk_size"], **where)
        verdicts[name] = _keep(_judge(runs["C"], runs["steps"], params, spec["lam"]))
        numbers[name] = {"train_acc": float(np.mean(runs["acc"])),
                         "chunks": runs["report"].n_chunks}
    rejected = holm([v["p_value"] for v in verdicts.values()], params["alpha"])
    numbers["holm_rejected"] = dict(zip(verdicts, map(bool, rejected), strict=True))
    return verdicts, numbers


def sgd_search(params: dict, **where) -> tuple[dict, dict]:
    """II.5: the declared SGD search (:mod:`flowlaws.percolation.cascade.search`)."""
    search = {"SGD_SEARCH": SGD_SEARCH, "SMOKE_SEARCH": SMOKE_SEARCH}[params["search"]]
    result = run_search(search, **where)
    verdicts = {" ".join(f"{k}={v}" for k, v in r["setting"].items()): _keep(r)
                for r in result["rows"]}
    numbers = {"text": search_text(result), "rejected": result["rejected"],
               "found": result["found"], "replicated": result["replicated"],
               "replications": {str(i): _keep(r) for i, r in result["replications"].items()}}
    return verdicts, numbers


def adaptive_cascade(params: dict, **where) -> tuple[dict, dict]:
    """II.6 at the size that decides it: SGD, Adam and AdamW from a small initialisation on
    teacher data, heavy-tailed noise, one judged ensemble each, Holm over the three. The data
    are :func:`flowlaws.percolation.toys.planted.teacher_data` (the chapter's reader preset
    builds its teacher inline: same sizes, another draw)."""
    verdicts = {}
    for name, opt in params["optimizers"].items():
        chunk = params["chunk"] | opt
        runs = _ensemble(teacher_ensemble_chunk, params["n_runs"], params["seed"], chunk,
                         params["chunk_size"], **where)
        verdicts[name] = _keep(_judge(runs["C"], runs["steps"], params, params["lam"]))
    rejected = holm([v["p_value"] for v in verdicts.values()], params["alpha"])
    return verdicts, {"holm_rejected": dict(zip(verdicts, map(bool, rejected), strict=True))}


_JUDGE: CascadeConfig = READER.replace(n_null=199)  # the cascade test's declared full settings
_SMOKE_JUDGE: CascadeConfig = SMOKE
_HEART = {"data": "heart", "width": 16, "init_scale": 0.01, "lr": 0.1, "batch_size": 8,
          "n_steps": 2000, "record_every": 2, "lam": 1.71}
_DIGITS = {"data": "digits", "width": 16, "init_scale": 0.01, "lr": 0.1, "batch_size": 8,
           "n_steps": 2000, "record_every": 2, "n_images": 500, "lam": 2.11}
_ADAPTIVE = {"init": "small", "n_in": 4, "width": 8, "n_teacher": 2, "n_data": 64,
             "label_noise": 0.1, "init_scale": 0.1, "batch_size": 4, "n_steps": 20_000,
             "record_every": 20, "alpha": 1.5, "truncation": 10.0, "device": "cuda"}
_OPTIMIZERS = {"sgd": {"optimizer": "sgd", "lr": 0.1},
               "adam": {"optimizer": "adam", "lr": 0.005},
               "adamw": {"optimizer": "adamw", "lr": 0.005, "weight_decay": 0.01}}

PRESETS = {
    "08_real_data": FullPreset(
        chapter="08_real_data",
        decides="Heart Disease λ = 1.71 and the image cascade (the seed's UCI claim)",
        compute=real_data,
        full={"sets": {"Heart Disease": _HEART | {"n_runs": 2048},
                       "digits (scikit-learn)": _DIGITS | {"n_runs": 512}},
              "seed": 0, "alpha": 0.05, "chunk_size": 64, "judge": _JUDGE},
        smoke={"sets": {"Heart Disease": _HEART | {"n_runs": 8, "n_steps": 200},
                        "digits (scikit-learn)": _DIGITS | {"n_runs": 8, "n_steps": 200,
                                                            "n_images": 100}},
               "seed": 0, "alpha": 0.05, "chunk_size": 4, "judge": _SMOKE_JUDGE},
        modules=("flowlaws.percolation.presets",), expected_minutes=30.0),
    "05_dsi": FullPreset(
        chapter="05_dsi",
        decides="an SGD setting whose learning-rate slider shows a cascade (the declared search)",
        compute=sgd_search, full={"search": "SGD_SEARCH"}, smoke={"search": "SMOKE_SEARCH"},
        modules=("flowlaws.percolation.presets",), expected_minutes=30.0),
    "06_adaptive": FullPreset(
        chapter="06_adaptive",
        decides="Adam and AdamW keep the DSI cascade (1,024 runs of 20,000 steps on a GPU)",
        compute=adaptive_cascade,
        full={"n_runs": 1024, "seed": 0, "alpha": 0.05, "lam": 2.0, "chunk_size": 256,
              "chunk": _ADAPTIVE, "optimizers": _OPTIMIZERS, "judge": _JUDGE},
        smoke={"n_runs": 8, "seed": 0, "alpha": 0.05, "lam": 2.0, "chunk_size": 4,
               "chunk": _ADAPTIVE | {"n_steps": 400, "record_every": 2, "device": "cpu"},
               "optimizers": _OPTIMIZERS, "judge": _SMOKE_JUDGE},
        modules=("flowlaws.percolation.presets",), device="cuda", expected_minutes=20.0),
}
"""Every Part II full preset, by chapter. The grokking chapter's (Nanda et al.'s setting, 64
runs) is run by ``tools/gpu_check.py`` itself, into its checkpoint store."""


def preset(chapter: str) -> FullPreset:
    """The full preset of ``chapter`` (``"08_real_data"``), refused by name when none."""
    if chapter not in PRESETS:
        raise KeyError(f"no full preset for chapter {chapter!r}; there are {sorted(PRESETS)}")
    return PRESETS[chapter]
