"""Stochastic gradient flow: Euler–Maruyama for an ensemble of trajectories at once.

The SDE is ``dθ = b(θ) dt + √η G(θ) dB`` with ``G Gᵀ = Σ``: a drift ``b`` (``−∇L`` for a
gradient flow) and a state-dependent noise factor ``G``. Every function works on an
*ensemble*: states have shape ``(n_runs, dim)`` and one step advances all runs with one
batch of tensor operations (no Python loop over seeds).

Three uses in the book:

- the quartic well of Chen et al. (2023), ``dθ = −(θ³ − μθ) dt + ζθ dB`` (Itô), where the
  invariant set ``θ = 0`` becomes attractive once ``ζ² ≥ 2μ`` (:func:`quartic_collapse`,
  next to the stationary-density prediction :func:`quartic_stationary_mass_below`);
- SGD on a two-layer network read as its SDE (:func:`sgd_sde`): the drift is the full-batch
  gradient and ``Σ`` the mini-batch gradient covariance at the current point;
- plain discrete SGD on the same network (:func:`sgd_discrete`) to compare against.

The ensemble two-layer network ``f(x) = U σ(V x)`` is written batched here: ``V`` has shape
``(n_runs, width, n_in)`` and ``U`` ``(n_runs, n_out, width)`` (PyTorch's out × in convention
with a leading ensemble dimension, as in :class:`flowlaws.models.TwoLayer`); its per-sample
gradients are computed in closed form with ``einsum`` (checked against autograd in the tests).

Divergence: a run whose state becomes NaN/inf or exceeds ``max_abs`` is frozen at NaN, its
step is recorded, and the other runs go on (:class:`SDEPath.diverged_at`).

Explained in: book/02_percolation/01_sde.ipynb.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from scipy.special import gammainc

from flowlaws.progress import track


@dataclass(frozen=True)
class ImplicitNoise:
    """A noise factor ``G`` ``(R, d, k)`` applied without being formed: ``apply(ξ) = G ξ``.

    ``k`` is the number of noise sources; ``apply`` maps ``ξ`` ``(R, k)`` to ``(R, d)``.
    """

    k: int
    apply: Callable[[torch.Tensor], torch.Tensor]


Coefficients = Callable[[torch.Tensor], tuple[torch.Tensor, "torch.Tensor | ImplicitNoise"]]

__all__ = [
    "SDEPath",
    "ImplicitNoise",
    "TwoLayerShape",
    "euler_maruyama",
    "quartic_coefficients",
    "quartic_collapse",
    "quartic_stationary_mass_below",
    "quartic_stationary_density",
    "ensemble_init",
    "ensemble_from_model",
    "split_params",
    "ensemble_forward",
    "per_sample_grads",
    "ensemble_loss",
    "sgd_coefficients",
    "sgd_sde",
    "sgd_discrete",
]


def _check_positive(**values: float) -> None:
    for name, value in values.items():
        if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
            raise ValueError(f"{name} must be a positive number, got {value!r}")


def _check_nonnegative(**values: float) -> None:
    for name, value in values.items():
        if not (isinstance(value, int | float) and math.isfinite(value) and value >= 0):
            raise ValueError(f"{name} must be a non-negative number, got {value!r}")


@dataclass
class SDEPath:
    """An ensemble of recorded trajectories.

    Attributes:
        times: ``(T,)`` recorded times (``t = dt · step``).
        states: ``(T, n_runs, dim)`` states at those times (NaN after a run diverged).
        diverged_at: ``(n_runs,)`` int64, the step at which each run diverged, ``-1`` if never.
    """

    times: np.ndarray
    states: torch.Tensor
    diverged_at: torch.Tensor

    @property
    def final(self) -> torch.Tensor:
        """``(n_runs, dim)`` the last recorded state."""
        return self.states[-1]

    @property
    def diverged(self) -> torch.Tensor:
        """``(n_runs,)`` bool, the runs that diverged."""
        return self.diverged_at >= 0

    def divergence_report(self) -> str:
        """One line naming the diverged runs and their steps (or saying that none did)."""
        bad = torch.nonzero(self.diverged).flatten().tolist()
        if not bad:
            return f"all {len(self.diverged_at)} runs stayed finite"
        detail = ", ".join(f"run {r} at step {int(self.diverged_at[r])}" for r in bad[:10])
        more = f" (and {len(bad) - 10} more)" if len(bad) > 10 else ""
        return f"{len(bad)} of {len(self.diverged_at)} runs diverged: {detail}{more}"


def _noise(factor: torch.Tensor | ImplicitNoise, generator: torch.Generator,
           like: torch.Tensor) -> torch.Tensor:
    """``G ξ`` for a diagonal ``(R, d)``, a full ``(R, d, k)`` or an implicit factor."""
    if isinstance(factor, ImplicitNoise):
        xi = torch.randn((like.shape[0], factor.k), generator=generator, dtype=like.dtype,
                         device=like.device)
        return factor.apply(xi)
    shape = factor.shape if factor.dim() == 2 else (factor.shape[0], factor.shape[2])
    xi = torch.randn(shape, generator=generator, dtype=factor.dtype, device=factor.device)
    return factor * xi if factor.dim() == 2 else torch.einsum("rdk,rk->rd", factor, xi)


def _mark_divergence(
    theta: torch.Tensor, diverged_at: torch.Tensor, step: int, max_abs: float
) -> None:
    bad = ~torch.isfinite(theta).all(dim=1) | (theta.abs().amax(dim=1) > max_abs)
    new = bad & (diverged_at < 0)
    diverged_at[new] = step
    theta[bad] = float("nan")


def euler_maruyama(
    coefficients: Coefficients,
    theta0: torch.Tensor,
    dt: float,
    n_steps: int,
    *,
    eta: float = 1.0,
    seed: int = 0,
    record_every: int = 1,
    max_abs: float = 1e6,
    absorb_below: float = 0.0,
    progress: str | None = None,
) -> SDEPath:
    """Euler–Maruyama ``θ ← θ + b(θ) dt + √(η dt) G(θ) ξ`` for all runs at once.

    Args:
        coefficients: ``θ (R, d) → (b, G)`` with ``b`` ``(R, d)`` and ``G`` either ``(R, d)``
            (diagonal noise), ``(R, d, k)`` (``Σ = G Gᵀ``, ``k`` noise sources) or an
            :class:`ImplicitNoise` (``G ξ`` computed without forming ``G``).
        theta0: ``(R, d)`` initial states (``R`` runs).
        dt: time step (> 0). eta: noise scale η (≥ 0; for SGD, the learning rate).
        seed: seeds the ``torch.Generator``; the same seed and ``R`` give the same paths.
        record_every: record every this many steps (the last step is always recorded).
        max_abs: a run with ``|θ| > max_abs`` anywhere counts as diverged (overflow).
        absorb_below: coordinates with ``|θ| < absorb_below`` are set to exactly 0; use a
            tiny value (1e-200) for multiplicative noise, to avoid slow subnormal floats.
        progress: a label to show a ``tqdm.auto`` bar over the steps (None: no bar); inside
            ``flowlaws.progress.report_to`` the steps are reported there instead.
    """
    _check_positive(dt=dt, max_abs=max_abs)
    _check_nonnegative(eta=eta, absorb_below=absorb_below)
    if n_steps < 1 or record_every < 1:
        raise ValueError("n_steps and record_every must be positive ints")
    generator = torch.Generator(device=theta0.device).manual_seed(seed)
    theta = theta0.detach().clone()
    diverged_at = torch.full((theta.shape[0],), -1, dtype=torch.int64, device=theta.device)
    scale = math.sqrt(eta * dt)
    steps, records = [0], [theta.clone()]
    for step in track(range(1, n_steps + 1), desc=progress, enabled=progress is not None):
        drift, factor = coefficients(theta)
        step_noise = scale * _noise(factor, generator, theta) if scale > 0 else 0.0
        theta = theta + drift * dt + step_noise
        if absorb_below > 0:
            theta = torch.where(theta.abs() < absorb_below, torch.zeros_like(theta), theta)
        _mark_divergence(theta, diverged_at, step, max_abs)
        if step % record_every == 0 or step == n_steps:
            steps.append(step)
            records.append(theta.clone())
    return SDEPath(dt * np.asarray(steps, dtype=float), torch.stack(records), diverged_at)


# ----------------------------------------------------------------------------------------
# The quartic well of Chen et al. (2023)
# ----------------------------------------------------------------------------------------


def quartic_coefficients(mu: float, zeta: torch.Tensor | float) -> Coefficients:
    """Drift ``μθ − θ³`` and diagonal noise ``ζθ`` (``zeta`` scalar or ``(R, 1)`` per run).

    The noise vanishes at ``θ = 0``, so the Euler–Maruyama map
    ``θ ← θ (1 + (μ − θ²) dt + ζ √dt ξ)`` keeps ``θ = 0`` exactly invariant.
    """

    def coefficients(theta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return mu * theta - theta**3, zeta * theta

    return coefficients


def quartic_stationary_density(theta: np.ndarray, mu: float, zeta: float) -> np.ndarray:
    """The normalised stationary density on ``θ > 0``, ``p(θ) ∝ θ^a e^{−θ²/ζ²}``.

    Derivation (Itô, zero-flux Fokker–Planck): with drift ``b = μθ − θ³`` and
    ``D = ζ²θ²``, ``p ∝ D⁻¹ exp(∫ 2b/D) = θ^{2μ/ζ² − 2} e^{−θ²/ζ²}``. With
    ``a = 2μ/ζ² − 2`` the normaliser ``∫₀^∞ θ^a e^{−θ²/ζ²} dθ = ½ ζ^{a+1} Γ((a+1)/2)`` is
    finite only for ``a > −1``, i.e. ``ζ² < 2μ``; for ``ζ² ≥ 2μ`` all the mass sits at 0
    and this function raises ``ValueError``.
    """
    _check_positive(mu=mu, zeta=zeta)
    a = 2 * mu / zeta**2 - 2
    if a <= -1:
        raise ValueError(f"zeta^2 = {zeta**2:g} >= 2 mu = {2 * mu:g}: the density is not "
                         "normalisable; the stationary law is the point mass at 0")
    theta = np.asarray(theta, dtype=float)
    log_norm = math.log(0.5) + (a + 1) * math.log(zeta) + math.lgamma((a + 1) / 2)
    return np.exp(a * np.log(theta) - theta**2 / zeta**2 - log_norm)


def quartic_stationary_mass_below(eps: float, mu: float, zeta: float | np.ndarray) -> np.ndarray:
    """Stationary probability that ``|θ| < eps``: the prediction for the collapse fraction.

    Equals the regularised incomplete gamma ``P((a+1)/2, eps²/ζ²)`` with ``a = 2μ/ζ² − 2``
    while ``ζ² < 2μ`` (tiny for small ``eps``), and 1 for ``ζ² ≥ 2μ``, where the stationary
    law is the point mass at the invariant set ``θ = 0``.
    """
    zeta = np.asarray(zeta, dtype=float)
    shape = mu / zeta**2  # (a + 1) / 2
    with np.errstate(invalid="ignore"):
        mass = gammainc(np.where(shape > 0.5, shape - 0.5, 1.0), eps**2 / zeta**2)
    return np.where(zeta**2 >= 2 * mu, 1.0, mass)


def quartic_collapse(
    zetas: np.ndarray | list[float],
    *,
    mu: float = 1.0,
    theta0: float = 1.0,
    t_final: float = 100.0,
    dt: float = 0.01,
    n_runs: int = 500,
    threshold: float = 1e-6,
    seed: int = 0,
) -> np.ndarray:
    """Fraction of runs with ``|θ(t_final)| < threshold`` ("collapsed"), one per ``ζ``.

    All ``len(zetas) × n_runs`` trajectories run in one ensemble (``ζ`` is a per-run
    column). Collapse is operational: below ``threshold`` at the final time. Returns
    ``(len(zetas),)``. Compare with :func:`quartic_stationary_mass_below` (the ``t → ∞``
    prediction; the step to 1 at ``ζ = √(2μ)`` is rounded at finite ``t_final`` because
    ``log θ`` drifts at speed ``μ − ζ²/2`` only, which vanishes at the threshold).
    """
    _check_positive(mu=mu, t_final=t_final, dt=dt, threshold=threshold)
    zetas = np.asarray(zetas, dtype=float)
    if np.any(zetas < 0):
        raise ValueError(f"noise levels zeta must be >= 0, got {zetas.tolist()}")
    zeta_col = torch.tensor(np.repeat(zetas, n_runs), dtype=torch.float64)[:, None]
    theta0_t = torch.full((len(zeta_col), 1), float(theta0), dtype=torch.float64)
    n_steps = int(round(t_final / dt))
    path = euler_maruyama(quartic_coefficients(mu, zeta_col), theta0_t, dt, n_steps,
                          seed=seed, record_every=n_steps, absorb_below=1e-200)
    collapsed = (path.final.abs() < threshold).reshape(len(zetas), n_runs)
    return collapsed.double().mean(dim=1).numpy()


# ----------------------------------------------------------------------------------------
# An ensemble two-layer network and SGD as an SDE
# ----------------------------------------------------------------------------------------

_ACT = {
    "linear": (lambda z: z, lambda z: torch.ones_like(z)),
    "relu": (torch.relu, lambda z: (z > 0).to(z.dtype)),
    "tanh": (torch.tanh, lambda z: 1 - torch.tanh(z) ** 2),
}


@dataclass(frozen=True)
class TwoLayerShape:
    """Sizes of ``f(x) = U σ(V x)``; a flat state is ``[V.ravel(), U.ravel()]`` per run."""

    n_in: int
    width: int
    n_out: int
    activation: str = "tanh"

    @property
    def dim(self) -> int:
        """Number of parameters of one network."""
        return self.width * (self.n_in + self.n_out)


def ensemble_init(
    shape: TwoLayerShape, n_runs: int, *, scale: float = 1.0, seed: int = 0,
    dtype: torch.dtype = torch.float64,
) -> torch.Tensor:
    """``(n_runs, dim)`` Gaussian initial states.

    ``V ~ N(0, scale²/n_in)`` and ``U ~ N(0, scale²/width)``, entrywise.
    """
    g = torch.Generator().manual_seed(seed)
    V = torch.randn(n_runs, shape.width, shape.n_in, generator=g, dtype=dtype)
    U = torch.randn(n_runs, shape.n_out, shape.width, generator=g, dtype=dtype)
    V, U = V * scale / math.sqrt(shape.n_in), U * scale / math.sqrt(shape.width)
    return torch.cat([V.flatten(1), U.flatten(1)], dim=1)


def ensemble_from_model(model: torch.nn.Module, n_runs: int) -> tuple[torch.Tensor, TwoLayerShape]:
    """``(n_runs, dim)`` copies of a bias-free :class:`flowlaws.models.TwoLayer`, and its shape.

    Every run starts at the model's weights (the noise makes them differ).
    """
    if getattr(model.V, "bias", None) is not None or getattr(model.U, "bias", None) is not None:
        raise ValueError("only bias-free TwoLayer models are supported (bias=False)")
    if model.activation not in _ACT:
        raise ValueError(f"activation must be one of {sorted(_ACT)}, got {model.activation!r}")
    V, U = model.V.weight.detach(), model.U.weight.detach()
    shape = TwoLayerShape(V.shape[1], V.shape[0], U.shape[0], model.activation)
    flat = torch.cat([V.reshape(-1), U.reshape(-1)])
    return flat.expand(n_runs, -1).clone(), shape


def split_params(theta: torch.Tensor, shape: TwoLayerShape) -> tuple[torch.Tensor, torch.Tensor]:
    """``(R, dim)`` → ``V`` ``(R, width, n_in)``, ``U`` ``(R, n_out, width)`` (views)."""
    n_v = shape.width * shape.n_in
    V = theta[:, :n_v].reshape(-1, shape.width, shape.n_in)
    return V, theta[:, n_v:].reshape(-1, shape.n_out, shape.width)


def _inputs(X: torch.Tensor) -> str:
    return "ni" if X.dim() == 2 else "rni"


def ensemble_forward(theta: torch.Tensor, shape: TwoLayerShape, X: torch.Tensor) -> torch.Tensor:
    """Outputs ``(R, N, n_out)`` of every run.

    ``X`` is ``(N, n_in)`` (shared) or ``(R, N, n_in)`` (one batch per run).
    """
    V, U = split_params(theta, shape)
    z = torch.einsum(f"rwi,{_inputs(X)}->rnw", V, X)
    return torch.einsum("row,rnw->rno", U, _ACT[shape.activation][0](z))


def per_sample_grads(
    theta: torch.Tensor, shape: TwoLayerShape, X: torch.Tensor, Y: torch.Tensor
) -> torch.Tensor:
    """``(R, N, dim)`` gradients of ``ℓ_n = ½‖U σ(V x_n) − y_n‖²``, in closed form.

    ``∂ℓ/∂U = e σ(z)ᵀ`` and ``∂ℓ/∂V = ((Uᵀe) ⊙ σ'(z)) xᵀ`` with ``z = V x``, ``e = f − y``.
    ``X`` is ``(N, n_in)`` or ``(R, N, n_in)``, ``Y`` matches (``(N, n_out)`` or ``(R, N, n_out)``).
    """
    h, e, delta = _forward_cache(theta, shape, X, Y)
    gU = torch.einsum("rno,rnw->rnow", e, h)
    gV = torch.einsum(f"rnw,{_inputs(X)}->rnwi", delta, X)
    return torch.cat([gV.flatten(2), gU.flatten(2)], dim=2)


def _forward_cache(theta: torch.Tensor, shape: TwoLayerShape, X: torch.Tensor,
                   Y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``h = σ(Vx)``, residual ``e``, back-propagated ``δ = (Uᵀe) ⊙ σ'(Vx)``; ``(R, N, ·)``."""
    act, dact = _ACT[shape.activation]
    V, U = split_params(theta, shape)
    z = torch.einsum(f"rwi,{_inputs(X)}->rnw", V, X)
    h = act(z)
    e = torch.einsum("row,rnw->rno", U, h) - Y
    return h, e, torch.einsum("row,rno->rnw", U, e) * dact(z)


def _weighted_grad(weights: torch.Tensor, cache: tuple, X: torch.Tensor) -> torch.Tensor:
    """``Σ_n w_n ∇ℓ_n`` ``(R, dim)`` for weights ``(R, N)``, without per-sample gradients."""
    h, e, delta = cache
    gV = torch.einsum(f"rn,rnw,{_inputs(X)}->rwi", weights, delta, X)
    gU = torch.einsum("rn,rno,rnw->row", weights, e, h)
    return torch.cat([gV.flatten(1), gU.flatten(1)], dim=1)


def ensemble_loss(
    theta: torch.Tensor, shape: TwoLayerShape, X: torch.Tensor, Y: torch.Tensor
) -> torch.Tensor:
    """``(R,)`` full-batch losses ``L = (1/2N) Σ_n ‖f(x_n) − y_n‖²``.

    The same loss as :func:`flowlaws.flow.mse_loss`.
    """
    # N is the sample axis, -2: X is (N, n_in) shared by the runs or (R, N, n_in) per run
    return 0.5 * (ensemble_forward(theta, shape, X) - Y).pow(2).sum(dim=(1, 2)) / X.shape[-2]


def sgd_coefficients(
    shape: TwoLayerShape, X: torch.Tensor, Y: torch.Tensor, batch_size: int
) -> Coefficients:
    """Drift ``−∇L`` and factor ``G = (g_n − ḡ)ᵀ / √(N B)`` (``(R, dim, N)``, implicit).

    ``G Gᵀ = Σ / B`` with ``Σ = (1/N) Σ_n (g_n − ḡ)(g_n − ḡ)ᵀ``: the covariance of a
    mini-batch gradient of ``B`` samples drawn with replacement. With ``dt = η = lr`` one
    Euler–Maruyama step has the mean ``−lr ∇L`` and covariance ``lr² Σ/B`` of an SGD step.
    ``G ξ = Σ_n (ξ_n − ξ̄) g_n / √(N B)`` is the gradient of a randomly reweighted loss, so
    neither ``G`` nor the per-sample gradients are ever formed (:class:`ImplicitNoise`).
    """
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    n = X.shape[0]
    norm = math.sqrt(n * batch_size)

    def coefficients(theta: torch.Tensor) -> tuple[torch.Tensor, ImplicitNoise]:
        cache = _forward_cache(theta, shape, X, Y)
        uniform = torch.full((theta.shape[0], n), 1.0 / n, dtype=theta.dtype, device=theta.device)
        mean = _weighted_grad(uniform, cache, X)

        def apply(xi: torch.Tensor) -> torch.Tensor:
            return _weighted_grad((xi - xi.mean(dim=1, keepdim=True)) / norm, cache, X)

        return -mean, ImplicitNoise(n, apply)

    return coefficients


def sgd_sde(
    theta0: torch.Tensor, shape: TwoLayerShape, X: torch.Tensor, Y: torch.Tensor, *,
    lr: float, batch_size: int, n_steps: int, seed: int = 0, record_every: int = 1,
    max_abs: float = 1e6, progress: str | None = None,
) -> SDEPath:
    """SGD read as its SDE, integrated by Euler–Maruyama with ``dt = η = lr``.

    Shapes: ``theta0`` ``(R, dim)``, ``X`` ``(N, n_in)``, ``Y`` ``(N, n_out)``.
    """
    _check_positive(lr=lr)
    return euler_maruyama(sgd_coefficients(shape, X, Y, batch_size), theta0, lr, n_steps,
                          eta=lr, seed=seed, record_every=record_every, max_abs=max_abs,
                          progress=progress)


def sgd_discrete(
    theta0: torch.Tensor, shape: TwoLayerShape, X: torch.Tensor, Y: torch.Tensor, *,
    lr: float, batch_size: int, n_steps: int, seed: int = 0, record_every: int = 1,
    max_abs: float = 1e6, progress: str | None = None,
) -> SDEPath:
    """Plain SGD ``θ ← θ − lr ĝ_B``, each run with its own batches (drawn with replacement).

    Returns the same :class:`SDEPath` as :func:`sgd_sde` (times ``lr · step``).
    """
    _check_positive(lr=lr)
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    g = torch.Generator().manual_seed(seed)

    def coefficients(theta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        idx = torch.randint(X.shape[0], (theta.shape[0], batch_size), generator=g)
        Xb = X[idx]
        weights = torch.full(idx.shape, 1.0 / batch_size, dtype=theta.dtype, device=theta.device)
        grad = _weighted_grad(weights, _forward_cache(theta, shape, Xb, Y[idx]), Xb)
        return -grad, torch.zeros_like(theta)

    return euler_maruyama(coefficients, theta0, lr, n_steps, eta=0.0, seed=seed,
                          record_every=record_every, max_abs=max_abs, progress=progress)
