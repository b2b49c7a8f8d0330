"""The numerical rank of a span of row vectors, with the gap and margin it was read at.

A rank read from singular values is only as good as the drop it was read at: :func:`rank`
returns the rank at the relative threshold :data:`RANK_TOL`, the gap ``σ_r / σ_{r+1}`` and the
margin ``σ_r / (RANK_TOL σ_max)``; :class:`Span` keeps a growing set of rows (the Jacobian,
then each level of brackets) as the ``R`` of a QR, which has the same singular values.

Explained in: book/01_conservation/01_gradient_flow.ipynb
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

__all__ = ["RANK_TOL", "MIN_GAP", "MIN_MARGIN", "Span", "rank", "rank_and_gap"]


RANK_TOL = 1e-9
"""A singular value counts towards a rank when it exceeds ``RANK_TOL · σ_max``."""


MIN_GAP = 1e4
"""A rank is trusted when ``σ_r / σ_{r+1}`` is at least this (``σ_{r+1}`` floored: ``ε σ_max``)."""


MIN_MARGIN = 1e2
"""A rank is trusted when ``σ_r`` is also at least this many times the threshold
``RANK_TOL · σ_max``: with as many rows as the rank, ``σ_{r+1}`` does not exist, the gap is
read against the floor ``ε σ_max``, and only the margin tells a weak direction from a law.
(Measured: 6e5 to 1e9 on the book's small models, 6e4 for MHA(24,4,6,6), 1.4e3 for
MHA(32,4,8,8); 7.7 for an input scaled by 7e-9, whose gap still read 3.5e7.)"""


def rank_and_gap(S: Tensor, tol: float = RANK_TOL) -> tuple[int, float, float]:
    """The numerical rank of singular values ``S`` (descending, shape ``(k,)``), the gap
    ``σ_r / σ_{r+1}`` it was read at (``σ_{r+1}`` floored at ``ε σ_max``), and the margin
    ``σ_r / (tol · σ_max)`` of the smallest kept value above the threshold.

    Explained in: book/01_conservation/01_gradient_flow.ipynb
    """
    if S.numel() == 0 or S[0] == 0:
        return 0, math.inf, math.inf
    r = int((S > tol * S[0]).sum())
    floor = torch.finfo(S.dtype).eps * S[0]
    below = S[r] if r < S.numel() else S.new_zeros(())
    gap = float(S[r - 1] / torch.maximum(below, floor))
    return r, gap, float(S[r - 1] / (tol * S[0]))


def rank(M: Tensor, tol: float = RANK_TOL) -> tuple[int, float, float]:
    """:func:`rank_and_gap` of the singular values of ``M`` (shape ``(rows, D)``).

    Explained in: book/01_conservation/01_gradient_flow.ipynb
    """
    if M.numel() == 0:
        return 0, math.inf, math.inf
    return rank_and_gap(torch.linalg.svdvals(M), tol)


@dataclass
class Span:
    """A running span of row vectors, kept as the ``R`` of a QR (same singular values, ≤ D rows).

    Fewer rows than ``D`` are kept as they are, their singular values read from the square
    ``R`` of their transpose's QR (D = 4,096, 2,048 rows: 4 s of CPU instead of 10). The
    Jacobian block is scaled to unit root-mean-square row norm (``rescale``); brackets come
    already divided by the size of the terms they were computed from
    (:func:`flowlaws.conservation.brackets.bracket`), so that a bracket that vanishes
    identically stays at rounding level and adds no rank.

    Explained in: book/01_conservation/01_gradient_flow.ipynb
    """

    rows: Tensor
    rank: int = 0
    gap: float = math.inf
    margin: float = math.inf

    def add(self, block: Tensor, tol: float = RANK_TOL, rescale: bool = False) -> None:
        """Append ``block`` (shape ``(k, D)``) and read the rank, gap and margin again."""
        if rescale:
            scale = block.norm(dim=1).pow(2).mean().sqrt()
            block = block / scale if scale > 0 else block
        stacked = torch.cat([self.rows, block])
        if stacked.shape[0] < stacked.shape[1]:  # wide: the same values from a small square R
            self.rows, S = stacked, torch.linalg.svdvals(torch.linalg.qr(stacked.T, "r")[1])
        else:
            self.rows = torch.linalg.qr(stacked, mode="r")[1]
            S = torch.linalg.svdvals(self.rows)
        self.rank, self.gap, self.margin = rank_and_gap(S, tol)
