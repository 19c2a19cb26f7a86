"""Closed forms and reference ODEs for clustering on the sphere (paper 001).

Model (Eq. 2.6, SA): tokens ``x_i(t)`` on ``S^{d-1}``, ``x_i' = P^perp_{x_i}(sum_j A_ij x_j)``
with ``A_ij = e^{beta <x_i, x_j>} / Z_i`` and ``Z_i = sum_k e^{beta <x_i, x_k>}`` (self
included). USA replaces ``Z_i`` by ``n``. Time ``t`` is in the flow's own units (the layer
index in the continuous-depth limit); ``beta`` is the dimensionless inverse temperature.

Contents: the orthogonal-initialisation cosine ``gamma_beta`` (Theorem 6.8, Eqs. 6.9-6.10),
its hitting time of ``1 - delta`` (the curve ``Gamma_{inf,delta}`` of Eq. 6.12, Theorem 6.9),
Wendel's hemisphere probability (Theorem 6.7), the angular equations on the circle
(Eq. 7.1) with the two-token reduction, and the interaction energy (Eq. 3.5).

Reference: *A mathematical perspective on Transformers*, Geshkovski, Letrouit, Polyanskiy and
Rigollet, arXiv:2312.10794 (Section 6).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike
from scipy.integrate import solve_ivp
from scipy.special import exp1, expi

from attnsweep.experiments.arrays import FloatArray, as_float, require

__all__ = [
    "circle_angle_rate",
    "energy",
    "gamma_curve",
    "gamma_rate_sa",
    "gamma_rate_usa",
    "hitting_time",
    "two_token_angle",
    "wendel_hemisphere_probability",
]

Model = Literal["sa", "usa"]

#: solve_ivp tolerances for the two-token reference (Eq. 7.1).
RTOL = 1e-10
ATOL = 1e-12
#: Largest beta for the closed forms: the SA ``t* ~ e^beta / (2 n beta)`` overflows near 709.
BETA_MAX = 700.0
#: Bisection window in ``w = -ln(1 - gamma)``: ``1 - e^{-W_MAX}`` rounds to 1.0.
W_MAX = 48.0
#: 64 halvings of [0, W_MAX] resolve ``w`` to 3e-18, far below one ulp of ``gamma``.
BISECTIONS = 64


# --------------------------------------------------------------------------- helpers


def _check_model(model: str) -> None:
    require(model in ("sa", "usa"), f"model must be 'sa' or 'usa', got {model!r}")


def _check_n(n: int) -> None:
    require(int(n) == n and n >= 2, "n must be an integer >= 2")


def _check_beta(beta: FloatArray) -> None:
    require((beta >= 0.0) & np.isfinite(beta), "beta must be finite and >= 0")


def _check_times(t: FloatArray) -> None:
    require((t >= 0.0) & np.isfinite(t), "t must be finite and >= 0")


def _integrate(rhs: Callable[[float], float], y0: float, t: FloatArray) -> FloatArray:
    """Solve the scalar ODE ``y' = rhs(y)``, ``y(0) = y0``, at times ``t`` (any order, >= 0)."""
    times, inverse = np.unique(t, return_inverse=True)
    if times[-1] == 0.0:
        return np.full(t.shape, y0)
    sol = solve_ivp(
        lambda _t, y: [rhs(y[0])],
        (0.0, times[-1]),
        [y0],
        method="DOP853",
        t_eval=times,
        rtol=RTOL,
        atol=ATOL,
    )
    if not sol.success:
        raise RuntimeError(f"solve_ivp failed: {sol.message}")
    return sol.y[0][inverse].reshape(t.shape)


# ------------------------------------------------------- Theorem 6.8: orthogonal tokens


def gamma_rate_sa(gamma: ArrayLike, beta: ArrayLike, n: int) -> FloatArray:
    """Right-hand side of Eq. 6.9 (SA), ``d gamma / dt`` in units of 1/time.

    Written as ``2 (1 - gamma)((n - 1) gamma + 1) / (e^{beta (1 - gamma)} + n - 1)``, the
    paper's form divided by ``e^{beta gamma}``, so it never overflows for ``gamma <= 1``.
    """
    gamma, beta = as_float(gamma), as_float(beta)
    with np.errstate(over="ignore"):  # e^{beta(1-gamma)} = inf gives a rate of 0
        return (
            2.0 * (1.0 - gamma) * ((n - 1) * gamma + 1.0) / (np.exp(beta * (1.0 - gamma)) + n - 1)
        )


def gamma_rate_usa(gamma: ArrayLike, beta: ArrayLike, n: int) -> FloatArray:
    """Right-hand side of Eq. 6.10 (USA), 1/time: ``(2/n) e^{beta g} (1 - g)((n - 1) g + 1)``."""
    gamma, beta = as_float(gamma), as_float(beta)
    return (2.0 / n) * np.exp(beta * gamma) * (1.0 - gamma) * ((n - 1) * gamma + 1.0)


def _time_to_gap(w: FloatArray, beta: FloatArray, n: int, model: Model) -> FloatArray:
    """Time for ``gamma_beta`` to reach ``1 - e^{-w}``: ``int_0^{1 - e^{-w}} dgamma / f(gamma)``.

    Partial fractions of ``1/f`` give, with ``m = n - 1``, ``delta = e^{-w}``,
    ``q = n - m delta``, ``a = beta/m`` and ``L = ln(q/delta)``,

    ``B = Ei(beta) - Ei(beta delta)``,  ``C = e^a [E_1(a) - E_1(a q)]``,
    SA (Eq. 6.9): ``(m/2n) L + (1/2n)(B + e^beta C)`` (the closed form of docs/papers/001.md §4),
    USA (Eq. 6.10): ``(1/2)(e^{-beta} B + C)``,

    and ``L/2`` for both at ``beta = 0``. The terms are non-negative, so nothing cancels
    between them; ``e^beta C`` is formed as ``e^beta (e^a [..])`` since ``e^{beta + a}`` alone
    overflows for ``n = 2`` at ``beta > 354``. Broadcasts ``w`` against ``beta``; needs
    ``0 <= beta <= BETA_MAX``.
    """
    m = n - 1
    log_q = np.log1p(-m * np.expm1(-w))
    half_l = 0.5 * (log_q + w)
    pos = beta > 0.0
    b = np.where(pos, beta, 1.0)  # placeholder where beta = 0 (Ei(0) = -inf)
    a = b / m
    big_b = expi(b) - expi(b * np.exp(-w))
    big_c = np.exp(a) * (exp1(a) - exp1(a * np.exp(log_q)))
    t = ((m / n) * half_l + (big_b + np.exp(b) * big_c) / (2 * n) if model == "sa"
         else 0.5 * (np.exp(-b) * big_b + big_c))
    return np.where(pos, t, half_l)


def _check_curve_args(beta: FloatArray, n: int, model: str) -> None:
    require((beta >= 0.0) & (beta <= BETA_MAX), f"beta must lie in [0, {BETA_MAX}]")
    _check_n(n)
    _check_model(model)


def gamma_curve(t: ArrayLike, beta: ArrayLike, n: int, model: Model = "sa") -> FloatArray:
    """Common pairwise cosine ``gamma_beta(t)`` for orthogonal initialisation (Theorem 6.8).

    Solution of Eq. 6.9 (SA) or Eq. 6.10 (USA) with ``gamma(0) = 0`` (valid for ``d >= n``),
    obtained by inverting the closed-form travel time (see ``hitting_time``) with a vectorised
    bisection in ``w = -ln(1 - gamma)``. The error is that of rounding ``t`` itself,
    ``~ f(gamma) * t * 1e-15``: ~1e-15 for ``beta <= 9``, ~1e-10 for SA at ``beta = 20`` near
    ``t* ~ 6e6`` (``n = 32``). An ODE solve does worse, and fails for USA at large beta
    (it needs time steps below the spacing of floats).

    Parameters
    ----------
    t : array_like
        Times ``>= 0`` (flow units), any order.
    beta : array_like
        Inverse temperatures in ``[0, 700]``, scalar or array.
    n : int
        Number of tokens, ``>= 2``.
    model : {"sa", "usa"}

    Returns
    -------
    gamma : ndarray
        Shape ``np.shape(beta) + np.shape(t)``; 1.0 once ``1 - gamma`` is below one ulp.
    """
    t, beta = as_float(t), as_float(beta)
    _check_times(t)
    _check_curve_args(beta, n, model)
    b = beta.reshape(beta.shape + (1,) * t.ndim)
    lo = np.zeros(np.broadcast_shapes(b.shape, t.shape))
    hi = np.full(lo.shape, W_MAX)
    for _ in range(BISECTIONS):
        mid = 0.5 * (lo + hi)
        early = _time_to_gap(mid, b, n, model) < t
        lo, hi = np.where(early, mid, lo), np.where(early, hi, mid)
    return -np.expm1(-lo)  # lo: exactly 0 at t = 0


# ------------------------------------------------- Eq. 6.12: the curve Gamma_{inf,delta}


def hitting_time(beta: ArrayLike, n: int, delta: float, model: Model = "sa") -> FloatArray:
    """Time ``t*(beta)`` at which ``gamma_beta`` reaches ``1 - delta``: the curve of Eq. 6.12.

    ``t* = int_0^{1-delta} dgamma / f(gamma)`` with ``f`` from Eq. 6.9 (SA) or 6.10 (USA), so
    ``Gamma_{inf,delta} = {(t*(beta), beta)}`` (Theorem 6.9). Both models use closed forms in
    ``Ei`` and ``E_1`` (scipy ``expi``, ``exp1``), relative error ~1e-15, no quadrature, for
    ``0 <= beta <= 700`` (SA ``t*`` overflows near 709). SA: increasing in beta; USA (rates
    ``O(e^beta)``): decreasing. Example: ``n = 32``, ``delta = 1e-3``, ``beta = 4``, SA: 6.95350.

    Returns
    -------
    t_star : ndarray
        Same shape as ``beta``, in flow time units.
    """
    beta = as_float(beta)
    _check_curve_args(beta, n, model)
    require(0.0 < delta < 1.0, "delta must lie in (0, 1)")
    return _time_to_gap(np.float64(-math.log(delta)), beta, n, model)


# -------------------------------------------------------------- Theorems 6.3 and 6.7


def wendel_hemisphere_probability(n: int, d: int) -> float:
    """P(n i.i.d. uniform points of ``S^{d-1}`` lie in an open hemisphere), Theorem 6.7.

    ``2^{-(n-1)} sum_{k=0}^{d-1} C(n-1, k)`` for ``d <= n`` (exact integers, one rounding);
    1 for ``d >= n`` (Theorem 6.3; the sum also gives 1 at ``d = n``).
    """
    require(int(n) == n and int(d) == d and n >= 1 and d >= 1, "n and d must be integers >= 1")
    if d >= n:
        return 1.0
    return sum(math.comb(n - 1, k) for k in range(d)) / 2 ** (n - 1)


# ---------------------------------------------------------------- Eq. 7.1: the circle


def circle_angle_rate(theta: ArrayLike, beta: ArrayLike, model: Model) -> FloatArray:
    """Angular velocities on ``S^1`` (Eq. 7.1), ``theta`` of shape ``(..., n)`` in radians.

    USA: ``theta_i' = -(1/n) sum_j e^{beta cos(theta_i - theta_j)} sin(theta_i - theta_j)``.
    SA: ``1/n`` replaced by ``1/Z_i``, ``Z_i = sum_k e^{beta cos(theta_i - theta_k)}``; the
    weights are shifted by the self score ``beta`` so that they never overflow. ``beta`` is
    a scalar or broadcasts against ``theta.shape[:-1]``.
    """
    theta, beta = as_float(theta), as_float(beta)[..., None, None]
    _check_model(model)
    diff = theta[..., :, None] - theta[..., None, :]
    if model == "sa":
        w = np.exp(beta * (np.cos(diff) - 1.0))
        return -(w * np.sin(diff)).sum(axis=-1) / w.sum(axis=-1)
    return -(np.exp(beta * np.cos(diff)) * np.sin(diff)).mean(axis=-1)


def _log_half_tan_rate(beta: float, model: Model) -> Callable[[float], float]:
    """``s'`` for ``s = ln tan(phi/2)``: ``phi'/sin(phi)`` with ``cos(phi) = -tanh(s)``."""
    if model == "sa":
        return lambda s: -2.0 / (math.exp(beta * (1.0 + math.tanh(s))) + 1.0)
    return lambda s: -math.exp(-beta * math.tanh(s))


def two_token_angle(t: ArrayLike, phi0: float, beta: float, model: Model) -> FloatArray:
    """Angle ``phi(t) = theta_1 - theta_2`` between two tokens on the circle (Eq. 7.1, n = 2).

    With ``n = 2`` the ``j = i`` terms vanish (``sin 0 = 0``) and Eq. 7.1 reduces to
    ``phi' = -e^{beta cos phi} sin phi`` (USA) and
    ``phi' = -2 e^{beta cos phi} sin phi / (e^beta + e^{beta cos phi})`` (SA). Solved by
    ``solve_ivp`` (DOP853, rtol 1e-10, atol 1e-12) in ``s = ln tan(phi/2)``, where the flow is
    smooth and keeps relative precision as ``phi -> 0``; ``phi0 = 0`` and ``pi`` are fixed.
    USA at ``beta >~ 40`` needs steps below float64 time resolution and raises RuntimeError;
    from ``phi0 = pi/2`` use ``arccos(gamma_curve(t, beta, 2, model))`` (Theorem 6.8, d = n = 2).

    Parameters
    ----------
    t : array_like
        Times ``>= 0``, any order.
    phi0 : float
        Initial angle in ``[0, pi]`` (radians).
    beta : float
        Inverse temperature ``>= 0``.
    model : {"sa", "usa"}

    Returns
    -------
    phi : ndarray
        Same shape as ``t``, in ``[0, pi]``.
    """
    t = as_float(t)
    _check_times(t)
    _check_beta(np.float64(beta))
    _check_model(model)
    require(0.0 <= phi0 <= math.pi, "phi0 must lie in [0, pi]")
    if phi0 in (0.0, math.pi):
        return np.full(t.shape, float(phi0))
    s = _integrate(_log_half_tan_rate(float(beta), model), math.log(math.tan(0.5 * phi0)), t)
    return 2.0 * np.arctan(np.exp(s))


# ---------------------------------------------------------------------- Eq. 3.5: energy


def energy(cosines: ArrayLike, beta: ArrayLike) -> FloatArray:
    """Interaction energy ``E_beta = (1/(2 beta n^2)) sum_{i,j} e^{beta <x_i, x_j>}`` (Eq. 3.5).

    ``cosines`` holds Gram matrices of shape ``(..., n, n)``; ``beta > 0`` is a scalar or
    broadcasts against ``cosines.shape[:-2]``. Non-decreasing along SA and USA (Eq. 3.6).
    """
    cosines, beta = as_float(cosines), as_float(beta)
    require((beta > 0.0) & np.isfinite(beta), "beta must be finite and > 0")
    n = cosines.shape[-1]
    total = np.exp(beta[..., None, None] * cosines).sum(axis=(-2, -1))
    return total / (2.0 * beta * n**2)
