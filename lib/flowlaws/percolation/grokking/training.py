"""Grokking on modular addition: an ensemble of one-layer Transformers trained at once.

The task and the model (Nanda et al.'s one-layer Transformer, every parameter with a leading
ensemble dimension ``R``) are in :mod:`flowlaws.percolation.grokking.model` and re-exported here.
Trained full-batch with AdamW and a strong weight decay, the network first memorises the
training set (train accuracy 1, test accuracy near chance) and only much later generalises:
test accuracy jumps to 1. All ``R`` runs train on the same split.

The optimiser is AdamW as written once for the book (:class:`flowlaws.common.optim.UpdateRule`,
the update of :class:`torch.optim.AdamW`: decoupled weight decay, bias-corrected moments), with
Nanda's linear warm-up of the learning rate over ``warmup`` steps.

Every ``log_every`` steps :func:`train_grokking` records, per run, train and test accuracy and loss
and the *merge order parameter* ``C_max``: MLP neuron ``i`` is the vector
``[W_in[i, :], b_in[i], W_out[:, i]]`` and ``C_max`` is the size of the largest group of
neurons linked by relative distances below ``tol``
(:func:`flowlaws.percolation.topology.clusters.cmax`;
NaN for a run whose weights are not finite), for each ``tol`` in ``tols``, the median
distance of a neuron to its nearest neighbour, and every MLP neuron's key frequency and its
share (:func:`flowlaws.percolation.grokking.fourier.neuron_frequencies`: the functional order
parameter is computed from them at any share threshold). Every
``checkpoint_every`` steps the whole state (parameters, AdamW moments, step, metrics so far,
RNG state) is written beside the previous checkpoint, then replaces it, in a folder keyed by
what determines the trajectory and by nothing else
(:mod:`flowlaws.percolation.grokking.checkpoints`:
not the library's code, but :data:`TRAINING_CODE_VERSION`, and not the metric-only settings
``log_every`` and ``tols``: C_max is recomputed from stored spanning forests at any ``tols``).
A later call resumes from it, so an interrupted run (a ``KeyboardInterrupt``, a lost Colab
session) loses only the steps since the last checkpoint, a finished run is loaded instead of
trained again, and a corrupt newest checkpoint falls back to the previous one, with a warning.
Two calls on the same configuration and folder take turns (a lock in the run folder): the
second loads or extends what the first stored, and no work is lost.

**Divergence, at any precision.** A run has diverged when its train loss is NaN or infinite,
or exceeds :data:`DIVERGENCE_FACTOR` (100) times its own train loss at step 0 (about
``log p`` for an untrained model), or when a parameter is NaN or infinite. In float64 a run at
too high a learning rate can stay finite -- a train loss of 1e78, weights of 1e12 -- and it is
still not a result: :func:`train` raises :class:`GrokDivergenceError` and never saves a
diverged state, finished or not. AdamW's decoupled decay multiplies the weights by
``1 − lr · weight_decay`` at each step: ``lr · weight_decay ≥ 1`` (weights zeroed or flipped)
is refused before training.

Explained in: book/02_percolation/07_grokking.ipynb
"""
from __future__ import annotations

import functools
import json
import math
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from flowlaws.book.cache import cache_dir as default_cache_dir
from flowlaws.book.progress import bar as progress_bar
from flowlaws.book.runtime import check_device
from flowlaws.common.checks import check_decoupled_decay
from flowlaws.common.optim import EnsembleDivergenceError, UpdateRule
from flowlaws.percolation.grokking.checkpoints import (
    GrokStoreWarning,
    _mlp_neurons,
    check_checkpoint,
    check_run_paths,
    load_checkpoint,
    merge_order_parameter,
    nearest_neighbour_distance,
    neuron_forests,
    read_records,
    run_lock,
    save_checkpoint,
    trajectory_key,
    warn_older_runs,
)
from flowlaws.percolation.grokking.fourier import neuron_frequencies
from flowlaws.percolation.grokking.model import (
    DTYPES,
    PARAM_NAMES,
    GrokConfig,
    _shapes,
    all_pairs,
    forward,
    init_params,
    loss_and_accuracy,
    mlp_activations,
    modular_data,
)

__all__ = [
    "TRAINING_CODE_VERSION",
    "DIVERGENCE_FACTOR",
    "GrokStoreWarning",
    "PARAM_NAMES",
    "METRICS",
    "DTYPES",
    "GrokConfig",
    "GrokDivergenceError",
    "modular_data",
    "all_pairs",
    "init_params",
    "forward",
    "mlp_activations",
    "loss_and_accuracy",
    "merge_order_parameter",
    "nearest_neighbour_distance",
    "GrokRun",
    "run_folder",
    "train_grokking",
    "first_step_above",
]


TRAINING_CODE_VERSION = 3
"""The version of the training math (model, loss, AdamW, warm-up, initialisation, data split).
Bump it by hand when a change alters the trajectory: stored runs of another version are then
trained again, with a warning; any other change of the library keeps them. (Version 3 added
the key-frequency records, without which a stored run cannot give the functional order
parameter.)"""



METRICS = ("train_acc", "test_acc", "train_loss", "test_loss", "c_max", "nn_distance")

DIVERGENCE_FACTOR = 100.0
"""A run whose train loss exceeds this many times its train loss at step 0 has diverged (as
has one whose loss or parameters are NaN or infinite), at any floating-point precision."""


class GrokDivergenceError(EnsembleDivergenceError):
    """Grokking runs that diverged (``runs``, ``steps``, ``lr``): a train loss that is NaN,
    infinite or above :data:`DIVERGENCE_FACTOR` times its start, or parameters that are not
    finite. Nothing diverged is saved: the run folder keeps its last sound checkpoint."""

    def __init__(self, runs: list[int], steps: list[int], n_runs: int, lr: float,
                 note: str = "") -> None:
        super().__init__(runs, steps, n_runs, lr, note)
        detail = ", ".join(f"run {r} after step {s}" for r, s in zip(runs[:10], steps[:10],
                                                                      strict=True))
        more = f" (and {len(runs) - 10} more)" if len(runs) > 10 else ""
        self.args = (f"{len(runs)} of {n_runs} runs diverged with lr={lr:g} (a train loss NaN, "
                     f"infinite or above {DIVERGENCE_FACTOR:g} times its step-0 value, or "
                     f"parameters not finite): {detail}{more}; lower the learning rate{note}",)


class StoredParamsUnavailable(Mapping):
    """``GrokRun.params`` of a run read up to a step before the stored one: the parameters of
    that step are not stored (a run folder keeps its newest parameters only), so any access
    raises a ``LookupError`` saying so, rather than handing out another step's weights."""

    def __init__(self, step: int, stored: int, folder: Path) -> None:
        self.message = (f"the parameters at step {step} are not stored: the run in {folder} "
                        f"was trained to step {stored} and keeps its newest parameters only; "
                        f"train with n_steps={stored} for them (the metrics up to step {step} "
                        "are in this result)")

    def __getitem__(self, key: str) -> torch.Tensor:
        raise LookupError(self.message)

    def __iter__(self) -> Iterator[str]:
        raise LookupError(self.message)

    def __len__(self) -> int:
        raise LookupError(self.message)

    def __repr__(self) -> str:
        return f"StoredParamsUnavailable({self.message!r})"


@dataclass
class GrokRun:
    """What :func:`train_grokking` returns. ``steps`` ``(T,)``; ``train_acc``, ``test_acc``,
    ``train_loss``, ``test_loss``, ``nn_distance`` ``(T, R)``; ``c_max`` ``(T, R, n_tols)``
    (one column per ``config.tols``); ``freqs`` ``(T, R, d_mlp, 2)`` every MLP neuron's key
    frequency and its share (:func:`flowlaws.percolation.grokking.fourier.frequency_cmax` turns
    them into the functional order parameter); ``params`` the parameters at step
    ``params_step`` = ``config.n_steps`` (a :class:`StoredParamsUnavailable` that refuses every
    access when the folder holds a longer run, whose parameters at that step are not stored);
    ``folder`` the run folder; ``resumed_from`` the step it resumed from (0: fresh);
    ``seconds`` the wall time of this call; ``seconds_per_step`` (wall) and
    ``cpu_seconds_per_step`` (this process's CPU time: on a shared machine, closer to what the
    step costs alone) of the steps it trained (NaN if none); ``train_seconds`` and
    ``train_cpu_seconds`` the wall and CPU time spent on the stored steps over every call that
    trained them (up to the last checkpoint), so a loaded run still says what it cost."""

    config: GrokConfig
    steps: np.ndarray
    train_acc: np.ndarray
    test_acc: np.ndarray
    train_loss: np.ndarray
    test_loss: np.ndarray
    c_max: np.ndarray
    nn_distance: np.ndarray
    freqs: np.ndarray
    params: dict[str, torch.Tensor]
    folder: Path
    resumed_from: int
    seconds: float
    seconds_per_step: float
    cpu_seconds_per_step: float
    train_seconds: float = float("nan")
    train_cpu_seconds: float = float("nan")
    params_step: int = -1


def run_folder(cfg: GrokConfig, device: torch.device | str = "cpu",
               cache_dir: Path | str | None = None) -> Path:
    """The folder of a run: ``<cache_dir>/grokking-<key of the trajectory's parameters>``."""
    base = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    return base / f"grokking-{trajectory_key(cfg.key_params(check_device(device)))}"


def _record(metrics: dict[str, list], step: int, params, data) -> None:
    with torch.no_grad():
        tr_loss, tr_acc = loss_and_accuracy(params, data[0], data[1])
        te_loss, te_acc = loss_and_accuracy(params, data[2], data[3])
    metrics["steps"].append(step)
    for name, val in zip(METRICS[:4], (tr_acc, te_acc, tr_loss, te_loss), strict=True):
        metrics[name].append(val.cpu().tolist())
    metrics["forests"].append(neuron_forests(*_mlp_neurons(params)))  # C_max at any tol
    metrics["nn_distance"].append(nearest_neighbour_distance(params).tolist())
    metrics["freqs"].append(neuron_frequencies(params, data[4]))


def _checker(cfg: GrokConfig):
    """A check that a loaded checkpoint holds what training needs, shaped for ``cfg``."""
    shapes = {k: (cfg.n_runs, *v) for k, v in _shapes(cfg).items()}
    return functools.partial(check_checkpoint, shapes=shapes,
                             metrics=[n for n in METRICS if n != "c_max"])


def _fresh(cfg: GrokConfig, dev: torch.device, data) -> dict:
    params = init_params(cfg, dev)
    ckpt = {"step": 0, "params": params, "rng": torch.get_rng_state(),
            "state": {f"{m}.{k}": torch.zeros_like(t) for k, t in params.items() for m in "mv"},
            # the AdamW moments of parameter k as "m.k" and "v.k": a flat dict of tensors
            "metrics": {"steps": [], "forests": [], "freqs": [],
                        **{n: [] for n in METRICS if n != "c_max"}},
            "record_every": cfg.log_every, "training_code_version": TRAINING_CODE_VERSION}
    _record(ckpt["metrics"], 0, params, data)
    return ckpt


def _save(ckpt: dict, folder: Path) -> None:
    ckpt["rng"] = torch.get_rng_state()
    save_checkpoint(ckpt, folder)


def train_grokking(cfg: GrokConfig, *, device: torch.device | str | None = None,
          cache_dir: Path | str | None = None, progress: bool = True,
          callback: Callable[[int], None] | None = None) -> GrokRun:
    """Train (or resume, or load) the ensemble of ``cfg`` up to ``cfg.n_steps`` steps.

    The checkpoint ``checkpoint.pt`` in :func:`run_folder` is read with
    ``torch.load(..., weights_only=True)``; training restarts from its step (from the previous
    checkpoint, with a :class:`GrokStoreWarning` naming the file, when it cannot be read).
    ``callback(step)`` is called after every step (the tests use it to interrupt a run). A
    progress bar (:func:`flowlaws.book.progress.bar`) shows the steps and the ensemble's mean
    test accuracy. A run that diverges (module docstring: a loss NaN, infinite or above
    :data:`DIVERGENCE_FACTOR` times its start) raises :class:`GrokDivergenceError` (runs, step,
    lr) and is not saved: the folder keeps its last sound checkpoint. ``lr · weight_decay ≥ 1``
    and a ``device`` torch does not know are ``ValueError`` s naming them; a checkpoint path
    that is a folder is refused before training. A second call on the same configuration and
    folder waits for the first (:func:`~flowlaws.percolation.grokking.checkpoints.run_lock`).
    """
    t0 = time.perf_counter()
    if not isinstance(cfg, GrokConfig):
        raise TypeError(f"cfg must be a GrokConfig, got {type(cfg).__name__}")
    dev = check_device(device)
    check_decoupled_decay(cfg.lr, cfg.weight_decay, lr_name="cfg.lr",
                          decay_name="cfg.weight_decay")
    folder = run_folder(cfg, dev, cache_dir)
    check_run_paths(folder)
    with run_lock(folder):
        return _train(cfg, dev, folder, t0, progress, callback)


def _train(cfg: GrokConfig, dev: torch.device, folder: Path, t0: float, progress: bool,
           callback: Callable[[int], None] | None) -> GrokRun:
    data = (*modular_data(cfg.p, cfg.fraction, cfg.data_seed, dev), cfg.p)
    ckpt = load_checkpoint(folder, dev, TRAINING_CODE_VERSION, _checker(cfg))
    if ckpt is not None:
        torch.set_rng_state(ckpt["rng"].cpu())
    else:
        warn_older_runs(folder, cfg.key_params(dev))
        ckpt = _fresh(cfg, dev, data)
        config_text = json.dumps({**cfg.key_params(dev),  # fails before the mkdir
                                  "training_code_version": TRAINING_CODE_VERSION}, indent=1)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "config.json").write_text(config_text)
        _save(ckpt, folder)
    start = ckpt["step"]
    every = math.gcd(int(ckpt["record_every"]), cfg.log_every)  # the finest asked for so far
    if start < cfg.n_steps:
        ckpt["record_every"] = every
    params, state, step = ckpt["params"], ckpt["state"], start
    rule = UpdateRule("adamw", cfg.lr, betas=cfg.betas, eps=cfg.eps,
                      weight_decay=cfg.weight_decay)
    bar = progress_bar(total=cfg.n_steps, initial=min(start, cfg.n_steps), enabled=progress,
                       desc=f"grokking p={cfg.p}, {cfg.n_runs} runs")
    t_train, c_train = time.perf_counter(), time.process_time()
    clock = [float(c) for c in ckpt.get("clock", [0.0, 0.0])]  # time of the stored steps
    diverged = torch.full((cfg.n_runs,), -1, device=dev)  # step of a first diverged loss
    limit = DIVERGENCE_FACTOR * torch.as_tensor(ckpt["metrics"]["train_loss"][0], device=dev)
    while step < cfg.n_steps:
        for t in params.values():
            t.requires_grad_(True)
        loss, _ = loss_and_accuracy(params, data[0], data[1])
        diverged = _mark_diverged(diverged, loss, limit, step)  # checked at checkpoints
        grads = torch.autograd.grad(loss.sum(), list(params.values()))
        for t in params.values():
            t.requires_grad_(False)
        step += 1
        lr = _lr_at(cfg, step)
        _adamw(rule, params, dict(zip(params, grads, strict=True)), state, step, lr)
        ckpt["step"] = step
        if step % every == 0:
            _record(ckpt["metrics"], step, params, data)
            bar.set_postfix(test_acc=f"{np.mean(ckpt['metrics']['test_acc'][-1]):.2f}")
        if step % cfg.checkpoint_every == 0 or step == cfg.n_steps:
            with torch.no_grad():  # never store a diverged state, finished or not
                loss, _ = loss_and_accuracy(params, data[0], data[1])
            finite = torch.stack([torch.isfinite(t).flatten(1).all(1) for t in params.values()])
            loss = torch.where(finite.all(0), loss, torch.nan)  # non-finite parameters
            _raise_if_diverged(_mark_diverged(diverged, loss, limit, step), cfg, folder)
            ckpt["clock"] = [clock[0] + time.perf_counter() - t_train,
                             clock[1] + time.process_time() - c_train]
            _save(ckpt, folder)
        bar.update(1)
        if callback is not None:
            callback(step)
    bar.close()
    trained = step - start
    per_step = [(time.perf_counter() - t_train) / trained if trained else float("nan"),
                (time.process_time() - c_train) / trained if trained else float("nan")]
    return _result(cfg, ckpt, folder, start, time.perf_counter() - t0, *per_step)


def _lr_at(cfg: GrokConfig, step: int) -> float:  # linear warm-up, then cfg.lr
    return cfg.lr * min(step / cfg.warmup, 1.0) if cfg.warmup > 0 else cfg.lr


def _mark_diverged(diverged: torch.Tensor, loss: torch.Tensor, limit: torch.Tensor,
                   step: int) -> torch.Tensor:
    """The step at which each run first diverged: a loss NaN, infinite or above ``limit``."""
    loss = loss.detach()
    bad = ~torch.isfinite(loss) | (loss > limit.to(loss.dtype))
    return torch.where(bad & (diverged < 0), step, diverged)


def _raise_if_diverged(diverged: torch.Tensor, cfg: GrokConfig, folder: Path) -> None:
    runs = torch.nonzero(diverged >= 0).flatten().tolist()
    if runs:
        steps = [int(diverged[r]) for r in runs]
        lr = _lr_at(cfg, max(min(steps), 1))
        warm = f" (warming up to lr={cfg.lr:g})" if lr != cfg.lr else ""
        raise GrokDivergenceError(runs, steps, cfg.n_runs, lr, f"{warm}. The run is not saved "
                                  f"as finished: {folder} keeps its last sound checkpoint")


def _adamw(rule: UpdateRule, params: dict[str, torch.Tensor], grads: dict[str, torch.Tensor],
           state: dict[str, torch.Tensor], step: int, lr: float) -> None:
    """One AdamW step of every parameter; ``params`` and the flat ``state`` are updated."""
    with torch.no_grad():
        for name, g in grads.items():
            moments = {"m": state[f"m.{name}"], "v": state[f"v.{name}"]}
            params[name] = rule.step(params[name], g, moments, step, lr)
            state[f"m.{name}"], state[f"v.{name}"] = moments["m"], moments["v"]


def _result(cfg: GrokConfig, ckpt: dict, folder: Path, start: int, seconds: float,
            per_step: float, cpu_per_step: float) -> GrokRun:
    steps, arrays = read_records(ckpt, cfg.n_steps, cfg.log_every, cfg.tols, folder)
    clock = [float(c) for c in ckpt.get("clock", [np.nan, np.nan])]
    params: Mapping[str, torch.Tensor] = ckpt["params"]
    if ckpt["step"] > cfg.n_steps:  # a longer stored run: its newest parameters are not these
        params = StoredParamsUnavailable(cfg.n_steps, ckpt["step"], folder)
    return GrokRun(cfg, steps, **arrays, params=params, params_step=cfg.n_steps,
                   folder=folder, resumed_from=start, seconds=seconds, seconds_per_step=per_step,
                   cpu_seconds_per_step=cpu_per_step, train_seconds=clock[0],
                   train_cpu_seconds=clock[1])


def first_step_above(steps: np.ndarray, values: np.ndarray, threshold: float) -> np.ndarray:
    """``(R,)`` the first recorded step at which ``values`` ``(T, R)`` reaches ``threshold``
    in each run (NaN where it never does)."""
    hit = np.asarray(values) >= threshold
    first = np.where(hit.any(axis=0), hit.argmax(axis=0), -1)
    return np.where(first >= 0, np.asarray(steps, dtype=float)[first], np.nan)
