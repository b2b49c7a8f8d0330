"""Tests of flowlaws.percolation.grokking.fourier: key frequencies and the frequency C_max."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from flowlaws.percolation.grokking.fourier import (
    activation_frequencies,
    frequency_cells,
    frequency_cmax,
    neuron_frequencies,
)
from flowlaws.percolation.grokking.model import GrokConfig, init_params


@pytest.mark.parametrize("p", [7, 11, 12])
def test_frequency_cells_are_disjoint_and_leave_out_the_constant(p):
    cells = frequency_cells(p)
    assert cells.shape == (p // 2, p, p)
    assert cells.sum(0).max() == 1 and not cells[:, 0, 0].any()
    if p % 2:
        assert (cells.flatten(1).sum(1) == 8).all()


def test_a_pure_frequency_has_share_one_and_its_key():
    p = 11
    a, b = torch.meshgrid(torch.arange(p), torch.arange(p), indexing="ij")
    acts = torch.stack([1 + torch.cos(2 * torch.pi * k * (a + b) / p + 0.3 * k)
                        for k in (1, 3, 5)]) * torch.tensor([1.0, 2.0, 0.5])[:, None, None]
    out = activation_frequencies(acts)
    np.testing.assert_array_equal(out[:, 0], [1, 3, 5])
    np.testing.assert_allclose(out[:, 1], 1.0, atol=1e-12)
    # a sum of cos(w a) and cos(w b) of one frequency (no product) is all on that frequency too
    np.testing.assert_allclose(activation_frequencies(torch.cos(2 * torch.pi * 4 * a / p)
                                                      + torch.sin(2 * torch.pi * 4 * b / p)),
                               [4.0, 1.0], atol=1e-12)


def test_noise_and_constants_are_not_tuned():
    g = torch.Generator().manual_seed(0)
    noise = torch.randn(20, 31, 31, generator=g, dtype=torch.float64)
    assert (activation_frequencies(noise)[:, 1] < 0.1).all()
    assert activation_frequencies(torch.full((5, 5), 3.0))[1] == 0.0


def _bincount_cmax(freqs: np.ndarray, threshold: float) -> np.ndarray:
    out = []
    for row in freqs.reshape(-1, *freqs.shape[-2:]):
        keys = row[row[:, 1] >= threshold, 0].astype(int)
        out.append(max(1, np.bincount(keys).max()) if len(keys) else 1)
    return np.array(out, dtype=float).reshape(freqs.shape[:-2])


def test_frequency_cmax_is_the_largest_group_of_tuned_neurons_with_one_key():
    rng = np.random.default_rng(1)
    freqs = np.stack([rng.integers(1, 6, size=(3, 4, 30)), rng.random((3, 4, 30))], axis=-1)
    for threshold in (0.3, 0.5, 0.9):
        np.testing.assert_array_equal(frequency_cmax(freqs, threshold),
                                      _bincount_cmax(freqs, threshold))
    freqs[1, 2, 0] = np.nan  # a diverged run
    got = frequency_cmax(freqs, 0.5)
    assert np.isnan(got[1, 2]) and np.isfinite(np.delete(got.ravel(), 6)).all()
    assert frequency_cmax(np.stack([np.ones((2, 5)), np.zeros((2, 5))], -1)).tolist() == [1, 1]
    with pytest.raises(ValueError, match="threshold"):
        frequency_cmax(freqs, 0.0)


def test_neuron_frequencies_of_an_ensemble_chunk_by_chunk():
    cfg = GrokConfig(p=7, d_model=8, n_heads=2, d_mlp=12, n_runs=3, dtype="float64")
    P = init_params(cfg)
    whole = neuron_frequencies(P, 7, chunk=8)
    assert whole.shape == (3, 12, 2) and whole.dtype == torch.float32
    torch.testing.assert_close(neuron_frequencies(P, 7, chunk=1), whole)
    assert ((whole[..., 0] >= 1) & (whole[..., 0] <= 3)).all()
    P["W_in"][1, 0, 0] = torch.nan
    broken = neuron_frequencies(P, 7)
    assert torch.isnan(broken[1]).all() and torch.isfinite(broken[[0, 2]]).all()
