"""The numerical rank of a span of row vectors, with the gap and margin it was read at.

A rank read from singular values is only as good as the drop it was read at: :func:`rank`
returns the rank at the relative threshold :data:`RANK_TOL`, the gap ``σ_r / σ_{r+1}`` and the
margin ``σ_r / (RANK_TOL σ_max)``; :class:`Span` keeps a growing set of rows (the Jacobian,
then each level of brackets) as the ``R`` of a QR, which has the same singular values.

All ``D`` singular values of a ``D``-square ``R`` cost ``O(D³)`` with a large constant (6 s of
CPU at D = 4,096, most of a count). A rank that is expected, full row rank or ``D − k`` when
``k`` independent laws are known to hold, needs only the extreme ones: :class:`Span` reads
``σ_max`` and ``σ_min`` by Lanczos (:func:`extreme_singular_values`) and falls back on all of
them when the expected rank is not confirmed.

Explained in: book/01_conservation/01_gradient_flow.ipynb
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from scipy.sparse.linalg import ArpackNoConvergence, LinearOperator, eigsh
from torch import Tensor

__all__ = [
    "RANK_TOL",
    "MIN_GAP",
    "MIN_MARGIN",
    "LANCZOS_MIN",
    "Span",
    "extreme_singular_values",
    "rank",
    "rank_and_basis",
    "rank_and_gap",
]


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


LANCZOS_MIN = 256
"""Below this size a square ``R``'s singular values are all computed: Lanczos gains nothing."""


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


def extreme_singular_values(R: Tensor, tol: float = 1e-10) -> tuple[float, float]:
    """``(σ_max, σ_min)`` of a square upper-triangular ``R`` (``(n, n)``, ``n ≥ 3``), by Lanczos.

    :func:`scipy.sparse.linalg.eigsh` (ARPACK) finds the largest eigenvalue of ``RᵀR`` and of
    ``(RᵀR)⁻¹ = R⁻¹R⁻ᵀ`` (two triangular solves per product, ``O(n²)``), each to relative
    accuracy ``tol``; a fixed start vector makes the result reproducible. ``σ_min`` is 0 when
    ``R`` has a zero on its diagonal or the solves overflow.

    Explained in: book/01_conservation/01_gradient_flow.ipynb
    """
    n = R.shape[0]
    start = np.random.default_rng(0).standard_normal(n)

    def largest(product) -> float:
        def matvec(v: np.ndarray) -> np.ndarray:
            x = torch.from_numpy(np.ascontiguousarray(v, dtype=np.float64).reshape(n, 1))
            return product(x.to(R.dtype)).numpy().ravel()

        operator = LinearOperator((n, n), matvec=matvec, dtype=np.float64)
        return float(eigsh(operator, k=1, which="LA", v0=start, tol=tol,
                           return_eigenvectors=False)[0])

    def inverse(x: Tensor) -> Tensor:
        y = torch.linalg.solve_triangular(R.T, x, upper=False)
        return torch.linalg.solve_triangular(R, y, upper=True)

    top = math.sqrt(max(largest(lambda x: R.T @ (R @ x)), 0.0))
    if torch.any(R.diagonal() == 0):
        return top, 0.0
    with np.errstate(over="ignore", invalid="ignore"):
        inv = largest(inverse)
    return top, (1.0 / math.sqrt(inv) if math.isfinite(inv) and inv > 0 else 0.0)


def rank_and_basis(M: Tensor, tol: float = RANK_TOL) -> tuple[tuple[int, float, float], Tensor]:
    """:func:`rank` of ``M`` (``(m, D)``) and an orthonormal basis of its row space, ``(D, r)``.

    With fewer rows than columns, from the QR ``Mᵀ = QR`` and the SVD of the small ``Rᵀ``
    (``M = U S Vᵀ Qᵀ``: the basis is ``Q V``), 0.1 s instead of 1.5 s for a 512 × 4,096 ``M``.

    Explained in: book/01_conservation/01_gradient_flow.ipynb
    """
    if M.numel() == 0:
        return (0, math.inf, math.inf), M.new_zeros((M.shape[-1], 0))
    if M.shape[0] < M.shape[1]:
        Q, R = torch.linalg.qr(M.T)
        _, S, Vh = torch.linalg.svd(R.T)
        found = rank_and_gap(S, tol)
        return found, Q @ Vh[: found[0]].T
    _, S, Vh = torch.linalg.svd(M, full_matrices=False)
    found = rank_and_gap(S, tol)
    return found, Vh[: found[0]].T


@dataclass
class Span:
    """A running span of row vectors, kept as the ``R`` of a QR (same singular values, ≤ D rows).

    Fewer rows than ``D`` are kept as they are, their singular values read from the square
    ``R`` of their transpose's QR (D = 4,096, 2,048 rows: 4 s of CPU instead of 10). The
    Jacobian block is scaled to unit root-mean-square row norm (``rescale``); brackets come
    already divided by the size of the terms they were computed from
    (:func:`flowlaws.conservation.brackets.bracket`), so that a bracket that vanishes
    identically stays at rounding level and adds no rank.

    A square ``R`` of at least :data:`LANCZOS_MIN` rows that has full rank, or rows that reach
    ``D − k`` when ``laws`` (``(D, k)``, an orthonormal basis of the gradients of ``k`` laws
    known to hold) is given, has its rank confirmed from ``σ_max`` and ``σ_min`` by Lanczos;
    otherwise, and always with ``exact=True`` (the earlier algorithm), every singular value
    is computed.

    Explained in: book/01_conservation/01_gradient_flow.ipynb
    """

    rows: Tensor
    rank: int = 0
    gap: float = math.inf
    margin: float = math.inf
    laws: Tensor | None = None
    exact: bool = False

    def add(self, block: Tensor, tol: float = RANK_TOL, rescale: bool = False) -> None:
        """Append ``block`` (shape ``(k, D)``) and read the rank, gap and margin again."""
        if rescale:
            scale = block.norm(dim=1).pow(2).mean().sqrt()
            block = block / scale if scale > 0 else block
        stacked = torch.cat([self.rows, block])
        if stacked.shape[0] < stacked.shape[1]:  # wide: the same values from a small square R
            R = torch.linalg.qr(stacked.T, "r")[1]
            found = None if self.exact else _full_rank(R, tol)
            self.rows = stacked
            if found is None:
                found = rank_and_gap(torch.linalg.svdvals(R), tol)
        else:
            found = None if self.exact else _complement_rank(stacked, self.laws, tol)
            if found is None:
                self.rows = torch.linalg.qr(stacked, mode="r")[1]
                found = rank_and_gap(torch.linalg.svdvals(self.rows), tol)
            else:
                self.rows = stacked
        self.rank, self.gap, self.margin = found


def _full_rank(R: Tensor, tol: float) -> tuple[int, float, float] | None:
    """The rank, gap and margin of a square ``R`` that has full rank, from ``σ_max`` and
    ``σ_min`` alone (the values :func:`rank_and_gap` would give); ``None`` when it does not,
    is small, or Lanczos did not converge."""
    n = R.shape[0]
    if n < LANCZOS_MIN:
        return None
    try:
        top, bottom = extreme_singular_values(R)
    except ArpackNoConvergence:
        return None
    if not bottom > tol * top:
        return None
    return n, bottom / (torch.finfo(R.dtype).eps * top), bottom / (tol * top)


def _complement_rank(M: Tensor, laws: Tensor | None, tol: float) -> tuple[int, float, float] | None:
    """Confirm ``rank M = D − k`` for rows ``M`` (``(m, D)``, ``m ≥ D − k``) orthogonal to ``k``
    known laws (``laws``: ``(D, k)``, orthonormal columns), or return ``None``.

    In a basis ``Q = [laws, rest]`` of the parameter space, ``M Q = [A, P]``. The minimax
    characterisation of singular values bounds ``σ_{D−k}(M) ≥ σ_min(P)`` (``P`` is ``M`` on a
    subspace of dimension ``D − k``) and ``σ_{D−k+1}(M) ≤ ‖A‖`` (on the laws' ``k``
    dimensions), and ``‖P‖ ≤ σ_max(M) ≤ (‖P‖² + ‖A‖²)^½``. The rank is confirmed when
    ``σ_min(P)`` clears the threshold ``tol · σ_max`` and ``‖A‖`` stays under it; the gap and
    margin returned are the lower bounds ``σ_min(P) / max(‖A‖, ε σ_max)`` and
    ``σ_min(P) / (tol σ_max)``.
    """
    if laws is None or laws.shape[1] == 0:
        return None
    k, D = laws.shape[1], M.shape[1]
    if M.shape[0] < D - k or D - k < LANCZOS_MIN:
        return None
    reflectors, tau = torch.geqrf(laws)
    rotated = torch.ormqr(reflectors, tau, M, left=False, transpose=False)  # M Q
    along = float(torch.linalg.matrix_norm(rotated[:, :k], ord=2))
    R = torch.linalg.qr(rotated[:, k:], mode="r")[1]
    try:
        top, bottom = extreme_singular_values(R)
    except ArpackNoConvergence:
        return None
    upper = math.hypot(top, along)
    if not (bottom > tol * upper and along <= tol * top):
        return None
    floor = torch.finfo(M.dtype).eps * upper
    return D - k, bottom / max(along, floor), bottom / (tol * upper)
