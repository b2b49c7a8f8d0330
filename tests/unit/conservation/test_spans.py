"""Tests of flowlaws.conservation.spans, against singular values known in advance."""

from __future__ import annotations

import math

import numpy as np
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


def test_lanczos_finds_the_extreme_singular_values_of_a_triangular_r() -> None:
    values = np.geomspace(3.0, 2e-6, 300)
    R = torch.linalg.qr(_with_values(list(values), 300, seed=2), mode="r")[1]
    top, bottom = spans.extreme_singular_values(R)
    assert math.isclose(top, 3.0, rel_tol=1e-8) and math.isclose(bottom, 2e-6, rel_tol=1e-6)
    R[5, 5] = 0.0
    assert spans.extreme_singular_values(R)[1] == 0.0


def test_full_row_rank_is_confirmed_by_lanczos_with_the_values_of_a_full_svd() -> None:
    M = _with_values(list(np.geomspace(1.0, 1e-4, 280)), 400, seed=3)
    fast, exact = spans.Span(M.new_zeros((0, 400))), spans.Span(M.new_zeros((0, 400)), exact=True)
    fast.add(M)
    exact.add(M)
    assert fast.rank == exact.rank == 280
    assert math.isclose(fast.margin, exact.margin, rel_tol=1e-6)
    assert math.isclose(fast.gap, exact.gap, rel_tol=1e-6)
    low = _with_values([1.0] * 279 + [1e-12], 400, seed=3)  # not full rank: falls back
    span = spans.Span(M.new_zeros((0, 400)))
    span.add(low)
    assert span.rank == 279


def test_rank_d_minus_k_is_confirmed_from_the_known_laws_as_bounds() -> None:
    # rows orthogonal to k = 20 known directions: rank D − k, confirmed without a full SVD
    D, k = 320, 20
    gen = torch.Generator().manual_seed(4)
    laws = torch.linalg.qr(torch.randn(D, k, generator=gen, dtype=torch.float64))[0]
    rows = torch.randn(D + 10, D, generator=gen, dtype=torch.float64)
    rows = rows - (rows @ laws) @ laws.T
    fast, exact = spans.Span(rows[:0], laws=laws), spans.Span(rows[:0], exact=True)
    fast.add(rows)
    exact.add(rows)
    assert fast.rank == exact.rank == D - k
    # the bounds: never above the exact values, and here close to them
    assert exact.margin / 1.01 <= fast.margin <= exact.margin * (1 + 1e-6)
    assert fast.gap <= exact.gap * (1 + 1e-6) and fast.gap > spans.MIN_GAP
    extra = torch.cat([rows, laws[:, :1].T])  # a row along a "law": the rank is D − k + 1
    span = spans.Span(rows[:0], laws=laws)
    span.add(extra)
    assert span.rank == D - k + 1


def test_rank_and_basis_spans_the_rows() -> None:
    gen = torch.Generator().manual_seed(5)
    M = torch.randn(3, 9, generator=gen, dtype=torch.float64)
    M = torch.cat([M, M[:1] + 2 * M[1:2]])  # 4 rows of rank 3
    (r, _, _), basis = spans.rank_and_basis(M)
    assert r == 3 and basis.shape == (9, 3)
    torch.testing.assert_close(basis.T @ basis, torch.eye(3, dtype=torch.float64))
    torch.testing.assert_close(M @ basis @ basis.T, M)
