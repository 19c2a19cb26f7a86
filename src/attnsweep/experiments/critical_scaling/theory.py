"""Closed forms for critical attention scaling on the simplex (paper 000).

Model (Eqs. 3-5): tokens ``x_i`` in ``R^d``, ``y_i = x_i / ||x_i||``, scores
``beta <y_i, y_j>`` over all ``j`` (self included), ``beta = gamma ln n``,
``A`` the row softmax, ``ATT(y_i) = sum_j A_ij y_j`` and ``x'_i = ATT(y_i) + alpha x_i``.
Observables: the angle ratio ``lambda`` (Eq. 26) and the Jacobian norm ``eta`` (Eq. 27,
``alpha = 0``, Jacobian with respect to the raw ``X``).

Simplex (Assumption 1): ``||x_i||^2 = q`` and ``<y_i, y_j> = rho`` for ``i != j``. Then
every row of ``A`` holds the same two weights,

    p = A_ii = E / Z = 1 / z,    r = A_ij = F / Z = f / z    (i != j),

with ``E = e^beta``, ``F = e^(rho beta)``, ``Z = E + (n - 1) F`` (Eq. 8, Proof 1) and

    f = F / E = exp(-(1 - rho) beta) = n^(-gamma (1 - rho)),    z = Z / E = 1 + (n - 1) f.

Everything below is written in ``p`` and ``r``, i.e. the paper's expressions divided by
the matching power of ``E``. Since ``0 < f <= 1``, nothing overflows (``gamma`` up to
1e3, ``n`` up to 1e6 and beyond), and the forms are arranged as sums of non-negative
terms, so the cancellation of the leading ``beta^2 rho^2 (1 - rho)`` terms that Eq. 86
performs between Eqs. 90, 96 and 105 never happens in floating point. Both the
subcritical (``n f >> 1``) and supercritical (``n f << 1``) tails keep full relative
precision.

The derivations use the embedding ``y_m = sqrt(rho) e_0 + sqrt(1 - rho) e_m`` with
orthonormal ``e_0..e_n``. Every quantity here depends only on the Gram matrix
``rho 11^T + (1 - rho) I``, so the results hold for any realisation, ``d = n`` included.

Reference: *Critical attention scaling in long-context transformers*, Chen, Lin, Polyanskiy and
Rigollet (the copy used is the anonymous review version; its Eq. 90 is corrected here, see
``lambda_simplex`` and docs/papers/000.md §5; arXiv:2510.05554).
"""

from __future__ import annotations

import operator
from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike

from attnsweep.experiments.arrays import FloatArray, as_float, require

__all__ = [
    "eta_limit",
    "gamma_critical",
    "lambda_critical",
    "lambda_limit",
    "simplex_eta",
    "simplex_lambda",
    "simplex_tokens",
]


#: Default relative tolerance for deciding that ``gamma`` sits on ``1 / (1 - rho)``.
CRITICAL_RTOL = 1e-12


# --------------------------------------------------------------------------- helpers


def _check_rho(rho: FloatArray) -> None:
    require((rho >= 0.0) & (rho < 1.0), "rho must lie in [0, 1); rho = 1 is 0/0 in Eq. 26")


def _check_common(
    n: FloatArray | None, rho: FloatArray, gamma: FloatArray | None, q: FloatArray
) -> None:
    _check_rho(rho)
    if n is not None:
        require(n >= 2.0, "n must be >= 2 (Eq. 26 averages over pairs)")
    if gamma is not None:
        require((gamma >= 0.0) & np.isfinite(gamma), "gamma must be finite and >= 0")
    require((q > 0.0) & np.isfinite(q), "q must be finite and > 0")


def _scalar_if_0d(x: FloatArray) -> FloatArray:
    # numpy scalar for scalar inputs, array otherwise.
    return x[()] if np.ndim(x) == 0 else x


def _simplex_attention_weights(
    n: FloatArray, rho: FloatArray, beta: FloatArray
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Self weight ``p = E/Z``, cross weight ``r = F/Z`` and ``p - r`` (Eq. 3, Proof 1)."""
    x = (1.0 - rho) * beta
    with np.errstate(under="ignore"):
        f = np.exp(-x)  # F/E in (0, 1]; underflows harmlessly to 0
    z = 1.0 + (n - 1.0) * f  # Z/E >= 1
    p = 1.0 / z
    r = f / z
    p_minus_r = -np.expm1(-x) / z  # (1 - f)/z without cancellation at small beta
    return p, r, p_minus_r


def _regime(rho: FloatArray, gamma: FloatArray, rtol: float) -> FloatArray:
    """-1 subcritical, 0 critical, +1 supercritical, by ``gamma`` vs ``1/(1 - rho)``."""
    gamma_c = 1.0 / (1.0 - rho)
    critical = np.abs(gamma - gamma_c) <= rtol * gamma_c
    return np.where(critical, 0.0, np.sign(gamma - gamma_c))


# ------------------------------------------------------------------------ public API


def gamma_critical(rho: ArrayLike) -> FloatArray:
    """Critical scaling ``gamma_c = 1 / (1 - rho)`` (Theorems 2.1 and 2.3).

    Parameters
    ----------
    rho : array_like
        Pairwise cosine ``<y_i, y_j>``, in ``[0, 1)``.

    Returns
    -------
    gamma_c : ndarray or numpy scalar
        Same shape as ``rho``.

    Raises
    ------
    ValueError
        If any ``rho`` lies outside ``[0, 1)``.

    Examples
    --------
    >>> float(gamma_critical(0.5))
    2.0
    """
    rho = as_float(rho)
    _check_rho(rho)
    return _scalar_if_0d(1.0 / (1.0 - rho))


def simplex_lambda(
    n: ArrayLike,
    rho: ArrayLike,
    gamma: ArrayLike,
    alpha: ArrayLike = 0.0,
    q: ArrayLike = 1.0,
) -> FloatArray:
    """Exact finite-n angle ratio ``lambda`` (Eq. 26) of one layer on the simplex.

    On the simplex every pair has ``<y'_i, y'_j> = rho'`` and
    ``lambda = (1 - rho') / (1 - rho)``, with ``rho'`` from the quantities ``s, c, a, b`` of
    docs/papers/000.md §4 (Proof 1, Lemmas A.3-A.4, extended by Eq. 5's residual).

    Parameters
    ----------
    n : array_like
        Number of tokens, ``>= 2`` (need not be an integer: the form is analytic in n).
    rho : array_like
        Input cosine, in ``[0, 1)``.
    gamma : array_like
        Scaling, ``beta = gamma ln n``; ``>= 0``.
    alpha : array_like, default 0
        Residual weight of Eq. 5, ``>= 0``.
    q : array_like, default 1
        Squared token norm ``||x_i||^2``, ``> 0``. Enters only through ``alpha sqrt(q)``.

    Returns
    -------
    lam : ndarray or numpy scalar
        ``lambda``, broadcast over the inputs.

    Raises
    ------
    ValueError
        If ``rho`` is outside ``[0, 1)``, ``n < 2``, ``gamma < 0``, ``alpha < 0`` or
        ``q <= 0``.

    See Also
    --------
    lambda_limit : the ``n -> infinity`` limit (Theorem 2.1).

    Notes
    -----
    With ``p = A_ii``, ``r = A_ij`` (module docstring) and ``t = alpha sqrt(q)``, the
    outputs differ by ``x'_i - x'_j = sqrt(1 - rho) (t + p - r) (e_i - e_j)``, so

        lambda = (t + p - r)^2 / ||x'_i||^2,
        ||x'_i||^2 = t^2 + 2 t s + a,    s = p + (n - 1) rho r,
        a = ||ATT(y_i)||^2 = rho + (1 - rho) (p^2 + (n - 1) r^2).

    This equals ``(1 - rho') / (1 - rho)`` of docs/papers/000.md §4, with
    ``rho' = (t^2 rho + 2 t c + b) / (t^2 + 2 t s + a)``, but never forms ``1 - rho'``
    by subtraction, so ``lambda -> 0`` (subcritical) keeps full relative precision.

    Examples
    --------
    >>> round(float(simplex_lambda(10**6, 0.5, 0.0)), 12)  # uniform attention
    0.0
    """
    n, rho, gamma, alpha, q = map(as_float, (n, rho, gamma, alpha, q))
    _check_common(n, rho, gamma, q)
    require((alpha >= 0.0) & np.isfinite(alpha), "alpha must be finite and >= 0")
    beta = gamma * np.log(n)
    p, r, p_minus_r = _simplex_attention_weights(n, rho, beta)
    t = alpha * np.sqrt(q)
    with np.errstate(under="ignore"):  # r**2 may underflow deep in the supercritical phase
        s = p + (n - 1.0) * rho * r
        a = rho + (1.0 - rho) * (p * p + (n - 1.0) * r * r)
        lam = (t + p_minus_r) ** 2 / (t * t + 2.0 * t * s + a)
    return _scalar_if_0d(lam)


def simplex_eta(
    n: ArrayLike,
    d: ArrayLike,
    rho: ArrayLike,
    gamma: ArrayLike,
    q: ArrayLike = 1.0,
) -> FloatArray:
    """Exact finite-n Jacobian norm ``eta = ||d X'/d X||_F^2 / (n d)`` (Eq. 27), ``alpha = 0``.

    Equals Eq. 86 summed over ``i, j`` with ``S_R`` from Eq. 90 **corrected** (the
    ``beta e^(beta(1+rho)) n (n-1) (1-rho^2)`` term carries a factor 2, docs/papers/000.md
    §5 item 2), ``S_UR`` from Eq. 96 and ``S_UU`` from Eq. 105:
    ``eta = [Z^2 S_R - 2 Z S_UR + S_UU] / (q n d Z^4)``.

    Parameters
    ----------
    n : array_like
        Number of tokens, ``>= 2``.
    d : array_like
        Embedding dimension, ``>= 1``. The simplex exists only for ``d >= n``; ``d``
        enters only through ``tr I_d``, so ``d < n`` gives the formal continuation.
    rho : array_like
        Input cosine, in ``[0, 1)``.
    gamma : array_like
        Scaling, ``beta = gamma ln n``; ``>= 0``.
    q : array_like, default 1
        Squared token norm; ``eta`` scales as ``1/q``.

    Returns
    -------
    eta : ndarray or numpy scalar
        Broadcast over the inputs.

    Raises
    ------
    ValueError
        If ``rho`` is outside ``[0, 1)``, ``n < 2``, ``d < 1``, ``gamma < 0`` or
        ``q <= 0``.

    See Also
    --------
    eta_limit : the ``n -> infinity`` limit (Theorem 2.3).

    Notes
    -----
    Evaluated block by block, each block a sum of non-negative terms. With
    ``P_i = I - y_i y_i^T``, ``o_j = ATT(y_j)`` and ``C_i = sum_m A_im y_m y_m^T - o_i o_i^T``
    (Lemma B.1: ``dN/dx = P/||x||``, docs/papers/000.md §5 item 3):

    - diagonal blocks ``J_ii = q^(-1/2) (p P_i + beta C_i P_i)``:
      ``||J_ii||^2 q = p^2 (d-1) + 2 p beta tr(C_i P_i) + beta^2 ||C_i P_i||^2`` with
      ``tr(C_i P_i) = (1-rho) [rho p (1-p) + (n-1) r (1-r)]`` and
      ``||C_i P_i||^2 = (1-rho)^2 [rho m_i + (n-1) m_o]``, where ``C_i = (1-rho) M`` in the
      ``e`` basis with ``M = diag(w) - w w^T``, ``m_i = p^2 (1-p)^2 + (n-1) p^2 r^2`` and
      ``m_o = r^2 (1-r)^2 + p^2 r^2 + (n-2) r^4`` its squared column norms;
    - off-diagonal blocks ``J_ji = q^(-1/2) r (P_i + beta (y_i - o_j) (P_i y_j)^T)``:
      ``||J_ji||^2 q = r^2 [(d-2) + ||v||^2]`` with ``v = w_hat + beta ||w|| (y_i - o_j)``,
      ``w = P_i y_j``, ``||w||^2 = 1 - rho^2``, written out in the ``e`` basis.

    Here ``1 - p = (n-1) r`` is used instead of a subtraction. The sum over ``n`` diagonal
    and ``n (n-1)`` off-diagonal blocks agrees with the corrected Eq. 86 to rounding.

    Examples
    --------
    >>> eta = simplex_eta(10**6, 10**6, 0.5, 50.0)  # deep supercritical: (1 - 1/d)/q
    >>> bool(abs(eta - (1 - 1e-6)) < 1e-12)
    True
    """
    n, d, rho, gamma, q = map(as_float, (n, d, rho, gamma, q))
    _check_common(n, rho, gamma, q)
    require(d >= 1.0, "d must be >= 1")
    beta = gamma * np.log(n)
    p, r, _ = _simplex_attention_weights(n, rho, beta)
    with np.errstate(under="ignore"):  # powers of r underflow deep in the supercritical phase
        one_minus_p = (n - 1.0) * r
        one_minus_r = 1.0 - r  # r <= 1/n, no cancellation

        # Diagonal blocks (value path p P_i plus score path beta C_i P_i).
        trace_CP = (1.0 - rho) * (rho * p * one_minus_p + (n - 1.0) * r * one_minus_r)
        m_self = (p * one_minus_p) ** 2 + (n - 1.0) * (p * r) ** 2
        m_other = (r * one_minus_r) ** 2 + (p * r) ** 2 + (n - 2.0) * r**4
        frob_CP = (1.0 - rho) ** 2 * (rho * m_self + (n - 1.0) * m_other)
        diagonal = p * p * (d - 1.0) + 2.0 * p * beta * trace_CP + beta * beta * frob_CP

        # Off-diagonal blocks: (d - 2) + ||v||^2, v in the basis (e_0, e_i, e_j, e_rest).
        norm_w = np.sqrt((1.0 - rho) * (1.0 + rho))
        sqrt_1mr = np.sqrt(1.0 - rho)
        k = beta * norm_w * sqrt_1mr  # beta ||w|| sqrt(1 - rho)
        v_0 = (1.0 - rho) * np.sqrt(rho) / norm_w
        v_i = -rho * sqrt_1mr / norm_w + k * one_minus_r
        v_j = sqrt_1mr / norm_w - k * p
        v_rest_sq = (n - 2.0) * (k * r) ** 2
        off_diagonal = r * r * ((d - 2.0) + v_0**2 + v_i**2 + v_j**2 + v_rest_sq)

        eta = (diagonal + (n - 1.0) * off_diagonal) / (q * d)
    return _scalar_if_0d(eta)


def lambda_critical(rho: ArrayLike, alpha: ArrayLike = 0.0, q: ArrayLike = 1.0) -> FloatArray:
    """Critical-case limit of ``lambda`` at ``gamma = 1/(1 - rho)`` (Eq. 6; Eq. 7 for alpha = 0).

    With ``t = alpha sqrt(q)``:
    ``lambda_c = (t^2 + t + 1/4) / (t^2 + t (1 + rho) + (1 + 3 rho)/4)``, which is
    ``1 / (1 + 3 rho)`` for ``alpha = 0`` (``rho' -> 4 rho / (1 + 3 rho)``).

    Parameters
    ----------
    rho : array_like
        Input cosine, in ``[0, 1)``.
    alpha : array_like, default 0
        Residual weight, ``>= 0``.
    q : array_like, default 1
        Squared token norm, ``> 0``.

    Returns
    -------
    lam_c : ndarray or numpy scalar

    Examples
    --------
    >>> float(lambda_critical(1 / 3))
    0.5
    """
    rho, alpha, q = map(as_float, (rho, alpha, q))
    _check_common(None, rho, None, q)
    require((alpha >= 0.0) & np.isfinite(alpha), "alpha must be finite and >= 0")
    t = alpha * np.sqrt(q)
    lam_c = (t * t + t + 0.25) / (t * t + t * (1.0 + rho) + (1.0 + 3.0 * rho) / 4.0)
    return _scalar_if_0d(lam_c)


def simplex_gamma_star(
    n: ArrayLike, rho: ArrayLike, d: ArrayLike | None = None, level: float = 0.25, alpha: ArrayLike = 0.0
) -> FloatArray:
    """The boundary ``gamma*`` of the finite-n simplex, defined as the measured one is.

    ``d`` None: the first ``gamma`` at which ``simplex_lambda`` reaches ``lambda_critical(rho,
    alpha)`` (Eq. 6-7); NaN where that level is the supercritical 1 (``rho = 0``,
    ``alpha = 0``). ``d`` given: where ``simplex_eta / (1 - 1/d)`` (its supercritical plateau,
    Theorem 2.3 with ``q = 1``) first reaches ``level`` (the boundary step's 1/4; ``alpha = 0``).
    The first sign change on 400 values of ``gamma`` in ``[0, 8/(1 - rho)]`` brackets it, and
    ``scipy.optimize.brentq`` solves it to ``1e-12`` relative.

    Examples
    --------
    >>> round(float(simplex_gamma_star(10**4, 0.5)), 3)  # gamma_c = 2; the crossing sits on it
    2.0
    """
    from scipy.optimize import brentq  # the boundary step only: the planner imports this module, scipy-free

    def first_root(f: Callable[[FloatArray], FloatArray], top: float) -> float:
        grid = np.linspace(0.0, top, 400)
        sign = np.sign(f(grid))
        change = np.flatnonzero(sign[:-1] * sign[1:] <= 0)
        if change.size == 0:
            return np.nan
        lo = int(change[0])
        return brentq(lambda g: float(f(np.asarray(g))), grid[lo], grid[lo + 1], rtol=1e-12)

    def one(n: float, rho: float, d: float, alpha: float) -> float:
        top = 8.0 / (1.0 - rho)
        if np.isnan(d):
            target = float(lambda_critical(rho, alpha))
            if target >= 1.0 - 1e-12:
                return np.nan
            return first_root(lambda g: simplex_lambda(n, rho, g, alpha) - target, top)
        return first_root(lambda g: simplex_eta(n, d, rho, g) / (1.0 - 1.0 / d) - level, top)

    d = np.nan if d is None else d
    n, rho, d, alpha = np.broadcast_arrays(*map(as_float, (n, rho, d, alpha)))
    _check_rho(rho)
    out = np.array([one(*args) for args in zip(n.ravel(), rho.ravel(), d.ravel(), alpha.ravel())])
    return _scalar_if_0d(out.reshape(n.shape))


def lambda_limit(
    rho: ArrayLike,
    gamma: ArrayLike,
    alpha: ArrayLike = 0.0,
    q: ArrayLike = 1.0,
    *,
    rtol: float = CRITICAL_RTOL,
) -> FloatArray:
    """``n -> infinity`` limit of ``lambda`` on the simplex (Theorem 2.1, Eq. 6; Eq. 7).

    With ``t = alpha sqrt(q)``, ``lambda = (1 - rho')/(1 - rho)`` tends to

    - ``t^2 / (t^2 + 2 t rho + rho)`` if ``gamma < 1/(1 - rho)`` (0 for ``alpha = 0``),
    - :func:`lambda_critical` if ``gamma = 1/(1 - rho)``,
    - ``1`` if ``gamma > 1/(1 - rho)``.

    Parameters
    ----------
    rho : array_like
        Input cosine, in ``[0, 1)``.
    gamma : array_like
        Scaling, ``>= 0``.
    alpha : array_like, default 0
        Residual weight, ``>= 0``.
    q : array_like, default 1
        Squared token norm, ``> 0``.
    rtol : float, default 1e-12
        ``gamma`` counts as critical when ``|gamma - gamma_c| <= rtol * gamma_c``, so a
        grid value like ``20.0`` matches ``1/(1 - 0.95) = 19.999999999999982``.

    Returns
    -------
    lam_inf : ndarray or numpy scalar
        NaN where ``rho = 0``, ``alpha = 0`` and ``gamma`` is subcritical: Theorem 2.1
        assumes ``rho > 0``, and there its subcritical formula is ``0/0``.

    Notes
    -----
    At finite n the corrections scale as ``n^(-|1 - gamma (1 - rho)|)``; compare data
    with :func:`simplex_lambda`, not with this limit (docs/papers/000.md §4).

    Examples
    --------
    >>> [float(v) for v in lambda_limit(0.5, [1.0, 2.0, 3.0])]
    [0.0, 0.4, 1.0]
    """
    rho, gamma, alpha, q = map(as_float, (rho, gamma, alpha, q))
    _check_common(None, rho, gamma, q)
    require((alpha >= 0.0) & np.isfinite(alpha), "alpha must be finite and >= 0")
    t = alpha * np.sqrt(q)
    with np.errstate(invalid="ignore", divide="ignore"):
        subcritical = t * t / (t * t + 2.0 * t * rho + rho)
    regime = _regime(rho, gamma, rtol)
    lam = np.where(
        regime < 0, subcritical, np.where(regime == 0, lambda_critical(rho, alpha, q), 1.0)
    )
    return _scalar_if_0d(np.asarray(lam, dtype=np.float64))


def eta_limit(
    d: ArrayLike,
    rho: ArrayLike,
    gamma: ArrayLike,
    q: ArrayLike = 1.0,
    *,
    rtol: float = CRITICAL_RTOL,
) -> FloatArray:
    """``n -> infinity`` limit of ``eta`` on the simplex, ``alpha = 0`` (Theorem 2.3).

    ``0`` (Eq. 19), ``(1 - 1/d) / (4 q)`` (Eq. 20) or ``(1 - 1/d) / q`` (Eq. 21) for
    ``gamma <, =, > 1/(1 - rho)``. The critical value also needs ``beta^2 / d -> 0``,
    which ``d >= n`` provides.

    Parameters
    ----------
    d : array_like
        Embedding dimension, ``>= 1``.
    rho : array_like
        Input cosine, in ``[0, 1)``.
    gamma : array_like
        Scaling, ``>= 0``.
    q : array_like, default 1
        Squared token norm, ``> 0``.
    rtol : float, default 1e-12
        Tolerance for the critical case, as in :func:`lambda_limit`.

    Returns
    -------
    eta_inf : ndarray or numpy scalar

    Examples
    --------
    >>> [float(v) for v in eta_limit(4, 0.5, [1.0, 2.0, 3.0])]
    [0.0, 0.1875, 0.75]
    """
    d, rho, gamma, q = map(as_float, (d, rho, gamma, q))
    _check_common(None, rho, gamma, q)
    require(d >= 1.0, "d must be >= 1")
    plateau = (1.0 - 1.0 / d) / q
    regime = _regime(rho, gamma, rtol)
    eta = np.where(regime < 0, 0.0, np.where(regime == 0, 0.25 * plateau, plateau))
    return _scalar_if_0d(np.asarray(eta, dtype=np.float64))


def simplex_tokens(n: int, d: int, rho: float, q: float = 1.0) -> FloatArray:
    """An exact simplex configuration (Assumption 1).

    Row ``i`` is ``x_i = sqrt(q) (sqrt(1 - rho) e_i + t 1_n)`` in the first ``n``
    coordinates and zero beyond, with
    ``t = rho / (sqrt(1 - rho) + sqrt(1 - rho + n rho))`` (the positive root of
    ``n t^2 + 2 sqrt(1 - rho) t = rho``), so that ``||x_i||^2 = q`` and
    ``<y_i, y_j> = rho`` for ``i != j``.

    Parameters
    ----------
    n : int
        Number of tokens, ``>= 1``.
    d : int
        Dimension, ``>= n`` (the Gram matrix ``rho 11^T + (1 - rho) I`` has rank ``n``).
    rho : float
        Pairwise cosine, in ``[0, 1)``.
    q : float, default 1
        Squared norm, ``> 0``.

    Returns
    -------
    X : ndarray, shape (n, d), float64

    Raises
    ------
    ValueError
        If ``d < n``, ``n < 1``, ``rho`` is outside ``[0, 1)`` or ``q <= 0``.

    Examples
    --------
    >>> X = simplex_tokens(3, 4, 0.25, q=2.0)
    >>> np.allclose(X @ X.T, 2.0 * (0.25 + 0.75 * np.eye(3)))
    True
    """
    n = operator.index(n)
    d = operator.index(d)
    if n < 1:
        raise ValueError(f"n must be >= 1, got n={n}")
    if d < n:
        raise ValueError(f"d must be >= n for a simplex of n tokens, got d={d} < n={n}")
    rho_ = float(rho)
    q_ = float(q)
    if not 0.0 <= rho_ < 1.0:
        raise ValueError(f"rho must lie in [0, 1), got rho={rho_}")
    if not (q_ > 0.0 and np.isfinite(q_)):
        raise ValueError(f"q must be finite and > 0, got q={q_}")
    sqrt_1mr = np.sqrt(1.0 - rho_)
    t = rho_ / (sqrt_1mr + np.sqrt(1.0 - rho_ + n * rho_))
    X = np.zeros((n, d), dtype=np.float64)
    X[:, :n] = t
    X[np.arange(n), np.arange(n)] += sqrt_1mr
    return np.sqrt(q_) * X
