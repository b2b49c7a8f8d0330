"""Grokking on modular addition: an ensemble of one-layer Transformers trained at once.

The task (Power et al., 2022; Nanda et al., 2023): the inputs are the three tokens
``(a, b, =)`` for every pair ``0 ≤ a, b < p`` (the token ``=`` is the number ``p``), the label
is ``(a + b) mod p``; a seeded random ``fraction`` of the ``p²`` pairs is the training set,
the rest the test set. Trained full-batch with AdamW and a strong weight decay, the network
first memorises the training set (train accuracy 1, test accuracy at chance) and only much
later generalises: test accuracy jumps to 1.

The model is Nanda et al.'s one-layer Transformer without layer norm: token and position
embeddings, one attention layer of ``n_heads`` heads (written out with ``einsum``), a ReLU
MLP of ``d_mlp`` neurons with biases, an unembedding to the ``p`` answers, read at the last
position (the ``=`` token; with one layer nothing else reaches the logits, so only that
position's query and MLP are computed). Every parameter carries a leading ensemble dimension ``R``:
``R`` networks with different initial weights (run ``r`` is initialised from seed
``seed + r``) train at once as batched tensors, on the same split.

The optimiser is AdamW as written once for the book (:class:`flowlaws.common.optim.UpdateRule`,
the update of :class:`torch.optim.AdamW`: decoupled weight decay, bias-corrected moments), with
Nanda's linear warm-up of the learning rate over ``warmup`` steps.

Every ``log_every`` steps :func:`train` records, per run, train and test accuracy and loss
and the *merge order parameter* ``C_max``: MLP neuron ``i`` is the vector
``[W_in[i, :], b_in[i], W_out[:, i]]`` and ``C_max`` is the size of the largest group of
neurons linked by relative distances below ``tol`` (:func:`flowlaws.percolation.clusters.cmax`;
NaN for a run whose weights are not finite), for each
``tol`` in ``tols``, and the median distance of a neuron to its nearest neighbour. Every
``checkpoint_every`` steps the whole state (parameters, AdamW moments, step, metrics so far,
RNG state) is written beside the previous checkpoint, then replaces it, in a folder keyed by
what determines the trajectory and by nothing else (:mod:`flowlaws.percolation.grok_store`:
not the library's code, but :data:`TRAINING_CODE_VERSION`, and not the metric-only settings
``log_every`` and ``tols``: C_max is recomputed from stored spanning forests at any ``tols``).
A later call resumes from it, so an interrupted run (a ``KeyboardInterrupt``, a lost Colab
session) loses only the steps since the last checkpoint, a finished run is loaded instead of
trained again, and a corrupt newest checkpoint falls back to the previous one, with a warning.

Explained in: book/02_percolation/07_grokking.ipynb
"""
from __future__ import annotations

import dataclasses
import functools
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch.nn import functional as F

from flowlaws.book.cache import cache_dir as default_cache_dir
from flowlaws.book.progress import bar as progress_bar
from flowlaws.common.checks import as_betas, as_float, as_int
from flowlaws.common.optim import EnsembleDivergenceError, UpdateRule
from flowlaws.percolation.grok_store import (
    GrokStoreWarning,
    _mlp_neurons,
    check_checkpoint,
    load_checkpoint,
    merge_order_parameter,
    nearest_neighbour_distance,
    neuron_forests,
    read_records,
    save_checkpoint,
    trajectory_key,
    warn_older_runs,
)

__all__ = [
    "TRAINING_CODE_VERSION",
    "GrokStoreWarning",
    "PARAM_NAMES",
    "METRICS",
    "DTYPES",
    "GrokConfig",
    "GrokDivergenceError",
    "modular_data",
    "init_params",
    "forward",
    "loss_and_accuracy",
    "merge_order_parameter",
    "nearest_neighbour_distance",
    "GrokRun",
    "run_folder",
    "train",
    "first_step_above",
]


TRAINING_CODE_VERSION = 2
"""The version of the training math (model, loss, AdamW, warm-up, initialisation, data split).
Bump it by hand when a change alters the trajectory: stored runs of another version are then
trained again, with a warning; any other change of the library keeps them."""


PARAM_NAMES = ("W_E", "W_pos", "W_Q", "W_K", "W_V", "W_O", "W_in", "b_in", "W_out", "b_out",
               "W_U")


DTYPES = ("float32", "float64")


METRICS = ("train_acc", "test_acc", "train_loss", "test_loss", "c_max", "nn_distance")


@dataclass(frozen=True)
class GrokConfig:
    """Everything that defines a grokking ensemble; the defaults are Nanda et al.'s setting.

    ``n_steps``, ``checkpoint_every``, ``log_every`` and ``tols`` do not change the trajectory,
    so they are not part of the run's key (:func:`run_folder`): a longer run resumes from a
    shorter one, and other metrics are recomputed from the stored records.
    """

    p: int = 113                 # the modulus; p + 1 tokens (0..p-1 and '=')
    fraction: float = 0.3        # fraction of the p² pairs used for training
    d_model: int = 128           # residual-stream width
    n_heads: int = 4             # attention heads, each of width d_model // n_heads
    d_mlp: int = 512             # MLP neurons
    lr: float = 1e-3             # AdamW learning rate (after warm-up)
    weight_decay: float = 1.0    # AdamW decoupled weight decay
    betas: tuple[float, float] = (0.9, 0.98)
    eps: float = 1e-8
    warmup: int = 10             # steps of linear learning-rate warm-up
    n_runs: int = 4              # ensemble size R
    seed: int = 0                # run r is initialised from seed + r
    data_seed: int = 0           # seed of the train/test split (shared by the ensemble)
    n_steps: int = 10_000        # full-batch steps
    log_every: int = 50          # steps between recorded metrics
    checkpoint_every: int = 1000  # steps between checkpoints
    tols: tuple[float, ...] = (0.05,)  # relative distances below which MLP neurons merge
    dtype: str = "float32"

    def __post_init__(self) -> None:
        # refuse what cannot train before any folder is made; numpy scalars become Python
        # numbers (the config is written as JSON)
        fix = functools.partial(object.__setattr__, self)  # the dataclass is frozen
        for name in ("p", "d_model", "n_heads", "d_mlp", "n_runs", "log_every",
                     "checkpoint_every"):
            fix(name, as_int(name, getattr(self, name), minimum=1))
        for name in ("warmup", "n_steps"):
            fix(name, as_int(name, getattr(self, name), minimum=0))
        for name in ("seed", "data_seed"):
            fix(name, as_int(name, getattr(self, name)))
        if self.p < 2:
            raise ValueError(f"p must be at least 2, got {self.p}")
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}")
        fix("fraction", as_float("fraction", self.fraction))
        if not 0 < self.fraction < 1:
            raise ValueError(f"fraction must lie in (0, 1), got {self.fraction}")
        if not 0 < round(self.fraction * self.p**2) < self.p**2:
            raise ValueError(f"fraction={self.fraction} of p²={self.p**2} pairs leaves an "
                             "empty training or test set")
        fix("lr", as_float("lr", self.lr, positive=True))
        fix("eps", as_float("eps", self.eps, positive=True))
        fix("weight_decay", as_float("weight_decay", self.weight_decay, nonnegative=True))
        fix("betas", as_betas("betas", self.betas))
        tols = self.tols if isinstance(self.tols, tuple | list) else (self.tols,)
        fix("tols", tuple(as_float(f"tols[{i}]", t, positive=True) for i, t in enumerate(tols)))
        if not tols or max(self.tols) >= 1:
            raise ValueError(f"tols must be relative distances in (0, 1), got {self.tols}")
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {DTYPES}, got {self.dtype!r} (half precision "
                             "overflows in training and underflows AdamW's eps)")

    def key_params(self, device: torch.device) -> dict:
        """The parameters that define the trajectory (the run folder's key)."""
        d = dataclasses.asdict(self)
        for k in ("n_steps", "checkpoint_every", "log_every", "tols"):
            d.pop(k)
        d["betas"] = list(d["betas"])
        d["device"] = torch.device(device).type
        return d


class GrokDivergenceError(EnsembleDivergenceError):
    """A grokking run whose loss became NaN or infinite (``runs``, ``steps``, ``lr``); it is
    not saved: the run folder keeps its last finite checkpoint."""


def modular_data(p: int, fraction: float, seed: int = 0, device: torch.device | str = "cpu"
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(x_train, y_train, x_test, y_test)``: tokens ``(n, 3)`` rows ``(a, b, p)``, labels
    ``(a + b) mod p``; a random ``round(fraction · p²)`` pairs (permutation seeded by
    ``seed``) are the training set."""
    a, b = torch.meshgrid(torch.arange(p), torch.arange(p), indexing="ij")
    x = torch.stack([a.flatten(), b.flatten(), torch.full((p * p,), p)], dim=1)
    y = (x[:, 0] + x[:, 1]) % p
    perm = torch.randperm(p * p, generator=torch.Generator().manual_seed(seed))
    n_train = round(fraction * p * p)
    tr, te = perm[:n_train], perm[n_train:]
    return tuple(t.to(device) for t in (x[tr], y[tr], x[te], y[te]))


def _shapes(cfg: GrokConfig) -> dict[str, tuple[int, ...]]:  # one network's
    d, H, m, p = cfg.d_model, cfg.n_heads, cfg.d_mlp, cfg.p
    return {"W_E": (p + 1, d), "W_pos": (3, d), "W_Q": (H, d // H, d), "W_K": (H, d // H, d),
            "W_V": (H, d // H, d), "W_O": (d, d), "W_in": (m, d), "b_in": (m,),
            "W_out": (d, m), "b_out": (d,), "W_U": (d, p)}


def init_params(cfg: GrokConfig, device: torch.device | str = "cpu") -> dict[str, torch.Tensor]:
    """Nanda et al.'s initialisation, ``R = cfg.n_runs`` independent networks stacked.

    Gaussian weights of standard deviation ``1/√d_model`` (``1/√p`` for the unembedding),
    zero biases. Shapes (leading ``R``): ``W_E (p+1, d)``, ``W_pos (3, d)``,
    ``W_Q, W_K, W_V (H, d_head, d)``, ``W_O (d, H·d_head)``, ``W_in (d_mlp, d)``,
    ``b_in (d_mlp,)``, ``W_out (d, d_mlp)``, ``b_out (d,)``, ``W_U (d, p)``.
    """
    shapes, d, p = _shapes(cfg), cfg.d_model, cfg.p
    dtype = getattr(torch, cfg.dtype)
    runs = []
    for r in range(cfg.n_runs):
        g = torch.Generator().manual_seed(cfg.seed + r)
        one = {}
        for name, shape in shapes.items():
            scale = 0.0 if name.startswith("b_") else 1 / math.sqrt(p if name == "W_U" else d)
            one[name] = torch.randn(shape, generator=g, dtype=torch.float64) * scale
        runs.append(one)
    return {k: torch.stack([o[k] for o in runs]).to(device=device, dtype=dtype)
            for k in PARAM_NAMES}


def forward(params: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """Logits ``(R, n, p)`` of the ensemble at the last position, for tokens ``x`` ``(n, 3)``.

    Attention, written out: the last position's query ``q = W_Q e₂`` (``e_t`` the embedding
    of position ``t``), keys ``k_t = W_K e_t`` and values ``v_t = W_V e_t``, per head
    ``attn_t = softmax_t(q·k_t/√d_head)``, output ``W_O Σ_t attn_t v_t`` (the last position
    sees all three, so the causal mask changes nothing there).
    """
    P = params
    R, H, dh, d = P["W_Q"].shape
    resid = P["W_E"][:, x] + P["W_pos"][:, None]                   # (R, n, 3, d)
    last = resid[:, :, -1]                                          # (R, n, d)
    q = torch.einsum("rnd,rjd->rnj", last, P["W_Q"].reshape(R, H * dh, d))
    k = torch.einsum("rntd,rjd->rntj", resid, P["W_K"].reshape(R, H * dh, d))
    v = torch.einsum("rntd,rjd->rntj", resid, P["W_V"].reshape(R, H * dh, d))
    q, k, v = q.view(R, -1, 1, H, dh), k.view(R, -1, 3, H, dh), v.view(R, -1, 3, H, dh)
    attn = torch.softmax((q * k).sum(-1) / math.sqrt(dh), dim=2)  # (R, n, 3, H)
    z = (attn[..., None] * v).sum(2).reshape(R, -1, H * dh)
    last = last + torch.einsum("rnj,rdj->rnd", z, P["W_O"])
    hidden = F.relu(torch.einsum("rnd,rmd->rnm", last, P["W_in"]) + P["b_in"][:, None])
    last = last + torch.einsum("rnm,rdm->rnd", hidden, P["W_out"]) + P["b_out"][:, None]
    return torch.einsum("rnd,rdc->rnc", last, P["W_U"])


def loss_and_accuracy(params: dict[str, torch.Tensor], x: torch.Tensor, y: torch.Tensor
                      ) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-run mean cross-entropy (log-softmax in float64, as Nanda et al.) and accuracy,
    both ``(R,)``."""
    logits = forward(params, x)
    logp = torch.log_softmax(logits.double(), dim=-1)
    loss = -logp.gather(-1, y.expand(logits.shape[0], -1)[..., None]).squeeze(-1).mean(-1)
    acc = (logits.argmax(-1) == y).double().mean(-1)
    return loss, acc


@dataclass
class GrokRun:
    """What :func:`train` returns. ``steps`` ``(T,)``; ``train_acc``, ``test_acc``,
    ``train_loss``, ``test_loss``, ``nn_distance`` ``(T, R)``; ``c_max`` ``(T, R, n_tols)``
    (one column per ``config.tols``); ``params`` the latest stored parameters;
    ``folder`` the run folder; ``resumed_from`` the step it resumed from (0: fresh);
    ``seconds`` the wall time of this call; ``seconds_per_step`` (wall) and
    ``cpu_seconds_per_step`` (this process's CPU time: on a shared machine, closer to what the
    step costs alone) of the steps it trained (NaN if none)."""

    config: GrokConfig
    steps: np.ndarray
    train_acc: np.ndarray
    test_acc: np.ndarray
    train_loss: np.ndarray
    test_loss: np.ndarray
    c_max: np.ndarray
    nn_distance: np.ndarray
    params: dict[str, torch.Tensor]
    folder: Path
    resumed_from: int
    seconds: float
    seconds_per_step: float
    cpu_seconds_per_step: float


def run_folder(cfg: GrokConfig, device: torch.device | str = "cpu",
               cache_dir: Path | str | None = None) -> Path:
    """The folder of a run: ``<cache_dir>/grokking-<key of the trajectory's parameters>``."""
    base = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    return base / f"grokking-{trajectory_key(cfg.key_params(torch.device(device)))}"


def _record(metrics: dict[str, list], step: int, params, data) -> None:
    with torch.no_grad():
        tr_loss, tr_acc = loss_and_accuracy(params, data[0], data[1])
        te_loss, te_acc = loss_and_accuracy(params, data[2], data[3])
    metrics["steps"].append(step)
    for name, val in zip(METRICS[:4], (tr_acc, te_acc, tr_loss, te_loss), strict=True):
        metrics[name].append(val.cpu().tolist())
    metrics["forests"].append(neuron_forests(*_mlp_neurons(params)))  # C_max at any tol
    metrics["nn_distance"].append(nearest_neighbour_distance(params).tolist())


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
            "metrics": {"steps": [], "forests": [], **{n: [] for n in METRICS if n != "c_max"}},
            "record_every": cfg.log_every, "training_code_version": TRAINING_CODE_VERSION}
    _record(ckpt["metrics"], 0, params, data)
    return ckpt


def _save(ckpt: dict, folder: Path) -> None:
    ckpt["rng"] = torch.get_rng_state()
    save_checkpoint(ckpt, folder)


def train(cfg: GrokConfig, *, device: torch.device | str | None = None,
          cache_dir: Path | str | None = None, progress: bool = True,
          callback: Callable[[int], None] | None = None) -> GrokRun:
    """Train (or resume, or load) the ensemble of ``cfg`` up to ``cfg.n_steps`` steps.

    The checkpoint ``checkpoint.pt`` in :func:`run_folder` is read with
    ``torch.load(..., weights_only=True)``; training restarts from its step (from the previous
    checkpoint, with a :class:`GrokStoreWarning` naming the file, when it cannot be read).
    ``callback(step)`` is called after every step (the tests use it to interrupt a run). A
    progress bar (:func:`flowlaws.book.progress.bar`) shows the steps and the ensemble's mean
    test accuracy. A run whose loss becomes NaN or infinite raises
    :class:`GrokDivergenceError` (runs, step, lr) and is not saved: the folder keeps its last
    finite checkpoint.
    """
    t0 = time.perf_counter()
    dev = torch.device(device or "cpu")
    folder = run_folder(cfg, dev, cache_dir)
    data = modular_data(cfg.p, cfg.fraction, cfg.data_seed, dev)
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
    diverged = torch.full((cfg.n_runs,), -1, device=dev)  # step of a first non-finite loss
    while step < cfg.n_steps:
        for t in params.values():
            t.requires_grad_(True)
        loss, _ = loss_and_accuracy(params, data[0], data[1])
        diverged = _mark_diverged(diverged, loss, step)  # no sync: checked at checkpoints
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
            _raise_if_diverged(_mark_diverged(diverged, loss, step), cfg, folder)
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


def _mark_diverged(diverged: torch.Tensor, loss: torch.Tensor, step: int) -> torch.Tensor:
    return torch.where(~torch.isfinite(loss.detach()) & (diverged < 0), step, diverged)


def _raise_if_diverged(diverged: torch.Tensor, cfg: GrokConfig, folder: Path) -> None:
    runs = torch.nonzero(diverged >= 0).flatten().tolist()
    if runs:
        steps = [int(diverged[r]) for r in runs]
        lr = _lr_at(cfg, max(min(steps), 1))
        warm = f" (warming up to lr={cfg.lr:g})" if lr != cfg.lr else ""
        raise GrokDivergenceError(runs, steps, cfg.n_runs, lr, f"{warm}. The run is not saved "
                                  f"as finished: {folder} keeps its last finite checkpoint")


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
    return GrokRun(cfg, steps, **arrays, params=ckpt["params"],
                   folder=folder, resumed_from=start, seconds=seconds, seconds_per_step=per_step,
                   cpu_seconds_per_step=cpu_per_step)


def first_step_above(steps: np.ndarray, values: np.ndarray, threshold: float) -> np.ndarray:
    """``(R,)`` the first recorded step at which ``values`` ``(T, R)`` reaches ``threshold``
    in each run (NaN where it never does)."""
    hit = np.asarray(values) >= threshold
    first = np.where(hit.any(axis=0), hit.argmax(axis=0), -1)
    return np.where(first >= 0, np.asarray(steps, dtype=float)[first], np.nan)
