"""Closed forms and initial-configuration observables of causal attention (paper 003).

Model (CSA): tokens ``x_k(t)`` on ``S^{d-1}``, ``x_k' = P_{x_k}((1/Z_k) sum_{j<=k}
e^{beta <Q x_k, K x_j>} V x_j)``; the causal mask keeps the diagonal. Time is in the flow's
own units, ``beta`` is dimensionless, angles and distances are geodesic (radians).

- Lemma 3.1: the first token sees only itself, ``x_1(t) = e^{tV} x_1 / |e^{tV} x_1|``.
- docs/papers/003.md §4 (from CSA, ``V = Q = K = I``): ``c = <x_1, x_2>`` obeys
  ``c' = (1 - c^2) / (1 + e^{beta(1 - c)})``, solved here in closed form.
- Lemma A.1: ``h(x) = e^{beta(cos x - 1)} sin x`` (IntPot) peaks at ``tau*_beta``,
  ``(beta + 1/2)^{-1/2} < tau*_beta < beta^{-1/2}`` for ``beta >= 1``.
- Section 5.1: Renyi centres (greedy parking against earlier centres) and strong Renyi
  centres (against every earlier token), both on the initial configuration, strict ``> delta``.
- Lemma C.1: for i.i.d. rotation-invariant tokens, ``P(token k strong) = (1 - p)^{k-1}``,
  ``p`` the normalised cap measure of radius ``delta``.
- Section C.4 (Renyi; Dvoretzky-Robbins): for ``d = 2`` the saturated Renyi count is
  ``c_R 2 pi / delta`` up to a superexponentially small error.
- Section 5: both counts scale as ``delta^{-(d-1)}``, i.e. ``beta^{(d-1)/2}`` at
  ``delta = c beta^{-1/2}``.

Errata used (docs/papers/003.md §5): Lemma C.1 for ``d = 3`` is ``1/p = 1/sin^2(delta/2)``, not
``(3 sin^2(delta/2))^{-1}`` (item 1); the C.4 definitions need strict ``i < j`` (item 2);
the exponent is ``(d-1)/2``, not ``d - 1`` (item 3).

Reference: *Clustering in causal attention masking*, Karagodin, Polyanskiy and Rigollet,
arXiv:2411.04990.
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np
from numpy.typing import ArrayLike
from scipy.integrate import quad
from scipy.linalg import expm
from scipy.special import betainc, exp1, expi

from attnsweep.experiments.arrays import BoolArray, FloatArray, require

__all__ = [
    "cap_measure",
    "expected_strong_count",
    "first_token",
    "interaction",
    "renyi_centres",
    "renyi_constant",
    "renyi_saturated_count",
    "scaling_exponent",
    "second_token_cosine",
    "strong_centres",
    "tau_star",
]


#: Largest beta of ``second_token_cosine``: its closed form holds ``e^{2 beta}``.
BETA_MAX = 350.0
#: Upper end of the bisection in ``y = artanh(c)``: ``tanh(20)`` rounds to 1.0.
Y_MAX = 20.0
#: 64 halvings resolve ``y`` to ~1e-18, below one ulp of ``c``.
BISECTIONS = 64


# ------------------------------------------------------------- Section 5.1: centres


def _unit_tokens(x0: ArrayLike) -> FloatArray:
    x0 = np.asarray(x0, dtype=np.float64)
    require(x0.ndim >= 2 and x0.shape[-2] >= 1, "x0 must have shape (..., n, d)")
    return x0


def renyi_centres(x0: ArrayLike, delta: float) -> BoolArray:
    """Renyi centres of unit tokens ``x0`` (..., n, d) in index order (Section 5.1).

    Greedy parking: token k is a centre iff ``arccos <x_k, x_s> > delta`` for every earlier
    centre s; token 0 always is. Compared as ``<x_k, x_s> < cos delta`` (arccos is
    decreasing), so a token at exactly ``delta`` is not separated. Loops over the n tokens,
    vectorised over the batch; memory O(size of x0).
    """
    x0 = _unit_tokens(x0)
    *batch, n, d = x0.shape
    x = x0.reshape(-1, n, d)
    cos_delta = math.cos(delta)
    rows = np.arange(len(x))
    found = np.zeros((len(x), n), dtype=bool)
    centres = np.zeros_like(x)  # centres[b, :count[b]] are the centres of sequence b so far
    count = np.zeros(len(x), dtype=np.int64)
    for k in range(n):
        m = int(count.max())
        dots = np.einsum("bmd,bd->bm", centres[:, :m], x[:, k])
        free = np.where(np.arange(m) < count[:, None], dots < cos_delta, True).all(-1)
        found[:, k] = free
        centres[rows[free], count[free]] = x[free, k]
        count += free
    return found.reshape(*batch, n)


def strong_centres(x0: ArrayLike, delta: float) -> BoolArray:
    """Strong Renyi centres of unit tokens ``x0`` (..., n, d) (Section 5.1, docs/papers/003.md §5 item 2).

    Token s is one iff ``arccos <x_s, x_i> > delta`` for all ``i < s`` (strict, compared as
    ``<x_s, x_i> < cos delta``); token 0 always is. A subset of ``renyi_centres``.
    """
    x0 = _unit_tokens(x0)
    cos_delta = math.cos(delta)
    found = np.ones(x0.shape[:-1], dtype=bool)
    for s in range(1, x0.shape[-2]):
        dots = np.einsum("...id,...d->...i", x0[..., :s, :], x0[..., s, :])
        found[..., s] = dots.max(-1) < cos_delta
    return found


# -------------------------------------------------------------- Lemma C.1 and C.4


def cap_measure(delta: ArrayLike, d: int) -> FloatArray:
    """Normalised measure ``p`` of a geodesic cap of radius ``delta`` in ``[0, pi]`` on S^{d-1}.

    ``p = int_0^delta sin^{d-2} / int_0^pi sin^{d-2} = I_{sin^2(delta/2)}((d-1)/2, (d-1)/2)``
    (substitute ``u = sin^2(theta/2)``; ``I`` the regularised incomplete beta). Exact values:
    ``delta/pi`` for ``d = 2``, ``sin^2(delta/2)`` for ``d = 3`` (docs/papers/003.md §5 item 1).
    """
    delta = np.asarray(delta, dtype=np.float64)
    require(int(d) == d and d >= 2, "d must be an integer >= 2")
    require((delta >= 0.0) & (delta <= math.pi), "delta must lie in [0, pi]")
    a = 0.5 * (d - 1)
    return betainc(a, a, np.sin(0.5 * delta) ** 2)


def expected_strong_count(n: int, delta: ArrayLike, d: int) -> FloatArray:
    """Mean number of strong centres among n i.i.d. uniform tokens (Lemma C.1).

    ``sum_{k=1}^n (1 - p)^{k-1} = (1 - (1 - p)^n) / p``, ``p = cap_measure(delta, d)``;
    tends to ``1/p`` as ``n -> inf``. Needs ``0 < delta <= pi``.
    """
    p = cap_measure(delta, d)
    require(p > 0.0, "delta must be > 0")
    with np.errstate(divide="ignore"):  # log1p(-1) = -inf at delta = pi gives p = 1, count 1
        return -np.expm1(n * np.log1p(-p)) / p


@cache
def renyi_constant() -> float:
    """Renyi's parking constant ``c_R = int_0^inf exp(-2 Ein(x)) dx`` (Section C.4).

    ``Ein(x) = int_0^x (1 - e^{-u})/u du = gamma + ln x + E_1(x)``; by quadrature,
    ``c_R = 0.74759792025341...``.
    """

    def integrand(x: float) -> float:
        return math.exp(-2.0 * (np.euler_gamma + math.log(x) + exp1(x)))

    value, _ = quad(integrand, 0.0, math.inf, epsabs=1e-13, epsrel=1e-12)
    return value


def renyi_saturated_count(delta: ArrayLike) -> FloatArray:
    """Mean number of Renyi centres of an infinite i.i.d. uniform sequence on S^1 (C.4).

    ``c_R 2 pi / delta``: the first centre leaves an arc of ``2 pi / delta - 1`` car lengths,
    where Renyi parking gives ``c_R x + c_R - 1`` cars up to a superexponentially small
    error (Dvoretzky-Robbins); ~1e-8 absolute already at ``delta = 0.5``. Finite n falls short.
    """
    return renyi_constant() * 2.0 * math.pi / np.asarray(delta, dtype=np.float64)


# ------------------------------------------------------------------- Lemma A.1


def interaction(x: ArrayLike, beta: ArrayLike) -> tuple[FloatArray, FloatArray]:
    """``h(x) = e^{beta(cos x - 1)} sin x`` (IntPot) and ``g = h' = e^{beta(cos x - 1)}
    (beta cos^2 x + cos x - beta)`` (Lemma A.1), x in radians; broadcasts x against beta."""
    x, beta = np.asarray(x, dtype=np.float64), np.asarray(beta, dtype=np.float64)
    cos = np.cos(x)
    weight = np.exp(beta * (cos - 1.0))
    return weight * np.sin(x), weight * (beta * cos**2 + cos - beta)


def tau_star(beta: ArrayLike) -> FloatArray:
    """Maximiser ``tau*_beta`` of h on ``[0, pi]`` (Lemma A.1), radians, ``beta >= 0``.

    ``cos tau* = (-1 + sqrt(4 beta^2 + 1)) / (2 beta)``, evaluated without cancellation as
    ``1 - cos tau* = (1 + 1/(s + 2 beta)) / (s + 1)``, ``s = sqrt(4 beta^2 + 1)``, and
    ``tau* = 2 arcsin(sqrt((1 - cos tau*)/2))``.
    """
    beta = np.asarray(beta, dtype=np.float64)
    require(beta >= 0.0, "beta must be >= 0")
    s = np.sqrt(4.0 * beta**2 + 1.0)
    one_minus_cos = (1.0 + 1.0 / (s + 2.0 * beta)) / (s + 1.0)
    return 2.0 * np.arcsin(np.sqrt(0.5 * one_minus_cos))


# ------------------------------------------------------- Lemma 3.1 and two tokens


def first_token(t: ArrayLike, v: ArrayLike, x1: ArrayLike) -> FloatArray:
    """First token ``x_1(t) = e^{tV} x_1 / |e^{tV} x_1|`` (Lemma 3.1), any Q, K, beta.

    ``t`` (m,) times, ``v`` (d, d), ``x1`` (d,) unit; returns (m, d). Overflows once
    ``|e^{tV}|`` exceeds the float range (``t max Re(lambda) > ~700``).
    """
    t = np.atleast_1d(np.asarray(t, dtype=np.float64))
    v, x1 = np.asarray(v, dtype=np.float64), np.asarray(x1, dtype=np.float64)
    y = expm(t[:, None, None] * v) @ x1
    return y / np.linalg.norm(y, axis=-1, keepdims=True)


def _second_token_time(y: FloatArray, y0: float, beta: float) -> FloatArray:
    """Time for ``c`` to go from ``tanh(y0)`` to ``tanh(y)``: ``int (1 + e^{beta(1-s)})/(1-s^2)``.

    Partial fractions give ``(y - y0) + (1/2)[Ei(beta(1-c0)) - Ei(beta(1-c))]
    + (1/2) e^{2 beta} [E_1(beta(1+c0)) - E_1(beta(1+c))]``, with ``1 -+ c`` formed from y
    so that they keep relative precision.
    """

    def parts(y: FloatArray) -> tuple[FloatArray, FloatArray]:
        return 2.0 / (1.0 + np.exp(2.0 * y)), 2.0 / (1.0 + np.exp(-2.0 * y))

    minus, plus = parts(y)
    minus0, plus0 = parts(np.float64(y0))
    ei = expi(beta * minus0) - expi(beta * minus)
    e1 = math.exp(2.0 * beta) * (exp1(beta * plus0) - exp1(beta * plus))
    return (y - y0) + 0.5 * (ei + e1)


def second_token_cosine(t: ArrayLike, c0: float, beta: float) -> FloatArray:
    """``c(t) = <x_1, x_2(t)>`` for two tokens of CSA with ``V = Q = K = I`` (docs/papers/003.md §4).

    ``c' = (1 - c^2) / (1 + e^{beta(1 - c)})`` with ``c(0) = c0``: ``x_1`` is fixed and ``x_2``
    moves with weight ``1/(1 + e^{beta(1-c)})`` on ``x_1``. The separable ODE gives t(c) in
    closed form (``_second_token_time``), inverted by vectorised bisection in
    ``y = artanh(c)``. ``c0 = +-1`` are fixed points. Needs ``0 < beta <= 350``; for large
    ``beta (1 - c0)`` the times are ``~e^{beta(1-c0)}`` and only their float resolution limits c.

    Parameters
    ----------
    t : array_like
        Times ``>= 0``, any shape and order.
    c0 : float
        Initial cosine in ``[-1, 1]``.
    beta : float
        Inverse temperature in ``(0, 350]``.

    Returns
    -------
    c : ndarray
        Same shape as t, non-decreasing in t, 1.0 once ``1 - c`` is below one ulp.
    """
    t = np.asarray(t, dtype=np.float64)
    require((t >= 0.0) & np.isfinite(t), "t must be finite and >= 0")
    require(-1.0 <= c0 <= 1.0, "c0 must lie in [-1, 1]")
    require(0.0 < beta <= BETA_MAX, f"beta must lie in (0, {BETA_MAX}]")
    if abs(c0) == 1.0:
        return np.full(t.shape, float(c0))
    y0 = math.atanh(c0)
    lo = np.full(t.shape, y0)
    hi = np.full(t.shape, Y_MAX)
    for _ in range(BISECTIONS):
        mid = 0.5 * (lo + hi)
        early = _second_token_time(mid, y0, beta) < t
        lo, hi = np.where(early, mid, lo), np.where(early, hi, mid)
    return np.where(t > 0.0, np.tanh(lo), c0)  # tanh(atanh(c0)) may miss c0 by an ulp


# ------------------------------------------------------------------- Section 5


def scaling_exponent(
    beta: ArrayLike, counts: ArrayLike, n_boot: int = 2000, seed: int = 0
) -> tuple[float, float, float]:
    """Slope of ``log(mean count)`` against ``log beta`` with a 95% bootstrap interval.

    ``counts`` (n_beta, n_seeds): centre counts per beta and seed. Seeds (columns) are
    resampled jointly across beta, since a seed shares its initial tokens across beta.
    Prediction (Section 5, docs/papers/003.md §5 item 3): ``(d - 1)/2`` at ``delta = c beta^{-1/2}``.
    Returns ``(slope, low, high)``; deterministic for a given ``seed``.
    """
    log_beta = np.log(np.asarray(beta, dtype=np.float64)).ravel()
    counts = np.asarray(counts, dtype=np.float64)
    require(
        counts.ndim == 2 and counts.shape[0] == log_beta.size >= 2,
        "counts must have shape (n_beta >= 2, n_seeds)",
    )
    require(counts > 0.0, "counts must be > 0")
    n_seeds = counts.shape[1]
    centred = log_beta - log_beta.mean()

    def slope(means: FloatArray) -> FloatArray:  # means (..., n_beta)
        return np.log(means) @ centred / (centred @ centred)

    # A resample of the seeds is a multinomial draw of how often each seed is picked.
    rng = np.random.default_rng(seed)
    picked = rng.multinomial(n_seeds, np.full(n_seeds, 1.0 / n_seeds), size=n_boot)
    boot = slope(picked @ counts.T / n_seeds)
    low, high = np.percentile(boot, [2.5, 97.5])
    return float(slope(counts.mean(-1))), float(low), float(high)
