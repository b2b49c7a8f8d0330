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

from flowlaws.book.ledger import verdict_of_all
from flowlaws.book.rules.percolation import first_cascade_verdict
from flowlaws.common.chunks import concat_runs, run_chunked, run_seeds
from flowlaws.percolation.cascade.calibration import (
    CALIBRATION_LEVEL,
    calibration_table,
    power_table,
)
from flowlaws.percolation.cascade.config import POWER_TARGET, READER, SMOKE, CascadeConfig
from flowlaws.percolation.cascade.judge import judge_cascade
from flowlaws.percolation.cascade.search import (
    SGD_SEARCH,
    SMOKE_SEARCH,
    run_search,
    search_text,
)
from flowlaws.percolation.cascade.stats import holm
from flowlaws.percolation.cascade.verdicts import decision_tally, grid_claim, ledger_texts
from flowlaws.percolation.dynamics.seeded import data_ensemble_chunk, teacher_ensemble_chunk
from flowlaws.percolation.grokking.analysis import delay_summary
from flowlaws.percolation.grokking.model import GrokConfig
from flowlaws.percolation.grokking.training import train_grokking

__all__ = ["FullPreset", "PRESETS", "preset", "real_data", "sgd_search", "adaptive_cascade",
           "grokking_delay", "cascade_calibration", "VERDICT_KEYS"]

VERDICT_KEYS = ("verdict", "reason", "p_value", "power", "power_low", "power_high", "lam",
                "lam_err", "lam_low", "lam_high", "p_c", "p_c_err", "peaks", "lam_claimed",
                "n_runs", "n_dropped", "n_points", "n_null", "n_power", "decides_at",
                "decision", "summary", "x", "R")
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
    claims: tuple[str, ...] = ()  # the ledger claims whose rows its stored file keeps


def _keep(rec) -> dict:
    """The stored fields of a verdict (a ``CascadeVerdict`` reads its fields by key too)."""
    out = {}
    for k in VERDICT_KEYS:
        try:
            out[k] = rec[k]
        except (KeyError, AttributeError):
            continue
    return out


def _judge(C, steps, params: dict, lam: float, sizes: tuple[int, ...] | None = None):
    """The cascade test at the preset's declared configuration, claimed ``lam``, seed and, when
    given, the ensemble ``sizes`` of its power curve."""
    config = params["judge"].replace(alpha=params["alpha"], seed=params["seed"], lam_claimed=lam)
    return judge_cascade(C, np.asarray(steps, float),
                         config if sizes is None else config.replace(sizes=tuple(sizes)))


def _claim(verdict: str, number: str, first_verdict: str | None) -> dict:
    """A ledger row as the stored file keeps it (``flowlaws.common.stored.stored_claim``)."""
    return {"verdict": verdict, "number": number, "first_verdict": first_verdict}


def _ensemble(chunk: Callable, n_runs: int, seed: int, params: dict, chunk_size: int,
              **where) -> dict:
    chunks, report = run_chunked(chunk, run_seeds(seed, n_runs), params, chunk_size=chunk_size,
                                 **where)
    return concat_runs(chunks) | {"report": report}


def real_data(params: dict, **where) -> tuple[dict, dict]:
    """II.8: the Heart Disease and digits ensembles (``params["sets"]``: name → chunk
    parameters with ``n_runs``, the claimed ``lam``, the power curve's ``sizes`` and the
    ledger's ``claim``), each judged at its claimed λ, Holm over the sets; ``numbers["claims"]``
    holds each claim's ledger row (:func:`~flowlaws.percolation.cascade.verdicts.ledger_texts`
    after Holm, and the verdict under the first rule)."""
    verdicts, numbers, judged = {}, {}, {}
    for name, spec in params["sets"].items():
        chunk = {k: v for k, v in spec.items() if k not in ("n_runs", "lam", "sizes", "claim")}
        runs = _ensemble(data_ensemble_chunk, spec["n_runs"], params["seed"], chunk,
                         params["chunk_size"], **where)
        judged[name] = _judge(runs["C"], runs["steps"], params, spec["lam"], spec.get("sizes"))
        verdicts[name] = _keep(judged[name])
        numbers[name] = {"train_acc": float(np.mean(runs["acc"])),
                         "chunks": runs["report"].n_chunks}
    rejected = dict(zip(judged, map(bool, holm([v.p_value for v in judged.values()],
                                                params["alpha"])), strict=True))
    numbers["holm_rejected"] = rejected
    numbers["claims"] = {
        spec["claim"]: _claim(*ledger_texts(judged[name], rejected[name]),
                              first_cascade_verdict(judged[name], rejected=rejected[name]))
        for name, spec in params["sets"].items()}
    return verdicts, numbers


def sgd_search(params: dict, **where) -> tuple[dict, dict]:
    """II.5: the declared SGD search (:mod:`flowlaws.percolation.cascade.search`)."""
    search = {"SGD_SEARCH": SGD_SEARCH, "SMOKE_SEARCH": SMOKE_SEARCH}[params["search"]]
    result = run_search(search, **where)
    verdicts = {" ".join(f"{k}={v}" for k, v in r["setting"].items()): _keep(r)
                for r in result["rows"]}
    rows, rejected = result["rows"], np.asarray(result["rejected"], dtype=bool)
    counts = {v: sum(r["verdict"] == v for r in rows) for v in ("cascade", "no cascade",
                                                                 "inconclusive")}
    tally = decision_tally(rows)
    number = (f"declared SGD search: {len(rows)} settings × {result['search']['n_runs']} runs; "
              f"{counts['cascade']} cascade, {counts['no cascade']} no cascade, "
              f"{counts['inconclusive']} inconclusive{f' ({tally})' if tally else ''}; "
              f"{int(rejected.sum())} rejected after Holm, {len(result['found'])} found, "
              f"{len(result['replicated'])} replicated")
    # the first rule over the grid, as II.5 reads it: a setting found (p ≤ α, four peaks) that
    # survives Holm; "fails" when every setting's point power is at least 0.8
    alpha = result["search"]["alpha"]
    old_found = any(r["p_value"] <= alpha and len(r["peaks"]) >= 4 and k
                    for r, k in zip(rows, rejected, strict=True))
    old_none = all(np.isfinite(r["power"]) and r["power"] >= 0.8 for r in rows)
    first_grid = "holds" if old_found else "fails" if old_none else "inconclusive at this size"
    numbers = {"text": search_text(result), "rejected": result["rejected"],
               "found": result["found"], "replicated": result["replicated"],
               "replications": {str(i): _keep(r) for i, r in result["replications"].items()},
               "claims": {"dsi_sgd": _claim(grid_claim(rows, rejected), number, first_grid)}}
    return verdicts, numbers


def adaptive_cascade(params: dict, **where) -> tuple[dict, dict]:
    """II.6 at the size that decides it: SGD, Adam and AdamW from a small initialisation on
    teacher data, heavy-tailed noise, one judged ensemble each, Holm over the three; an
    inconclusive verdict's power curve resamples the runs at ``params["sizes"]`` (up to the
    ensemble's own size, as II.8's). The data are
    :func:`flowlaws.percolation.toys.planted.teacher_data` (the chapter's reader preset builds
    its teacher inline: same sizes, another draw)."""
    verdicts, judged = {}, {}
    for name, opt in params["optimizers"].items():
        chunk = params["chunk"] | opt
        runs = _ensemble(teacher_ensemble_chunk, params["n_runs"], params["seed"], chunk,
                         params["chunk_size"], **where)
        judged[name] = _judge(runs["C"], runs["steps"], params, params["lam"],
                              params.get("sizes"))
        verdicts[name] = _keep(judged[name])
    rejected = dict(zip(judged, map(bool, holm([v.p_value for v in judged.values()],
                                                params["alpha"])), strict=True))
    parts = {o: ledger_texts(judged[o], rejected[o]) for o in ("adam", "adamw") if o in judged}
    claim = _claim(verdict_of_all(v for v, _ in parts.values()),
                   "; ".join(f"{o}: {n}" for o, (_, n) in parts.items()),
                   verdict_of_all(first_cascade_verdict(judged[o], rejected=rejected[o])
                                  for o in parts))
    return verdicts, {"holm_rejected": rejected, "claims": {"adam_cascade": claim}}


def grokking_delay(params: dict, **where) -> tuple[dict, dict]:
    """II.7's delay claim at the length that decides it: the chapter's ensemble
    (``params["config"]``, a :class:`~flowlaws.percolation.grokking.model.GrokConfig` as a
    dict) trained to ``n_steps`` (resumed from a shorter stored run of the same trajectory), its
    memorisation and grokking steps, and the verdict of the declared rule (``grokking_delayed``).
    ``where``: ``cache_dir`` of the run store (workers and scheduler are not used: the ensemble
    is one batched computation)."""
    cfg = GrokConfig(**params["config"])
    run = train_grokking(cfg, device=params.get("device", "cpu"), cache_dir=where.get("cache_dir"),
                         progress=where.get("progress") is not None)
    delay = delay_summary(run.steps, run.train_acc, run.test_acc,
                          mem_threshold=params["mem_threshold"],
                          grok_threshold=params["grok_threshold"])
    verdict, first = delay.verdicts(cfg.p)
    late = delay.ratio[np.isfinite(delay.ratio)]
    spread = f" (range {late.min():.1f}–{late.max():.1f})" if len(late) else ""
    median = f"{np.median(late):.1f}" if len(late) else "n/a"
    number = (f"grokking/memorisation step ratio median {median}{spread}, {delay.n_grokked} of "
              f"{cfg.n_runs} runs grokked by step {int(run.steps[-1])} (deciding needs 90 %), "
              f"modulus {cfg.p}, {run.train_cpu_seconds / 60:.1f} CPU min")
    numbers = {"line": delay.line(), "n_grokked": delay.n_grokked, "n_runs": cfg.n_runs,
               "last_step": int(run.steps[-1]), "ratio": [float(r) for r in delay.ratio],
               "memorised": [float(m) for m in delay.memorised],
               "grokked": [float(g) for g in delay.grokked],
               "claims": {"grokking_delayed": _claim(verdict, number, first)}}
    return {"delay": {"verdict": verdict, "p_value": float("nan"), "power": float("nan"),
                      "n_runs": cfg.n_runs, "summary": number}}, numbers


def cascade_calibration(params: dict, **where) -> tuple[dict, dict]:
    """II.5's calibration and power tables at the declared full size (issue 24: at least 200
    ensembles per null family): :func:`~flowlaws.percolation.cascade.calibration.calibration_table`
    and :func:`~flowlaws.percolation.cascade.calibration.power_table` with the full presets'
    judge. Rules, declared with this preset: a null family *holds* (the false-cascade rate is
    at most α) when the one-sided binomial test of "rate ≤ α" gives p > ``CALIBRATION_LEVEL``
    (0.01), the chapter's printed check; a planted setting *holds* when the power is at least
    ``POWER_TARGET`` (0.8) and λ̂ is within ``LAM_ACCURACY`` (10 %) of the planted λ in at least
    ``POWER_TARGET`` of the trials. ``where`` is not used (one process)."""
    config = params["judge"].replace(alpha=params["alpha"], seed=params["seed"])
    cal = calibration_table(config, n_ensembles=params["n_ensembles"], n_runs=params["n_runs"],
                            n_points=params["n_points"], progress=where.get("progress"))
    power = power_table(config, n_trials=params["n_trials"], n_runs=params["n_runs"],
                        n_points=params["n_points"], progress=where.get("progress"))
    verdicts = {}
    for r in cal:
        verdicts[f"null: {r['family']}"] = {
            "verdict": "holds" if r["binom_p"] > CALIBRATION_LEVEL else "fails",
            "p_value": r["binom_p"],
            "power": float("nan"), "n_runs": r["n_runs"],
            "summary": (f"{r['cascades']} false cascades of {r['ensembles']} (rate "
                        f"{r['rate']:.3f}, 95 % upper bound {r['rate_high']:.3f}, binomial p "
                        f"{r['binom_p']:.3f})")}
    for r in power:
        ok = r["power"] >= POWER_TARGET and r["within_10"] >= POWER_TARGET
        verdicts[f"planted: λ = {r['lam']:g}, {r['levels']} levels"] = {
            "verdict": "holds" if ok else "fails", "p_value": float("nan"),
            "power": r["power"], "n_runs": r["n_runs"],
            "summary": (f"{r['found']} of {r['trials']} found (power {r['power']:.2f}, 95 % "
                        f"lower bound {r['power_low']:.2f}), median λ̂ {r['lam_median']:.3f}, "
                        f"λ̂ within 10 % in {r['within_10']:.2f}")}
    return verdicts, {"calibration": cal, "power": power, "claims": {}}


_JUDGE: CascadeConfig = READER.replace(n_null=199)  # the cascade test's declared full settings
_SMOKE_JUDGE: CascadeConfig = SMOKE
_HEART = {"data": "heart", "width": 16, "init_scale": 0.01, "lr": 0.1, "batch_size": 8,
          "n_steps": 2000, "record_every": 2, "lam": 1.71, "claim": "heart_lambda171"}
_DIGITS = {"data": "digits", "width": 16, "init_scale": 0.01, "lr": 0.1, "batch_size": 8,
           "n_steps": 2000, "record_every": 2, "n_images": 500, "lam": 2.11,
           "claim": "images_cascade"}
# The grokking chapter's reader ensemble (II.7's parameters as of this preset's declaration),
# trained three times as long: 23 of 32 runs had grokked by step 8,000, and the declared rule
# needs 90 % before it decides; 24,000 steps cost about 16 CPU minutes.
_GROK = {"p": 23, "fraction": 0.4, "d_model": 32, "n_heads": 4, "d_mlp": 64, "lr": 2e-2,
         "weight_decay": 1.0, "betas": (0.9, 0.98), "n_runs": 32, "seed": 0, "data_seed": 0,
         "n_steps": 24_000, "log_every": 10, "checkpoint_every": 500,
         "tols": (0.05, 0.1, 0.2, 0.3)}
_ADAPTIVE = {"init": "small", "n_in": 4, "width": 8, "n_teacher": 2, "n_data": 64,
             "label_noise": 0.1, "init_scale": 0.1, "batch_size": 4, "n_steps": 20_000,
             "record_every": 20, "alpha": 1.5, "truncation": 10.0, "device": "cpu"}
_OPTIMIZERS = {"sgd": {"optimizer": "sgd", "lr": 0.1},
               "adam": {"optimizer": "adam", "lr": 0.005},
               "adamw": {"optimizer": "adamw", "lr": 0.005, "weight_decay": 0.01}}

PRESETS = {
    "08_real_data": FullPreset(
        chapter="08_real_data",
        decides="Heart Disease λ = 1.71 and the image cascade (the seed's UCI claim)",
        compute=real_data,
        full={"sets": {"Heart Disease": _HEART | {"n_runs": 2048,
                                                  "sizes": (256, 512, 1024, 2048)},
                       "digits (scikit-learn)": _DIGITS | {"n_runs": 512,
                                                           "sizes": (128, 256, 512)}},
              "seed": 0, "alpha": 0.05, "chunk_size": 64, "judge": _JUDGE},
        smoke={"sets": {"Heart Disease": _HEART | {"n_runs": 8, "n_steps": 200},
                        "digits (scikit-learn)": _DIGITS | {"n_runs": 8, "n_steps": 200,
                                                            "n_images": 100}},
               "seed": 0, "alpha": 0.05, "chunk_size": 4, "judge": _SMOKE_JUDGE},
        modules=("flowlaws.percolation.presets",), expected_minutes=30.0,
        claims=("heart_lambda171", "images_cascade")),
    "05_calibration": FullPreset(
        chapter="05_calibration",
        decides="the cascade test's false-cascade rate on every null family (200 ensembles each) "
                "and its power on planted cascades (100 each), at the full presets' judge",
        compute=cascade_calibration,
        full={"n_ensembles": 200, "n_trials": 100, "n_runs": 64, "n_points": 1024, "seed": 0,
              "alpha": 0.05, "judge": _JUDGE},
        smoke={"n_ensembles": 2, "n_trials": 2, "n_runs": 16, "n_points": 512, "seed": 0,
               "alpha": 0.05, "judge": _SMOKE_JUDGE},
        modules=("flowlaws.percolation.presets",), expected_minutes=30.0),
    "05_dsi": FullPreset(
        chapter="05_dsi",
        decides="an SGD setting whose learning-rate slider shows a cascade (the declared search)",
        compute=sgd_search, full={"search": "SGD_SEARCH"}, smoke={"search": "SMOKE_SEARCH"},
        modules=("flowlaws.percolation.presets",), expected_minutes=30.0, claims=("dsi_sgd",)),
    "06_adaptive": FullPreset(
        chapter="06_adaptive",
        decides="Adam and AdamW keep the DSI cascade (1,024 runs of 20,000 steps per optimizer "
                "on a CPU; the stored file records its wall and CPU time)",
        compute=adaptive_cascade,
        full={"n_runs": 1024, "seed": 0, "alpha": 0.05, "lam": 2.0, "chunk_size": 256,
              "chunk": _ADAPTIVE, "optimizers": _OPTIMIZERS, "judge": _JUDGE,
              "sizes": (128, 256, 512, 1024)},
        smoke={"n_runs": 8, "seed": 0, "alpha": 0.05, "lam": 2.0, "chunk_size": 4,
               "chunk": _ADAPTIVE | {"n_steps": 400, "record_every": 2},
               "optimizers": _OPTIMIZERS, "judge": _SMOKE_JUDGE},
        modules=("flowlaws.percolation.presets",), expected_minutes=30.0,
        claims=("adam_cascade",)),
    "07_grokking": FullPreset(
        chapter="07_grokking",
        decides="the grokking delay (32 runs of the reader's ensemble, 24,000 steps on a CPU)",
        compute=grokking_delay,
        full={"config": _GROK, "mem_threshold": 0.99, "grok_threshold": 0.9, "device": "cpu"},
        smoke={"config": _GROK | {"n_runs": 2, "n_steps": 40, "checkpoint_every": 20},
               "mem_threshold": 0.99, "grok_threshold": 0.9, "device": "cpu"},
        modules=("flowlaws.percolation.presets",), expected_minutes=20.0,
        claims=("grokking_delayed",)),
}
"""Every Part II full preset, by chapter. The grokking chapter's (Nanda et al.'s setting, 64
runs) is run by ``tools/gpu_check.py`` itself, into its checkpoint store."""


def preset(chapter: str) -> FullPreset:
    """The full preset of ``chapter`` (``"08_real_data"``), refused by name when none."""
    if chapter not in PRESETS:
        raise KeyError(f"no full preset for chapter {chapter!r}; there are {sorted(PRESETS)}")
    return PRESETS[chapter]
