"""Chunks of runs seeded run by run: the ensembles that full presets spread over Dask.

Each function here computes a *chunk* of an ensemble from one seed per run, the contract of
:func:`flowlaws.common.chunks.run_chunked`: run ``r`` starts from a state drawn with
``seeds[r]`` and its gradient noise comes from a generator seeded by a number derived from
``seeds[r]`` (:func:`noise_seed`, :func:`flowlaws.percolation.dynamics.adaptive.run_generators`),
so 2,048 runs computed in 32 chunks on two workers are the runs computed in one process. The
runs of a chunk still advance as one batch of tensor operations
(:func:`flowlaws.percolation.dynamics.adaptive.train_ensemble` with ``optimizer="sgd"``: the
gradient noise of a mini-batch of ``batch_size`` samples). Each returns
``{"C": (r, T) float64 array of C_max, "steps": (T,) int array, "acc": (r,) array}``; a
diverged run's row of ``C`` is NaN.

Explained in: book/02_percolation/08_real_data.ipynb (the full preset) and
05_dsi.ipynb (the search for an SGD cascade).
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import numpy as np
import torch

from flowlaws.percolation.dynamics.adaptive import train_ensemble
from flowlaws.percolation.dynamics.ensemble import TwoLayerShape, ensemble_forward, ensemble_init
from flowlaws.percolation.topology.clusters import cmax_curves
from flowlaws.percolation.toys.planted import planted_pairs, teacher_data

__all__ = ["DATA_SETS", "INITS", "noise_seed", "one_thread", "data_set", "data_ensemble_chunk",
           "teacher_ensemble_chunk"]

DATA_SETS = ("heart", "digits")


def noise_seed(seed: int) -> int:
    """The seed of run ``seed``'s noise generator: another stream than its initial state's."""
    return int(np.random.SeedSequence([int(seed), 1]).generate_state(1)[0])


def data_set(data: str, *, n_images: int = 500, data_seed: int = 0
             ) -> tuple[torch.Tensor, torch.Tensor]:
    """``(X (N, n_in), Y (N, 1))`` float32, standardised, for ``data`` in :data:`DATA_SETS`.

    ``"heart"``: the 303-row Cleveland table (:func:`flowlaws.data.tabular.heart_disease`),
    target ``±1``; ``"digits"``: ``n_images`` of scikit-learn's digits (subset drawn with
    ``data_seed``), target ``+1`` for digits 0–4 and ``−1`` for 5–9 (as II.8's
    ``image_binary``).
    """
    from flowlaws.data.images import digits_images
    from flowlaws.data.tabular import heart_disease, images_as_table, standardize

    if data == "heart":
        table = heart_disease()
        return standardize(table.features).float(), (2 * table.target - 1)[:, None].float()
    if data == "digits":
        images = digits_images()
        t = images_as_table(images.images, images.labels, n=n_images, pool=1, seed=data_seed)
        n_cls = len(images.classes)
        return (standardize(t.features).float(),
                torch.where(t.target < n_cls // 2, 1.0, -1.0)[:, None].float())
    raise ValueError(f"data must be one of {DATA_SETS}, got {data!r}")


@contextmanager
def one_thread() -> Iterator[None]:
    """Torch on one thread inside the block (restored after): a chunk's tensors are small, and
    two threads per chunk on two cores that run two chunks at once are several times slower."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _train(theta0: torch.Tensor, shape: TwoLayerShape, X: torch.Tensor, Y: torch.Tensor,
           seeds: Sequence[int], *, lr: float, batch_size: int, n_steps: int,
           record_every: int) -> dict:
    with one_thread():
        return _train_here(theta0, shape, X, Y, seeds, lr=lr, batch_size=batch_size,
                           n_steps=n_steps, record_every=record_every)


def _train_here(theta0: torch.Tensor, shape: TwoLayerShape, X: torch.Tensor, Y: torch.Tensor,
                seeds: Sequence[int], *, lr: float, batch_size: int, n_steps: int,
                record_every: int) -> dict:
    path = train_ensemble(theta0, shape, X, Y, optimizer="sgd", lr=lr, n_steps=n_steps,
                          batch_size=batch_size, seed=[noise_seed(s) for s in seeds],
                          record_every=record_every)
    out = ensemble_forward(path.final, shape, X)
    acc = ((out[..., 0] > 0) == (Y[:, 0] > 0)).double().mean(dim=1)
    return {"C": np.asarray(cmax_curves(path.theta, shape), dtype=float),
            "steps": np.rint(path.times / lr).astype(int), "acc": acc.numpy()}


def data_ensemble_chunk(seeds: Sequence[int], *, data: str = "heart", width: int = 16,
                        init_scale: float = 0.01, lr: float = 0.1, batch_size: int = 8,
                        n_steps: int = 2000, record_every: int = 2, n_images: int = 500,
                        data_seed: int = 0) -> dict:
    """II.8's ensemble, run by run: tanh networks of ``width`` neurons from a small
    initialisation (``ensemble_init``, ``scale=init_scale``, one seed per run) trained by SGD
    (``lr``, mini-batch noise of ``batch_size``) for ``n_steps`` on :func:`data_set`
    ``(data)``, ``C_max`` recorded every ``record_every`` steps."""
    X, Y = data_set(data, n_images=n_images, data_seed=data_seed)
    shape = TwoLayerShape(X.shape[1], width, 1, "tanh")
    theta0 = torch.cat([ensemble_init(shape, 1, scale=init_scale, seed=int(s),
                                      dtype=torch.float32) for s in seeds])
    return _train(theta0, shape, X, Y, seeds, lr=lr, batch_size=batch_size, n_steps=n_steps,
                  record_every=record_every)


INITS = ("pairs", "small")


def teacher_ensemble_chunk(seeds: Sequence[int], *, init: str = "pairs", n_in: int = 4,
                           width: int = 8, n_teacher: int = 2, n_data: int = 64,
                           label_noise: float = 0.3, rel_noise: float = 0.1,
                           init_scale: float = 0.1, lr: float = 0.1, batch_size: int = 2,
                           n_steps: int = 4000, record_every: int = 4, data_seed: int = 0
                           ) -> dict:
    """Students on teacher data, run by run: ``n_data`` inputs of a ``n_teacher``-neuron tanh
    teacher with ``label_noise`` (:func:`flowlaws.percolation.toys.planted.teacher_data`,
    ``data_seed``), students of ``width`` tanh neurons. ``init="pairs"``: neuron
    ``i + width/2`` starts as a copy of neuron ``i`` up to ``rel_noise``
    (:func:`~flowlaws.percolation.toys.planted.planted_pairs`), so pairs can merge, and merged
    pairs again, over generations; ``init="small"``: independent neurons at scale
    ``init_scale`` (``ensemble_init``), which condense as they grow."""
    if init not in INITS:
        raise ValueError(f"init must be one of {INITS}, got {init!r}")
    X, Y = teacher_data(n_data, n_in, n_teacher, label_noise=label_noise, seed=data_seed)
    shape = TwoLayerShape(n_in, width, 1, "tanh")
    theta0 = torch.cat([planted_pairs(shape, 1, rel_noise=rel_noise, seed=int(s))
                        if init == "pairs" else
                        ensemble_init(shape, 1, scale=init_scale, seed=int(s),
                                      dtype=torch.float32) for s in seeds])
    return _train(theta0, shape, X, Y, seeds, lr=lr, batch_size=batch_size, n_steps=n_steps,
                  record_every=record_every)
