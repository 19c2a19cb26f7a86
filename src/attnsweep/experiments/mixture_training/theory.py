"""Closed forms and reference values for the two-mixture transformer (paper 002).

Model (Eq. 1): ``f(X) = ReLU(H_+(X) + b) - ReLU(H_-(X) + b)`` with heads
``H(X) = sum_l sum_h p_lh w^T x_h``, ``p_lh = softmax_h(x_h^T S x_l)`` and ``S = W_K^T W_Q``
(``mu^T S nu``: mu the key, nu the query). Loss ``l(z) = log(1 + e^{-z})`` at ``z = y f``;
``g(z) = 1 / (1 + e^z)``. Time ``t`` is gradient-flow time, ``lr x step``; every quantity here
is dimensionless. Tokens live in ``d = 2K`` coordinates ordered ``c_1..c_K, v_1..v_K``
(``c_k = e_k``, ``v_k = e_{K+k}``); head index 0 is the + head, 1 the - head.

Contents (section numbers of docs/papers/002.md):

- §6, stage 1 (infinite width, L = 3, uniform attention): the closed form of the neurons and
  the losses, the loss floor ``(1/2) log 2`` and the phase boundary ``T_0.5``;
- §6, stage 2 in its linear regime: the drive ``G_0``, the scores and Grams ``exp(2 B tau)``,
  the rate ``2 W / (9 (K - 1))`` and the time to reach a score ``s*``;
- §8: the Algorithm-1 step defaults; §6: the joint-GD reference ``t*`` table and its fit;
  line fits ``t* = B (K - K_0)`` with percentile-bootstrap intervals;
- §7 item 1: the Lemma 6.1 construction, as printed and corrected;
- §4 and footnote 1: the max margin of the attention features (min-norm point of a hull).

Reference: *Transformers provably learn two-mixture of linear classification via gradient flow*,
Yang, Wang, Lee and Liang.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
from numpy.typing import ArrayLike
from scipy.optimize import nnls
from scipy.special import wrightomega

from attnsweep.experiments.arrays import FloatArray, require

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "LineFit",
    "bootstrap_fit",
    "fit_linear_in_K",
    "lemma61",
    "logistic_loss",
    "loss_floor",
    "max_margin",
    "min_norm_point",
    "reference_tstar",
    "stage1",
    "stage1_end",
    "stage2_drive",
    "stage2_linear",
    "stage2_rate",
    "stage2_time",
    "stage_steps",
    "tstar_fit",
]


#: Algorithm 1 defaults (docs/papers/002.md §8): stage-1 steps per group, stage-2 overshoot, stage-3 steps.
STAGE1_STEPS_PER_K = 50
STAGE2_SAFETY = 1.5
STAGE3_STEPS = 2000
#: Relative size (to the largest row of Z) below which the min-norm point counts as 0.
MARGIN_RTOL = 1e-9


def _check_K(K: int) -> None:
    require(int(K) == K and K >= 2, f"K must be an integer >= 2, got {K!r}")


# --------------------------------------------------------------------------- stage 1


def loss_floor() -> float:
    """``(1/2) log 2``: the limit of ``L_pop`` while attention is uniform (docs/papers/002.md §6). Hard samples
    have ``f = 0`` exactly (Lemma 5.4), so they hold ``L_hard = log 2`` while ``L_easy -> 0``."""
    return 0.5 * math.log(2.0)


def logistic_loss(z: ArrayLike) -> FloatArray:
    """``l(z) = log(1 + e^{-z})`` (Section 2.2), overflow-free."""
    return np.logaddexp(0.0, -np.asarray(z, dtype=np.float64))


def _x_plus_exp_x_inverse(r: FloatArray) -> FloatArray:
    """The root x of ``x + e^x = r``: ``x = log omega(r)``, omega the Wright omega function
    (``omega + log omega = r``), exact for all real r with no overflow or cancellation."""
    return np.log(wrightomega(r))


def stage1_end(K: int, b: float = 0.5) -> float:
    """``T_0.5 = K (2b + e^{2b} - 1) / 4``: the end of phase 1.1, where ``2a = b`` and the
    off-label ReLU of the easy samples switches off (docs/papers/002.md §6; ``e K / 4`` at ``b = 1/2``)."""
    _check_K(K)
    require(b > 0, f"b must be > 0, got {b!r}")
    return K * (2.0 * b + math.exp(2.0 * b) - 1.0) / 4.0


def stage1(t: ArrayLike, K: int, b: float = 0.5) -> dict[str, FloatArray]:
    """Stage 1 at infinite width, L = 3 (docs/papers/002.md §6; Lemmas D.1-D.5 for K = 2), vectorised over t.

    Attention is uniform, so ``H = w^T sum_h x_h`` and, by symmetry, ``a = w_+^T v_k = -w_-^T v_k``
    and ``c = w_+^T c_k = w_-^T c_k`` for every k. On ``X = (c_k, y v_k, eps v_k')``:
    ``H_+- = c +- a (y + eps)``.

    - Hard (``eps = -y``): ``H_+ = H_- = c``, so ``f = 0`` and ``L_hard = log 2`` exactly.
    - Easy (``eps = y``): ``y f = ReLU(c + 2a + b) - ReLU(c - 2a + b)`` for both labels (the
      y = -1 sample is the mirror of the y = +1 one with the heads swapped).
      Phase 1.1, ``c = 0`` and ``2a <= b``: both ReLUs are on and ``y f = 4a``;
      ``da/dt = g(4a) / K``, i.e. ``4a + e^{4a} = 1 + 4t/K``.
      Phase 1.2, ``t > T_0.5``: ``c - 2a + b = -3c <= 0`` keeps the off-label ReLU off and
      ``y f = u = 2a + c + b``; ``da/dt = g(u)/(2K)``, ``dc/dt = g(u)/(4K)``, so
      ``u + e^u = 2b + e^{2b} + 5 (t - T_0.5) / (4K)``, ``c = (u - 2b)/5``, ``a = b/2 + 2c``.
    - Rates: ``dw_+/dt = E[g y s'_+ sum_h x_h]``; the hard terms average to 0 over y and (k, k'),
      the easy ones give ``(g/K) sum v`` (1.1) or ``(g/(4K)) (sum c + 2 sum v)`` (1.2). Nothing else
      switches, so this holds for every b > 0.

    Returns arrays shaped like ``t``: ``a``, ``c``, ``margin_easy`` (``y f`` of every easy
    sample), ``loss_easy = l(margin_easy)``, ``loss_hard = log 2`` and
    ``loss_pop = (loss_easy + loss_hard) / 2`` (P(hard) = 1/2 at L = 3).
    """
    t = np.asarray(t, dtype=np.float64)
    require(np.isfinite(t) & (t >= 0), "t must be finite and >= 0")
    t_half = stage1_end(K, b)
    first = t <= t_half
    a_first = _x_plus_exp_x_inverse(1.0 + 4.0 * t / K) / 4.0
    u = _x_plus_exp_x_inverse(2.0 * b + math.exp(2.0 * b) + 5.0 * (t - t_half) / (4.0 * K))
    c = np.where(first, 0.0, (u - 2.0 * b) / 5.0)
    a = np.where(first, a_first, b / 2.0 + 2.0 * c)
    margin_easy = np.where(first, 4.0 * a, u)
    loss_easy = logistic_loss(margin_easy)
    loss_hard = np.full_like(t, math.log(2.0))
    return {"a": a, "c": c, "margin_easy": margin_easy, "loss_easy": loss_easy,
            "loss_hard": loss_hard, "loss_pop": 0.5 * (loss_easy + loss_hard)}


# --------------------------------------------------------------------------- stage 2


def _centring(K: int) -> FloatArray:
    """``Pi = I - J/K``: the projection orthogonal to the all-ones vector of the K groups."""
    return np.eye(K) - np.full((K, K), 1.0 / K)


def stage2_rate(K: int, W: float) -> float:
    """``2 W / (9 (K - 1))``: growth rate of ``c_k^T S_+ v_j`` in the linear regime (docs/papers/002.md §6; the
    explicit rate of Lemma 5.5, mean over the conflicting samples, docs/papers/002.md §7 item 2)."""
    _check_K(K)
    return 2.0 * W / (9.0 * (K - 1))


def stage2_drive(K: int, W: float) -> FloatArray:
    """``G_0 = E[g y s'_+ G_+ | hard]`` of the + head at ``S = 0`` (docs/papers/002.md §3, §6), (2K, 2K) indexed
    [key, query]: ``(W / (9(K-1))) Pi`` on c-rows/v-cols, ``-(W / (18(K-1))) Pi`` on v-rows/c-cols,
    0 elsewhere, with ``W = w_+^T c_k`` at the end of stage 1. It is ``-dL_hard/dS_+``; the
    - head's drive has both cross blocks negated (Lemma C.4)."""
    _check_K(K)
    alpha = W / (9.0 * (K - 1))
    drive = np.zeros((2 * K, 2 * K))
    drive[:K, K:] = alpha * _centring(K)
    drive[K:, :K] = -0.5 * alpha * _centring(K)
    return drive


def stage2_linear(tau: ArrayLike, K: int, omega: float, W: float) -> dict[str, FloatArray]:
    """Linear regime of stage 2 at infinite width (docs/papers/002.md §6), vectorised over ``tau = t - T_1``.

    With ``G`` frozen at ``G_0`` (``stage2_drive``), ``[W_K, W_Q]`` evolves by ``exp(B tau)``,
    ``B = [[0, G_0], [G_0^T, 0]]``, so ``[[K~, S], [S^T, Q~]] = omega^2 exp(2 B tau)``. With
    ``alpha = W / (9(K-1))`` and ``Pi = I - J/K``:

    - ``c_k^T S v_j = omega^2 sinh(2 alpha tau) Pi_kj``, ``v_k^T S c_j = -omega^2 sinh(alpha tau) Pi_kj``,
      c-c and v-v scores 0;
    - ``K~_cc = Q~_vv = omega^2 [I + (cosh(2 alpha tau) - 1) Pi]``, ``K~_vv = Q~_cc`` the same at rate
      alpha; cross blocks of K~ and Q~ are 0.

    Returns ``S``, ``K_tilde``, ``Q_tilde`` of the + head, shaped ``tau.shape + (2K, 2K)`` and
    indexed [mu, nu] = ``mu^T M nu`` (for S: mu the key, nu the query), and the summaries
    ``s_same = mean_k c_k^T S v_k`` and ``s_cross = mean_{j != k} c_k^T S v_j`` shaped like tau.
    The - head has the same K~, Q~ and the cross blocks of S negated (Lemma C.4).
    """
    tau = np.asarray(tau, dtype=np.float64)
    _check_K(K)
    alpha = W / (9.0 * (K - 1))
    pi, eye = _centring(K), np.eye(K)
    cols = tau[..., None, None]
    fast, slow = 2.0 * alpha * cols, alpha * cols
    w2 = omega**2
    S = np.zeros((*tau.shape, 2 * K, 2 * K))
    S[..., :K, K:] = w2 * np.sinh(fast) * pi
    S[..., K:, :K] = -w2 * np.sinh(slow) * pi
    K_tilde, Q_tilde = np.zeros_like(S), np.zeros_like(S)
    K_tilde[..., :K, :K] = Q_tilde[..., K:, K:] = w2 * (eye + (np.cosh(fast) - 1.0) * pi)
    K_tilde[..., K:, K:] = Q_tilde[..., :K, :K] = w2 * (eye + (np.cosh(slow) - 1.0) * pi)
    s_same = w2 * np.sinh(2.0 * alpha * tau) * (1.0 - 1.0 / K)
    return {"S": S, "K_tilde": K_tilde, "Q_tilde": Q_tilde, "s_same": s_same, "s_cross": -s_same / (K - 1)}


def stage2_time(K: int, omega: float, W: float, s_star: float = 1.0) -> float:
    """``tau_2 = (9(K-1) / (2W)) arcsinh(K s* / ((K-1) omega^2))``: stage-2 time at which the linear
    regime's ``s_same`` reaches ``s*`` (docs/papers/002.md §6); ``O(log 1/omega)`` (Lemma E.3), linear in K - 1."""
    require(W > 0 and omega > 0 and s_star > 0, "W, omega and s_star must be > 0")
    return math.asinh(K * s_star / ((K - 1) * omega**2)) / stage2_rate(K, W)


def stage_steps(K: int, omega: float, lr: float, b: float = 0.5, s_star: float = 1.0) -> tuple[int, int, int]:
    """Algorithm 1 step defaults (docs/papers/002.md §8): ``n_1 = 50 K``; ``n_2 = ceil(1.5 tau_2 / lr)`` with
    ``tau_2 = stage2_time(K, omega, W, s*)`` and ``W = c`` of the stage-1 closed form at
    ``t = lr n_1``; ``n_3 = 2000``. K = 2, omega = 0.1, lr = 0.1 gives (100, 2091, 2000).
    ValueError if ``lr n_1 <= T_0.5`` (then W = 0: the linear regime never grows, tau_2 = inf)."""
    require(lr > 0, f"lr must be > 0, got {lr!r}")
    n_1 = STAGE1_STEPS_PER_K * K
    W = float(stage1(lr * n_1, K, b)["c"])
    require(W > 0, f"stage 1 (t = {lr * n_1:g}) ends before T_0.5 = {stage1_end(K, b):g}: W = 0")
    n_2 = math.ceil(STAGE2_SAFETY * stage2_time(K, omega, W, s_star) / lr)
    return n_1, n_2, STAGE3_STEPS


# --------------------------------------------------------------------------- boundary t*


#: docs/papers/002.md §6: first flow time with L_hard < (1/2) log 2, joint GD, infinite width, b = 1/2, lr 0.1.
_REFERENCE_TSTAR = {
    0.3: {2: 75.0, 3: 134.0, 4: 193.0, 8: 427.0},
    0.1: {2: 109.0, 3: 199.0, 4: 287.0, 8: 643.0},
    0.03: {2: 144.0, 3: 264.0, 4: 383.0, 8: 860.0},
    0.01: {2: 172.0, 3: 319.0, 4: 463.0},
}


def reference_tstar() -> pd.DataFrame:
    """The joint-GD reference ``t*`` of docs/papers/002.md §6: index omega, columns K, NaN where not run.
    Our own simulation (infinite width, b = 1/2, lr = 0.1), not a value from the paper."""
    import pandas as pd  # the one pandas use; the module stays numpy/scipy otherwise

    table = pd.DataFrame(_REFERENCE_TSTAR).T.sort_index(ascending=False)
    table.index.name, table.columns.name = "omega", "K"
    return table


def tstar_fit(K: ArrayLike, omega: ArrayLike) -> FloatArray:
    """Empirical fit of the reference table (docs/papers/002.md §6), NOT a theorem:
    ``t* ~= B(omega) (K - 0.8)``, ``B = 29 + 12.6 ln(1/omega^2)``."""
    K, omega = np.asarray(K, dtype=np.float64), np.asarray(omega, dtype=np.float64)
    return (29.0 + 12.6 * np.log(1.0 / omega**2)) * (K - 0.8)


def _fit_lines(K: FloatArray, tstar: FloatArray, weights: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Weighted least squares of every column of tstar (n_K, R) on ``B K - B K_0``; NaN for columns
    with a non-finite entry, and K_0 NaN where the line is flat (B = 0: no K_0)."""
    finite = np.isfinite(tstar).all(0)
    root = np.sqrt(weights)[:, None]
    design = np.stack([K, np.ones_like(K)], -1) * root
    coef = np.full((2, tstar.shape[1]), np.nan)
    if finite.any():
        coef[:, finite] = np.linalg.lstsq(design, tstar[:, finite] * root, rcond=None)[0]
    slope, intercept = coef
    tilted = np.isfinite(slope) & (slope != 0)
    K0 = np.full_like(slope, np.nan)
    K0[tilted] = -intercept[tilted] / slope[tilted]
    return slope, K0


def fit_linear_in_K(K: ArrayLike, tstar: ArrayLike, weights: ArrayLike | None = None) -> tuple[float, float]:
    """``(B, K_0)`` of the least-squares line ``t* = B (K - K_0)`` (docs/papers/002.md §8), minimising
    ``sum_i weights_i r_i^2`` (weights: inverse variances; default 1). Points with non-finite t*
    are dropped; NaN if fewer than two distinct K remain."""
    K, tstar = np.asarray(K, dtype=np.float64), np.asarray(tstar, dtype=np.float64)
    weights = np.ones_like(K) if weights is None else np.asarray(weights, dtype=np.float64)
    keep = np.isfinite(tstar)
    if np.unique(K[keep]).size < 2:
        return math.nan, math.nan
    B, K0 = _fit_lines(K[keep], tstar[keep, None], weights[keep])
    return float(B[0]), float(K0[0])


class LineFit(NamedTuple):
    """``t* = B (K - K_0)`` with percentile-bootstrap intervals (``bootstrap_fit``)."""

    B: float
    K0: float
    B_low: float
    B_high: float
    K0_low: float
    K0_high: float


def bootstrap_fit(K: ArrayLike, tstar: ArrayLike, replicates: ArrayLike, level: float = 0.95) -> LineFit:
    """Percentile bootstrap of ``t* = B (K - K_0)`` (docs/papers/002.md §8).

    ``tstar`` (n_K,) is the point estimate per K and ``replicates`` (n_K, R) its bootstrap
    replicates over resampled seeds (the crossing of the resampled seed-mean hard loss, as the
    boundary computes it; runs of different K are independent draws). The line is fitted to ``tstar`` and to every
    replicate column; the interval is the (1-level)/2 and (1+level)/2 percentiles of the column
    fits. K with a non-finite point estimate are dropped, then columns with a non-finite entry."""
    K, tstar = np.asarray(K, dtype=np.float64), np.asarray(tstar, dtype=np.float64)
    B, K0 = fit_linear_in_K(K, tstar)
    keep = np.isfinite(tstar)
    replicates = np.asarray(replicates, dtype=np.float64)[keep]
    B_boot, K0_boot = _fit_lines(K[keep], replicates, np.ones(int(keep.sum())))
    q = 100.0 * np.array([(1.0 - level) / 2.0, (1.0 + level) / 2.0])
    B_low, B_high = _percentiles(B_boot, q)
    K0_low, K0_high = _percentiles(K0_boot, q)
    return LineFit(B, K0, B_low, B_high, K0_low, K0_high)


def _percentiles(values: FloatArray, q: FloatArray) -> tuple[float, float]:
    """The ``q`` percentiles of the finite ``values``; NaN if none is."""
    finite = values[np.isfinite(values)]
    if not finite.size:
        return math.nan, math.nan
    low, high = np.percentile(finite, q)
    return float(low), float(high)


# --------------------------------------------------------------------------- Lemma 6.1


def lemma61(K: int, C: float, corrected: bool, L: int = 3) -> tuple[FloatArray, FloatArray, float]:
    """Lemma 6.1's construction as ``(w (2, d), S (2, d, d), b)`` for Eq. 1, d = 2K.

    Scores (printed): ``S_+- = +-2C sum_k v_k c_k^T + C sum_k c_k c_k^T + C sum_k v_k v_k^T``, so
    ``S[v_k, c_k] = +-2C`` (key v_k, query c_k) and ``C I`` on the diagonal. Output (printed):
    ``f = H_+(w = sum v) - H_-(w = sum v)``.

    As C -> oo on ``X = (c_k, y v_k, eps_i v_k'_i)``: a v-query attends to itself (value
    ``sum v^T x = y`` or ``eps_i`` in both heads); the c_k query of the + head attends to ``y v_k``
    if y = +1 (value 1) and to c_k if y = -1 (value 0); that of the - head to c_k if y = +1 (0)
    and to ``-v_k`` if y = -1 (value -1). Hence ``H_+(sum v) = [y=1] + y + sum eps`` and
    ``H_-(sum v) = -[y=-1] + y + sum eps``:

    - printed: ``f = H_+ - H_- = 1`` on every sample (half are wrong; docs/papers/002.md §7 item 1);
    - corrected (docs/papers/002.md §7 item 1, consistent with Lemma C.4): ``w_- = -sum v``, i.e.
      ``f = H_+(sum v) + H_-(sum v) = 3y + 2 sum eps``; ``y f = 5`` (easy) or ``1`` (hard) at L = 3
      for every K, but ``y f = -1`` at L = 4 when both distractors oppose y (75 % correct).

    In Eq. 1 both ReLUs must stay active so that ``f = (H_+ + b) - (H_- + b)``:
    ``|H| <= sum_l sum_h p_lh |w^T x_h| <= L`` because ``|(sum v)^T x| <= 1`` on every token, so
    ``b = L + 1`` keeps ``H + b >= 1``.
    """
    _check_K(K)
    d = 2 * K
    sum_v = np.r_[np.zeros(K), np.ones(K)]
    pairing = np.zeros((d, d))
    pairing[K + np.arange(K), np.arange(K)] = 1.0  # sum_k v_k c_k^T: key v_k, query c_k
    S = np.stack([2.0 * C * pairing + C * np.eye(d), -2.0 * C * pairing + C * np.eye(d)])
    w = np.stack([sum_v, -sum_v if corrected else sum_v])
    return w, S, float(L + 1)


# --------------------------------------------------------------------------- max margin


def min_norm_point(Z: ArrayLike) -> FloatArray:
    """The point of ``conv{rows of Z}`` (N, p) nearest 0, exactly, by Lawson-Hanson least-distance
    programming: NNLS ``min_{u >= 0} |Z^T u|^2 + (1^T u - 1)^2`` has ``u = s lambda`` with
    ``lambda`` the min-norm convex weights and ``s = 1 / (1 + delta^2)``, so the point is
    ``Z^T u / 1^T u`` (no penalty weight, no tolerance). Rows are scaled to unit max norm first."""
    Z = np.asarray(Z, dtype=np.float64)
    require(Z.ndim == 2 and Z.shape[0] >= 1, "Z must be (N, p) with N >= 1")
    scale = np.linalg.norm(Z, axis=1).max()
    if scale == 0:
        return np.zeros(Z.shape[1])
    A = np.vstack([Z.T / scale, np.ones(Z.shape[0])])
    target = np.zeros(A.shape[0])
    target[-1] = 1.0
    u, _ = nnls(A, target)
    return Z.T @ u / u.sum()


def max_margin(Z: ArrayLike) -> float:
    """Max margin ``gamma = max_{|theta| = 1} min_i theta^T z_i`` of the rows of ``Z = y F(X)``
    (docs/papers/002.md §4, footnote 1): the distance from 0 to ``conv{z_i}`` when 0 is outside, else 0
    (reported as 0 below ``1e-9`` times the largest row norm). ``theta = p / |p|`` for the
    min-norm point p (``min_norm_point``)."""
    Z = np.asarray(Z, dtype=np.float64)
    gamma = float(np.linalg.norm(min_norm_point(Z)))
    return gamma if gamma > MARGIN_RTOL * np.linalg.norm(Z, axis=1).max() else 0.0
