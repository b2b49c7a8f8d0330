"""Tests of flowlaws.conservation.spans, against singular values known in advance."""

from __future__ import annotations

import math

import torch

from flowlaws.conservation import spans


def _with_values(values: list[float], D: int, seed: int = 0) -> torch.Tensor:
    """A ``(len(values), D)`` matrix with exactly these singular values."""
    gen = torch.Generator().manual_seed(seed)
    k = len(values)
    U = torch.linalg.qr(torch.randn(k, k, generator=gen, dtype=torch.float64))[0]
    V = torch.linalg.qr(torch.randn(D, k, generator=gen, dtype=torch.float64))[0]
    return U @ torch.diag(torch.tensor(values, dtype=torch.float64)) @ V.T


def test_rank_gap_and_margin_are_read_at_the_threshold() -> None:
    r, gap, margin = spans.rank(_with_values([1.0, 1e-3, 1e-12], 6))
    assert r == 2
    assert math.isclose(gap, 1e9, rel_tol=1e-3)  # σ_2 / σ_3
    assert math.isclose(margin, 1e-3 / spans.RANK_TOL, rel_tol=1e-9)


def test_a_full_rank_block_reads_its_gap_against_the_floor() -> None:
    r, gap, margin = spans.rank(_with_values([2.0, 1.0], 5))
    assert r == 2 and math.isclose(gap, 1.0 / (torch.finfo(torch.float64).eps * 2.0), rel_tol=1e-6)
    assert math.isclose(margin, 1.0 / (2.0 * spans.RANK_TOL), rel_tol=1e-9)


def test_empty_and_zero_have_rank_zero() -> None:
    assert spans.rank(torch.zeros(0, 4, dtype=torch.float64))[0] == 0
    assert spans.rank(torch.zeros(3, 4, dtype=torch.float64))[0] == 0


def test_a_span_grown_in_blocks_has_the_rank_of_all_its_rows() -> None:
    gen = torch.Generator().manual_seed(1)
    A = torch.randn(3, 8, generator=gen, dtype=torch.float64)
    B = torch.cat([A[:2] + A[2:3], torch.randn(4, 8, generator=gen, dtype=torch.float64)])
    span = spans.Span(A.new_zeros((0, 8)))
    span.add(A, rescale=True)  # wide: kept as rows
    assert span.rank == 3 and span.rows.shape == (3, 8)
    span.add(B)  # tall: kept as the square R of a QR
    assert span.rank == 7 and span.rows.shape == (8, 8)
    everything = torch.cat([A / A.norm(dim=1).pow(2).mean().sqrt(), B])
    assert torch.allclose(
        torch.linalg.svdvals(span.rows), torch.linalg.svdvals(everything), rtol=1e-10
    )
