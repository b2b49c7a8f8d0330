"""The run folder of a grokking ensemble: its key, its checkpoints, and C_max at any tolerance.

**The key.** A run folder is keyed by what determines the trajectory: the configuration's
fields that change it (not ``n_steps``, ``checkpoint_every``, ``log_every`` or ``tols``), the
device type, and nothing of the library's code. The training code declares its version
(:data:`flowlaws.percolation.grokking.training.TRAINING_CODE_VERSION`), stored in every checkpoint:
a
run made by another version is not resumed (its trajectory would mix two codes) but set aside
as ``checkpoint-v<old>.pt``, with a :class:`GrokStoreWarning` naming the folder and both
versions. An upgrade of the library that leaves the training math alone keeps every run.

**Checkpoints.** ``checkpoint.pt`` is the newest, ``checkpoint.prev.pt`` the one before. A
new checkpoint is written beside them (a temporary file, fsynced), the newest becomes the
previous one, then the new one replaces it: at every instant one good checkpoint exists. A
checkpoint that cannot be read (truncated, corrupt, from a foreign file) is named in a
warning and the previous one is used; when neither can be read the run starts again, with a
warning. Loading is always ``torch.load(..., weights_only=True)``. A checkpoint whose
parameters hold NaN or inf, or whose version is not an integer, is named as corrupt the same
way: it is never a result.

**One writer.** :func:`run_lock` holds an exclusive lock (``fcntl.flock`` on ``train.lock`` in
the run folder) while a run trains: a second ``train`` of the same configuration and folder
waits for the first (with a warning naming the folder), then loads or extends its result, so
no work is lost. :func:`check_run_paths` refuses a run folder that is a file, or a checkpoint
path that is a folder or not a regular file, before training starts.

**Metrics recomputable without training.** Every record stores, per run, the minimum spanning
forest of the MLP neurons' relative distances (live neurons only): the components of the
graph "relative distance below ``tol``" are those of the forest's edges below ``tol``, so
``C_max`` at *any* tolerance is computed from the stored forests (:func:`cmax_from_forests`)
and a change of ``tols`` never retrains. Records are kept at the finest ``log_every`` used so
far; a coarser ``log_every`` is read from them.

Explained in: book/02_percolation/07_grokking.ipynb
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch

from flowlaws.book.cache import remove_stale_partials, short_reason
from flowlaws.percolation.topology.clusters import cmax, dead_neurons, relative_distance

__all__ = ["GrokStoreWarning", "trajectory_key", "neuron_forests", "cmax_from_forests",
           "save_checkpoint", "load_checkpoint", "check_checkpoint", "read_records",
           "merge_order_parameter", "nearest_neighbour_distance", "warn_older_runs",
           "run_lock", "check_run_paths"]

NEWEST, PREVIOUS = "checkpoint.pt", "checkpoint.prev.pt"
LOCK = "train.lock"


class GrokStoreWarning(UserWarning):
    """A stored run could not be used as it is: unreadable, or made by other training code."""


def trajectory_key(key_params: dict) -> str:
    """A hex key of the parameters that determine a trajectory (no library fingerprint)."""
    blob = json.dumps(key_params, sort_keys=True, allow_nan=False)
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


def neuron_forests(V: torch.Tensor, U: torch.Tensor) -> torch.Tensor:
    """``(R, width − 1, 3)`` float64: per run, the edges ``(i, j, distance)`` of the minimum
    spanning forest of the live neurons' relative distances (rows ``(−1, −1, inf)`` pad a
    forest with fewer edges); all NaN for a run whose weights are not finite."""
    R, width = V.shape[0], V.shape[1]
    out = torch.full((R, width - 1, 3), float("nan"), dtype=torch.float64)
    out[..., :2], out[..., 2] = -1.0, float("inf")
    dist, alive = relative_distance(V, U).double().cpu(), ~dead_neurons(V, U).cpu()
    finite = (torch.isfinite(V).flatten(1).all(1) & torch.isfinite(U).flatten(1).all(1)).cpu()
    for r in range(R):
        if not finite[r]:
            out[r] = float("nan")
            continue
        d = dist[r].numpy()
        live = np.flatnonzero(alive[r].numpy())
        edges = _prim(np.minimum(d, d.T)[np.ix_(live, live)])
        if len(edges):
            edges[:, :2] = live[edges[:, :2].astype(int)]
            out[r, : len(edges)] = torch.as_tensor(edges)
    return out


def _prim(d: np.ndarray) -> np.ndarray:
    """``(n − 1, 3)`` the edges ``(i, j, d_ij)`` of a minimum spanning tree of the complete
    graph with distances ``d`` ``(n, n)`` (Prim; exact zeros are edges like any other)."""
    n = len(d)
    if n < 2:
        return np.zeros((0, 3))
    in_tree, best, parent = np.zeros(n, bool), d[0].astype(float), np.zeros(n, int)
    in_tree[0] = True
    edges = []
    for _ in range(n - 1):
        k = int(np.argmin(np.where(in_tree, np.inf, best)))
        edges.append((parent[k], k, best[k]))
        in_tree[k] = True
        closer = (d[k] < best) & ~in_tree
        best, parent = np.where(closer, d[k], best), np.where(closer, k, parent)
    return np.array(edges, dtype=float)


def cmax_from_forests(forests: torch.Tensor | np.ndarray, tols: tuple[float, ...]
                      ) -> np.ndarray:
    """``(..., R, n_tols)`` C_max from stored forests ``(..., R, width − 1, 3)``: the largest
    group of neurons joined by forest edges shorter than ``tol`` (NaN for a diverged run).

    Equal to :func:`flowlaws.percolation.topology.clusters.cmax` of the weights (the tests check
    it).
    """
    f = np.asarray(forests, dtype=float)
    lead, (n_edges, _) = f.shape[:-2], f.shape[-2:]
    flat = f.reshape(-1, n_edges, 3)
    out = np.empty((len(flat), len(tols)))
    for k, edges in enumerate(flat):
        if np.isnan(edges[:, 2]).all():
            out[k] = np.nan
            continue
        order = np.argsort(edges[:, 2], kind="stable")
        parent, size, best = list(range(n_edges + 1)), [1] * (n_edges + 1), 1
        heights, biggest = [], []
        for i, j, d in edges[order]:
            if not np.isfinite(d):
                break
            a, b = _root(parent, int(i)), _root(parent, int(j))
            if a != b:
                parent[a] = b
                size[b] += size[a]
                best = max(best, size[b])
            heights.append(d)
            biggest.append(best)
        for t, tol in enumerate(tols):  # the merges strictly below tol
            n = int(np.searchsorted(np.asarray(heights), tol, side="left"))
            out[k, t] = biggest[n - 1] if n else 1.0
    return out.reshape(*lead, len(tols))


# ---------------------------------------------------------------------------------------------
# the MLP neurons of a grokking ensemble and their merge order parameter


def _mlp_neurons(params: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """The MLP as ``V = [W_in, b_in]`` ``(R, d_mlp, d_model + 1)`` and ``U = W_out``, float64 on
    the parameters' device (distances are computed there; only the forests come to the CPU)."""
    V = torch.cat([params["W_in"], params["b_in"][..., None]], dim=-1).detach().double()
    return V, params["W_out"].detach().double()


def _neuron_distances(params: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """``(R, d_mlp, d_mlp)`` relative distances of the MLP neurons and ``(R, d_mlp)`` alive."""
    V, U = _mlp_neurons(params)
    return relative_distance(V, U), ~dead_neurons(V, U)


def merge_order_parameter(params: dict[str, torch.Tensor], tols: tuple[float, ...] | float
                          ) -> np.ndarray:
    """``(R, n_tols)`` the largest group of merged MLP neurons of every run, per tolerance
    (``(R,)`` for one float ``tols``); NaN for a run whose weights are not finite.

    Neuron ``i`` is ``[W_in[i, :], b_in[i], W_out[:, i]]``; ``C_max`` is
    :func:`flowlaws.percolation.topology.clusters.cmax` of these vectors at each ``tol``.
    """
    V, U = _mlp_neurons(params)
    out = np.stack([cmax(V, U, tol).cpu().numpy() for tol in np.atleast_1d(tols)], axis=1)
    return out[:, 0] if np.ndim(tols) == 0 else out


def nearest_neighbour_distance(params: dict[str, torch.Tensor]) -> np.ndarray:
    """``(R,)`` the median over live MLP neurons of the relative distance to the nearest other
    neuron: a continuous measure of how close the neurons are to merging."""
    dist, alive = _neuron_distances(params)
    eye = torch.eye(dist.shape[1], dtype=torch.bool, device=dist.device)
    far = torch.where(alive[:, None, :] & ~eye, dist, torch.inf)
    nn = torch.where(alive, far.min(-1).values, torch.nan)
    return nn.nanmedian(-1).values.cpu().numpy()


# ---------------------------------------------------------------------------------------------
# files


def _root(parent: list[int], a: int) -> int:  # union-find with path halving
    while parent[a] != a:
        parent[a] = parent[parent[a]]
        a = parent[a]
    return a


def _fsync_save(obj: dict, path: Path) -> None:
    handle, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".partial")
    try:
        with os.fdopen(handle, "wb") as f:
            torch.save(obj, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def save_checkpoint(ckpt: dict, folder: Path) -> None:
    """Write ``ckpt`` as the newest checkpoint of ``folder``; the newest so far becomes the
    previous one. At every instant a complete checkpoint exists."""
    folder.mkdir(parents=True, exist_ok=True)
    remove_stale_partials(folder)
    staged = folder / (NEWEST + ".new")
    _fsync_save(ckpt, staged)
    if (folder / NEWEST).exists():
        os.replace(folder / NEWEST, folder / PREVIOUS)
    os.replace(staged, folder / NEWEST)


def _read(path: Path, device: torch.device, check) -> tuple[dict | None, str | None]:
    try:
        ckpt = torch.load(path, weights_only=True, map_location=device)
        check(ckpt)
        return ckpt, None
    except FileNotFoundError:
        return None, None
    except Exception as error:  # noqa: BLE001 - any unreadable checkpoint is named, not raised
        return None, short_reason(error)


def load_checkpoint(folder: Path, device: torch.device, version: int, check) -> dict | None:
    """The newest readable checkpoint of ``folder`` made by training code ``version``, or
    ``None`` (start again). ``check(ckpt)`` raises when a checkpoint lacks what training needs.

    An unreadable newest checkpoint is named in a warning and the previous one used; a
    checkpoint of another training-code version is set aside as ``checkpoint-v<old>.pt``.
    """
    staged = folder / (NEWEST + ".new")
    if staged.exists():  # a save killed before its replaces finished: the staged file is whole
        if (folder / NEWEST).exists():
            os.replace(folder / NEWEST, folder / PREVIOUS)
        os.replace(staged, folder / NEWEST)
    for name in (NEWEST, PREVIOUS):
        ckpt, reason = _read(folder / name, device, check)
        if reason is not None:
            fallback = ("the previous checkpoint is used" if name == NEWEST else
                        "the run starts again from step 0")
            warnings.warn(f"checkpoint {folder / name} could not be read or is corrupt "
                          f"({reason}); {fallback}", GrokStoreWarning, stacklevel=3)
            continue
        if ckpt is None:
            continue
        stored = ckpt.get("training_code_version", 0)
        if isinstance(stored, bool) or not isinstance(stored, int):
            warnings.warn(f"checkpoint {folder / name} is corrupt (its training_code_version is "
                          f"{stored!r}, not an integer); it is not used", GrokStoreWarning,
                          stacklevel=3)
            continue
        if stored != version:
            kept = folder / f"checkpoint-v{stored}.pt"
            os.replace(folder / name, kept)
            (folder / PREVIOUS).unlink(missing_ok=True)
            warnings.warn(f"the run in {folder} was trained by training code version {stored}; "
                          f"this is version {version}, whose trajectory differs: training starts "
                          f"again (the old checkpoint is kept as {kept.name})",
                          GrokStoreWarning, stacklevel=3)
            return None
        return ckpt
    return None


def check_run_paths(folder: Path) -> None:
    """Refuse, before training, a run folder that is not a folder and a checkpoint path that
    is a folder or another non-file: a save there would fail and lose the steps since the last
    checkpoint. The error names the path."""
    if folder.exists() and not folder.is_dir():
        raise NotADirectoryError(f"the run folder {folder} is a file, not a folder; move it away "
                                 "and train again")
    for name in (NEWEST, PREVIOUS, NEWEST + ".new", LOCK, "config.json"):
        path = folder / name
        if (path.exists() or path.is_symlink()) and not path.is_file():
            raise IsADirectoryError(f"{path} is {'a folder' if path.is_dir() else 'not a file'}, "
                                    "where the run keeps a file; move it away and train again")


@contextlib.contextmanager
def run_lock(folder: Path) -> Iterator[None]:
    """Hold the run's exclusive lock (``flock`` on ``folder/train.lock``) while the block runs;
    wait, with a :class:`GrokStoreWarning` naming the folder, while another process holds it.
    Without ``fcntl`` (Windows) no lock is taken."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / LOCK, "a+b") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            warnings.warn(f"another process is training the run in {folder}; waiting for it to "
                          "finish, then its result is loaded or extended", GrokStoreWarning,
                          stacklevel=3)
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def check_checkpoint(ckpt: dict, shapes: dict[str, tuple], metrics: list[str]) -> None:
    """Raise when ``ckpt`` lacks what training needs: the fields, parameters and AdamW moments
    of ``shapes``, the ``metrics`` records, the spanning forests and the key frequencies."""
    missing = {"step", "params", "state", "rng", "metrics", "record_every"} - set(ckpt)
    if missing:
        raise KeyError(f"it lacks {sorted(missing)}")
    for k, shape in shapes.items():
        if tuple(ckpt["params"][k].shape) != tuple(shape):
            raise ValueError(f"its {k} has shape {tuple(ckpt['params'][k].shape)}, not {shape}")
        if not torch.isfinite(ckpt["params"][k]).all():
            raise ValueError(f"its parameter {k} holds NaN or inf: a corrupt or diverged state, "
                             "never a result")
        for m in "mv":
            if ckpt["state"][f"{m}.{k}"].shape != ckpt["params"][k].shape:
                raise ValueError(f"its AdamW moment {m}.{k} has the wrong shape")
    lengths = {len(ckpt["metrics"][n]) for n in ("steps", "forests", "freqs", *metrics)}
    if len(lengths) != 1:
        raise KeyError("its metrics records have different lengths")


def read_records(ckpt: dict, n_steps: int, log_every: int, tols: tuple[float, ...],
                 folder: Path) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """``(steps, {metric: array})`` of the stored records at every ``log_every`` steps up to
    ``n_steps``, ``c_max`` computed at ``tols`` from the stored forests, ``freqs`` the stored key
    frequencies ``(T, R, d_mlp, 2)``. Steps asked for but
    recorded more coarsely are left out, with a warning naming ``folder``."""
    m, steps = ckpt["metrics"], np.asarray(ckpt["metrics"]["steps"])
    keep = (steps <= n_steps) & (steps % log_every == 0)
    asked = np.arange(0, min(n_steps, ckpt["step"]) + 1, log_every)
    if len(asked) > keep.sum():
        warnings.warn(f"the run in {folder} was recorded every {ckpt['record_every']} steps "
                      f"before step {ckpt['step']}: log_every={log_every} asks for "
                      f"{len(asked) - keep.sum()} steps it did not record, left out (delete the "
                      "folder to train again at this resolution)", GrokStoreWarning, stacklevel=4)
    arrays = {n: np.asarray(v, dtype=float)[keep] for n, v in m.items()
              if n not in ("steps", "forests", "freqs")}
    # records restored from a checkpoint loaded onto a GPU sit there, new ones on the CPU
    forests = torch.stack([f.cpu() for f in m["forests"]]).numpy()[keep]
    arrays["freqs"] = torch.stack([f.cpu() for f in m["freqs"]]).numpy()[keep]
    arrays["c_max"] = cmax_from_forests(forests, tols)
    return steps[keep], arrays


def warn_older_runs(folder: Path, key_params: dict) -> None:
    """Warn about folders beside ``folder`` that hold the same trajectory stored by a flowlaws
    older than training-code versions (keyed by a hash of the whole library): they cannot be
    resumed, so the reader learns why training starts again."""
    same = dict(key_params)
    try:
        others = [p for p in folder.parent.glob("grokking-*/config.json") if p.parent != folder]
    except OSError:
        return
    for path in others:
        try:
            stored = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if "training_code_version" in stored:
            continue
        if {k: v for k, v in stored.items() if k not in ("tols", "log_every")} == same:
            warnings.warn(f"{path.parent} holds a run of this configuration stored by an older "
                          "flowlaws (before training-code versions), which cannot be resumed: "
                          f"training starts again in {folder}; delete the old folder when done",
                          GrokStoreWarning, stacklevel=3)
