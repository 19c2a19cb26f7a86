"""Mean-field theory of noisy USA clustering on the sphere (paper 001 with noise).

Model: ``n`` tokens on ``S^{d-1}``, Q = K = V = I, unnormalised self-attention (USA) plus independent
Brownian noise, in Stratonovich form (Eq. N1)

    dx_i = (1/n) sum_j e^{beta <x_i, x_j>} P_{x_i} x_j dt + sigma P_{x_i} o dW_i,    P_x = I - x x^T

(Ito: add ``-(d - 1) sigma^2 / 2 x_i dt``). The coupling is ``K = 1 / sigma^2``; time is the flow's
own unit, ``beta`` and ``K`` are dimensionless. For ``n -> oo`` the density ``rho`` of the tokens
with respect to the *normalised* uniform measure ``dsigma`` (``int dsigma = 1``) solves (Eq. N2)

    d_t rho = (sigma^2 / 2) Lap rho - div(rho grad (W * rho) / beta),
    W(x, y) = e^{beta <x, y>},   (W * rho)(x) = int e^{beta <x, y>} rho(y) dsigma(y),

the gradient flow of the free energy, scaled by ``2 K`` (Eq. N3),

    F(rho) = int rho log rho dsigma - (K / beta) int int W rho rho dsigma dsigma,

whose stationary states solve ``rho = exp(c W * rho) / Z`` with ``c = 2 K / beta`` (Eq. N4).

Contents: the Funk-Hecke eigenvalues of ``W`` (Eq. N5), the linear growth rates at ``rho = 1``
(Eq. N6), the linear-stability threshold ``K_#`` (Eq. N7), the dimension's ``beta_*``, the curvature
of the clustered branch at ``K_#`` (Eq. N8), and a spectral solver for the zonal stationary states
(the clustered branch, its free energy, the critical coupling ``K_c``, the spinodal ``K_s``).
Derivations: docs/papers/noise.md.

References: *A mathematical perspective on Transformers*, Geshkovski, Letrouit, Polyanskiy and
Rigollet, arXiv:2312.10794 (the USA dynamics); *Phase transitions for the noisy transformer model in
arbitrary dimension*, Mun and Rosenzweig, arXiv:2606.05140 (``K_#``, ``beta_*``; the circle:
arXiv:2604.16288).
"""

# ruff: noqa: E741 -- the degree of a spherical harmonic is l, as in the maths
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike
from scipy.linalg import lu_factor, lu_solve
from scipy.optimize import brentq, minimize_scalar
from scipy.special import eval_jacobi, gammaln, ive, roots_jacobi, xlogy
from threadpoolctl import threadpool_limits

from attnsweep.experiments.arrays import FloatArray, as_float, require

__all__ = [
    "Branch",
    "Transition",
    "beta_star",
    "branch_curvature",
    "clustered_branch",
    "funk_hecke",
    "growth_rate",
    "k_sharp",
    "table",
    "transition",
    "zonal_kernel",
]

#: Below this argument ``log 0F1(; nu + 1; z^2 / 4)`` is its two-term series (next term < 1e-20).
Z_SERIES = 1e-3
#: Default Gauss-Jacobi nodes; ``transition`` doubles them (to N_MAX at most) until the branch is
#: resolved far enough, then solves on twice as many for its resolution.
N_NODES = 64
N_MAX = 1024
#: Continuation: first order parameter r, largest and smallest pseudo-arclength step in the
#: (r, log K/K_#) plane, largest Newton correction of log rho from the predictor (a larger one
#: halves the step: neighbours stay close enough to start Newton between them), last r, most points.
R_START = 1e-3
DS_MAX = 0.05
DS_MIN = 1e-9
DU_MAX = 0.5
R_MAX = 1 - 1e-9
MAX_POINTS = 5000
#: A profile counts as resolved while its two highest orthonormal Jacobi coefficients stay below
#: TAIL_TOL times its norm: the quadrature then integrates it, and W times it, to about that.
TAIL_TOL = 1e-12
#: Newton stops when its step is below this, relative to the terms of Eq. N4 (``log rho`` against
#: ``max(1, |c W * rho|)``, ``K / K_#`` against itself); at most NEWTON_ITER steps.
NEWTON_TOL = 1e-13
NEWTON_ITER = 30
#: Newton keeps its factorised Jacobian while each step is at least this many times smaller.
CHORD_RATE = 10.0
#: BLAS threads of the solver: its dense solves have at most 2 N_MAX + 2 unknowns, where threads
#: cost more than they bring (OpenBLAS on 2 cores: 8x slower with its default threads, measured).
BLAS_THREADS = 1
#: Tolerance of brentq (root of Delta F) and bounded Brent (spinodal) on the position along a
#: segment between branch points (a fraction of it).
X_TOL = 1e-12


# --------------------------------------------------------------------------- checks and helpers


def _check_beta(beta: FloatArray, positive: bool = False) -> None:
    ok = (beta > 0.0) if positive else (beta >= 0.0)
    require(ok & np.isfinite(beta), f"beta must be finite and {'>' if positive else '>='} 0")


def _check_d(d: ArrayLike) -> FloatArray:
    d = as_float(d)
    require((d >= 2) & (d == np.round(d)), "d must be an integer >= 2")
    return d


def _check_l(l: ArrayLike) -> FloatArray:
    l = as_float(l)
    require((l >= 0) & (l == np.round(l)), "l must be an integer >= 0")
    return l


def _log_hyp0f1(nu: FloatArray, z: FloatArray) -> FloatArray:
    """``log 0F1(; nu + 1; z^2 / 4) = log[Gamma(nu + 1) (2 / z)^nu I_nu(z)]`` for ``z >= 0``, ``nu >= -1/2``.

    ``ive`` (``I_nu e^{-z}``) keeps it finite for any ``z``; below Z_SERIES the series
    ``1 + q / (nu + 1) + q^2 / (2 (nu + 1)(nu + 2))``, ``q = z^2 / 4``, replaces the 0 * oo at ``z = 0``.
    """
    nu, z = np.broadcast_arrays(as_float(nu), as_float(z))
    small = z < Z_SERIES
    q = np.where(small, z, 0.0) ** 2 / 4.0
    series = np.log1p(q / (nu + 1.0) + q**2 / (2.0 * (nu + 1.0) * (nu + 2.0)))
    zl = np.where(small, 1.0, z)
    large = gammaln(nu + 1.0) + nu * np.log(2.0 / zl) + np.log(ive(nu, zl)) + zl
    return np.where(small, series, large)


def _log_funk_hecke(l: ArrayLike, beta: ArrayLike, d: ArrayLike) -> FloatArray:
    """``log lambda_l``: ``lambda_l = Gamma(d/2) / Gamma(l + d/2) (beta/2)^l 0F1(; l + d/2; beta^2/4)``."""
    l, beta, d = _check_l(l), as_float(beta), _check_d(d)
    _check_beta(beta)
    return gammaln(d / 2) - gammaln(l + d / 2) + xlogy(l, beta / 2) + _log_hyp0f1(l + d / 2 - 1, beta)


# --------------------------------------------------------------------------- closed forms


def funk_hecke(l: ArrayLike, beta: ArrayLike, d: ArrayLike) -> FloatArray:
    """Eigenvalue ``lambda_l`` of ``f -> W * f`` on degree-``l`` spherical harmonics (Eq. N5).

    ``lambda_l(beta, d) = Gamma(d/2) (2/beta)^{d/2 - 1} I_{l + d/2 - 1}(beta)``, by Funk-Hecke:
    ``lambda_l = int e^{beta t} P_l(t) (1 - t^2)^{(d-3)/2} dt / int (1 - t^2)^{(d-3)/2} dt`` with
    the Gegenbauer ``P_l`` normalised to ``P_l(1) = 1``. Dimensionless (``dsigma`` has mass 1);
    ``lambda_0 = 1`` and ``lambda_{l > 0} = 0`` at ``beta = 0``. Finite up to ``beta ~ 700``.
    """
    return np.exp(_log_funk_hecke(l, beta, d))


def k_sharp(beta: ArrayLike, d: ArrayLike) -> FloatArray:
    """Linear-stability threshold of ``rho = 1`` (Eq. N7), the coupling where ``gamma_1`` vanishes.

    ``K_# = beta / (2 lambda_1) = beta^{d/2} / (2^{d/2} Gamma(d/2) I_{d/2}(beta))
    = (d/2) / 0F1(; d/2 + 1; beta^2/4)``; ``d/2`` at ``beta = 0``, ``beta / (2 I_1(beta))`` for ``d = 2``.
    """
    beta, d = as_float(beta), _check_d(d)
    _check_beta(beta)
    return (d / 2) * np.exp(-_log_hyp0f1(d / 2, beta))


def growth_rate(l: ArrayLike, beta: ArrayLike, d: ArrayLike, k: ArrayLike) -> FloatArray:
    """Growth rate (1/time) of a degree-``l`` perturbation of ``rho = 1`` under Eq. N2 (Eq. N6).

    ``gamma_l = l (l + d - 2) [lambda_l / beta - 1 / (2 K)]``: ``-l (l + d - 2)`` is the
    Laplace-Beltrami eigenvalue, ``sigma^2 / 2 = 1 / (2 K)`` the diffusion, ``lambda_l / beta`` the
    drift. Since ``lambda_l`` decreases in ``l``, ``l = 1`` turns unstable first, at ``K_#``.
    """
    beta, k = as_float(beta), as_float(k)
    _check_beta(beta, positive=True)
    require((k > 0) & np.isfinite(k), "k must be finite and > 0")
    l, d = _check_l(l), _check_d(d)
    return l * (l + d - 2) * (funk_hecke(l, beta, d) / beta - 1.0 / (2.0 * k))


def _eigenvalue_ratio(beta: FloatArray, d: FloatArray) -> FloatArray:
    """``lambda_2 / lambda_1 = I_{d/2 + 1}(beta) / I_{d/2}(beta)``, increasing from 0 to 1 in beta."""
    return ive(d / 2 + 1, beta) / ive(d / 2, beta)


def beta_star(d: int) -> float:
    """The ``beta`` where ``I_{d/2 + 1}(beta) / I_{d/2}(beta) = 1/d`` (brentq, to ~1e-14 relative).

    There ``branch_curvature`` changes sign: the clustered branch leaves ``K_#`` forwards
    (continuous transition) for ``beta < beta_*`` and backwards (discontinuous) above.
    """
    d = int(_check_d(d))
    # ratio ~ beta / (d + 2) for small beta and -> 1: the root lies in (0, (d + 2) / d] ... (0, 2d + 10)
    return brentq(lambda b: _eigenvalue_ratio(b, d) - 1.0 / d, 1e-3, 2.0 * d + 10.0, xtol=1e-14, rtol=1e-15)


def branch_curvature(beta: ArrayLike, d: ArrayLike) -> FloatArray:
    """``C`` in ``K(r) / K_# = 1 + C r^2 + O(r^4)`` along the zonal branch, ``r = int t rho`` (Eq. N8).

    Landau expansion of Eq. N3 at fixed ``r`` (docs): ``C = d (d - (d - 1) / mu) / (d + 2)`` with
    ``mu = 1 - lambda_2 / lambda_1``, and on the branch ``Delta F = -(d C / 4) r^4 + O(r^6)``.
    ``C = 0`` exactly at ``beta_star(d)``; ``C -> d (d - (d-1)) / (d + 2) = d / (d + 2)`` as ``beta -> 0``.
    """
    beta, d = as_float(beta), _check_d(d)
    _check_beta(beta, positive=True)
    mu = 1.0 - _eigenvalue_ratio(beta, d)
    return d * (d - (d - 1) / mu) / (d + 2)


def zonal_kernel(t: ArrayLike, s: ArrayLike, beta: ArrayLike, d: ArrayLike) -> FloatArray:
    """Mean of ``e^{beta <x, y>}`` over the ``(d-2)``-sphere of ``y`` with ``<y, e> = s``, ``<x, e> = t``.

    ``k(t, s) = e^{beta t s} Gamma((d-1)/2) (2/z)^{(d-3)/2} I_{(d-3)/2}(z)``,
    ``z = beta sqrt((1 - t^2)(1 - s^2))``: the Funk-Hecke mean of ``e^{z <u, v>}`` on ``S^{d-2}``
    (``cosh z`` for ``d = 2``), so ``(W * rho)(t) = int k(t, s) rho(s) dmu(s)`` for zonal ``rho``,
    ``dmu`` the marginal of ``t`` under ``dsigma``.
    """
    return np.exp(_log_zonal_kernel(as_float(t), as_float(s), as_float(beta), _check_d(d)))


def _log_zonal_kernel(t: FloatArray, s: FloatArray, beta: FloatArray, d: FloatArray) -> FloatArray:
    z = beta * np.sqrt(np.clip((1 - t) * (1 + t) * (1 - s) * (1 + s), 0.0, None))
    return beta * t * s + _log_hyp0f1((d - 3) / 2, z)


# --------------------------------------------------------------------------- zonal solver


class _State(NamedTuple):
    """A solution of Eq. N4: order parameter ``r``, ``kappa = K / K_#``, ``u = log rho`` at the nodes."""

    r: float
    kappa: float
    u: FloatArray


class _Zonal:
    """Eq. N4 on ``N`` Gauss-Jacobi nodes in ``t``, in the unknowns ``u = log rho``, ``kappa = K / K_#``, ``r``.

    With ``M_ij = k(t_i, t_j) / lambda_1``, ``c W * rho = kappa (M (w rho))`` (since
    ``c = 2 K / beta = kappa / lambda_1``), and every quantity stays O(1) for large ``beta``.
    """

    def __init__(self, beta: float, d: int, n_nodes: int) -> None:
        a = (d - 3) / 2
        t, w = roots_jacobi(n_nodes, a, a)
        self.t, self.w = t, w / w.sum()  # dmu: weights of the normalised marginal, (1 - t^2)^{(d-3)/2}
        log_lambda_1 = _log_funk_hecke(1, beta, d)
        self.M = np.exp(_log_zonal_kernel(t[:, None], t[None, :], as_float(beta), as_float(d)) - log_lambda_1)
        self.lambda_0_over_1 = float(np.exp(_log_funk_hecke(0, beta, d) - log_lambda_1))
        top = np.array([eval_jacobi(l, a, a, t) for l in (n_nodes - 2, n_nodes - 1)])
        self.top = top / np.sqrt((top**2) @ self.w)[:, None]  # the two highest, orthonormal in L^2(dmu)

    def newton(self, guess: _State, normal: tuple[float, float], anchor: tuple[float, float]) -> _State:
        """Solve Eq. N4, ``sum w t e^u = r`` and ``normal . ((r, log kappa) - anchor) = 0`` from ``guess``.

        Eq. N4 on the nodes: ``u = kappa M w e^u - log sum w e^{kappa M w e^u}``. Chord iterations on
        the exact Jacobian, factorised anew whenever an iteration shrinks the step less than
        CHORD_RATE-fold (at the start, and as often as plain Newton where convergence is slow).
        """
        r, kappa, u = guess
        n = u.size
        lu, last = None, np.inf
        with np.errstate(over="ignore", invalid="ignore"):  # a diverging iterate ends in the check below
            for _ in range(NEWTON_ITER):
                wr = self.w * np.exp(u)
                h = self.M @ wr  # (W * rho) / lambda_1
                v = kappa * h
                log_z = v.max() + np.log(self.w @ np.exp(v - v.max()))
                constraint = normal[0] * (r - anchor[0]) + normal[1] * (np.log(kappa) - anchor[1])
                residual = np.concatenate([u - v + log_z, [wr @ self.t - r, constraint]])
                if not np.all(np.isfinite(residual)):
                    break
                if lu is None:
                    lu = lu_factor(self._jacobian(wr, h, v, log_z, kappa, normal), check_finite=False)
                step = lu_solve(lu, -residual, check_finite=False)
                u, kappa, r = u + step[:n], kappa + step[n], r + step[n + 1]
                size = max(np.abs(step[:n]).max() / max(1.0, np.abs(v).max()), abs(step[n]) / kappa, abs(step[n + 1]))
                if size < NEWTON_TOL:
                    return _State(float(r), float(kappa), u)
                if not size < last / CHORD_RATE:
                    lu = None
                last = size
        raise RuntimeError(f"Newton did not converge near r = {guess.r}")

    def _jacobian(self, wr, h, v, log_z, kappa, normal) -> FloatArray:
        """Jacobian of ``newton``'s residual in ``(u, kappa, r)``."""
        n = wr.size
        p = self.w * np.exp(v - log_z)
        J = np.zeros((n + 2, n + 2))
        A = J[:n, :n]
        np.multiply(self.M, -kappa * wr, out=A)
        A -= p @ A  # -(I - 1 p^T) kappa M diag(w rho)
        A[np.diag_indices(n)] += 1.0
        J[:n, n] = p @ h - h
        J[n, :n] = wr * self.t
        J[n, n + 1] = -1.0
        J[n + 1, n:] = normal[1] / kappa, normal[0]
        return J

    def at(self, r: float, guess: _State) -> _State:
        """The branch state with order parameter ``r`` (natural parameter)."""
        return self.newton(guess, (1.0, 0.0), (r, 0.0))

    def between(self, f: float, a: _State, b: _State) -> _State:
        """The branch state on the segment ``a -> b`` of the (r, log kappa) plane at fraction ``f``.

        It solves on the line through ``(1 - f) a + f b`` normal to ``b - a``, so it holds at a
        fold in ``r`` or in ``kappa`` alike.
        """
        start, end = np.array([a.r, np.log(a.kappa)]), np.array([b.r, np.log(b.kappa)])
        guess = _State((1 - f) * a.r + f * b.r, (1 - f) * a.kappa + f * b.kappa, (1 - f) * a.u + f * b.u)
        return self.newton(guess, tuple(end - start), tuple((1 - f) * start + f * end))

    def delta_f(self, state: _State) -> float:
        """``Delta F = F(rho) - F(1)`` at the same ``K`` (Eq. N3), from terms that are each O(r^2).

        ``F(1) = -(K / beta) lambda_0`` and ``int int W (rho - 1)^2 = int int W rho rho - lambda_0`` give
        ``Delta F = int (rho log rho - rho + 1) - (kappa / 2) <rho - 1, M (rho - 1)>``, which keeps its
        precision where ``Delta F ~ r^4`` near ``r = 0``.
        """
        u = state.u
        entropy = self.w @ (np.exp(u) * u - np.expm1(u))
        dw = self.w * np.expm1(u)
        return float(entropy - 0.5 * state.kappa * dw @ self.M @ dw)

    def free_energy(self, state: _State) -> tuple[float, float]:
        """``F(rho)`` and ``F(1) = -(K / beta) lambda_0``, with ``K / beta = kappa / (2 lambda_1)`` (Eq. N3)."""
        wr = self.w * np.exp(state.u)
        return float(wr @ state.u - 0.5 * state.kappa * wr @ self.M @ wr), -0.5 * state.kappa * self.lambda_0_over_1

    def resolved(self, state: _State) -> bool:
        """True while the two highest Jacobi coefficients of ``rho`` are below TAIL_TOL times its L^2 norm."""
        rho = np.exp(state.u)
        return bool(np.abs(self.top @ (self.w * rho)).max() < TAIL_TOL * np.sqrt(self.w @ rho**2))

    def trace(self, d: int) -> list[_State]:
        """The branch from the uniform state until a profile is not resolved (not kept) or ``r`` reaches R_MAX.

        Two natural steps in ``r`` from linear theory (``rho = 1 + d r t`` at ``K_#``), then
        pseudo-arclength in the (r, log kappa) plane, which passes folds in either: secant
        predictor, step DS_MAX at most and at most a quarter of ``1 - r`` in ``r``, halved when
        Newton fails or corrects ``log rho`` by DU_MAX or more, doubled after each success.
        """
        uniform = _State(0.0, 1.0, np.zeros_like(self.t))
        states = [uniform]
        for r in (R_START, 2 * R_START):
            states.append(self.at(r, _State(r, 1.0, d * r * self.t)))
        ds = DS_MAX
        while states[-1].r < R_MAX:
            require(len(states) < MAX_POINTS and states[-1].r > 0, "the branch does not reach r -> 1")
            prev, last = states[-2], states[-1]
            chord = np.array([last.r - prev.r, np.log(last.kappa / prev.kappa)])
            length = np.hypot(*chord)
            tangent = chord / length
            if tangent[0] > 0:
                ds = min(ds, (1 - last.r) / (4 * tangent[0]))
            f = ds / length
            u = last.u + f * (last.u - prev.u)
            guess = _State(last.r + ds * tangent[0], last.kappa * np.exp(ds * tangent[1]), u)
            anchor = (guess.r, np.log(guess.kappa))
            try:
                state = self.newton(guess, tuple(tangent), anchor)
                converged = np.abs(state.u - guess.u).max() < DU_MAX
            except RuntimeError:
                converged = False
            if not converged:
                require(ds > DS_MIN, f"continuation stalled at r = {last.r}")
                ds /= 2
                continue
            if not self.resolved(state):
                break
            states.append(state)
            ds = min(2 * ds, DS_MAX)
        return states


@dataclass(frozen=True)
class Branch:
    """The zonal clustered branch of Eq. N4, from the bifurcation (``r = 0``, ``K = K_#``) on.

    ``nodes`` and ``weights``: the Gauss-Jacobi rule for ``dmu`` (weights sum to 1). Per branch point
    (first axis): ``r = int t rho dsigma``, the coupling ``k`` (``K``), ``free_energy`` ``F(rho)`` and
    ``free_energy_uniform`` ``F(1)`` of Eq. N3 at that ``K``, ``delta_f = F(rho) - F(1)`` (computed
    directly, not as the difference), and ``log_rho`` at the nodes. Point 0 is the uniform state.
    """

    beta: float
    d: int
    k_sharp: float
    nodes: FloatArray
    weights: FloatArray
    r: FloatArray
    k: FloatArray
    free_energy: FloatArray
    free_energy_uniform: FloatArray
    delta_f: FloatArray
    log_rho: FloatArray


def clustered_branch(beta: float, d: int, n_nodes: int = N_NODES) -> Branch:
    """Trace the zonal clustered branch of Eq. N4 by continuation from the bifurcation at ``K_#``.

    Zonality: the entropy is invariant under symmetric decreasing rearrangement about an axis, and
    ``int int e^{beta <x, y>} rho rho`` does not decrease under it (Baernstein-Taylor rearrangement
    inequality on the sphere, the kernel increasing in ``<x, y>``), so global minimisers of Eq. N3 may
    be taken zonal and non-increasing in the angle to the axis: functions of ``t = <x, e>``.

    Scheme: ``n_nodes`` Gauss-Jacobi nodes (``alpha = beta_J = (d - 3)/2``) carry ``dmu``, the
    marginal of ``t``; ``(W * rho)(t_i) = sum_j k(t_i, t_j) w_j rho_j`` (``zonal_kernel``). Unknowns
    ``log rho`` at the nodes, ``K`` and ``r``; equations: Eq. N4, ``int t rho = r`` and the
    continuation's constraint (``_Zonal.trace``), solved by Newton. The branch ends before the first
    profile the quadrature does not resolve: ``rho``'s two highest orthonormal Jacobi coefficients
    above TAIL_TOL of its norm.
    """
    beta, d = float(beta), int(_check_d(d))
    _check_beta(as_float(beta), positive=True)
    problem = _Zonal(beta, d, n_nodes)
    with threadpool_limits(BLAS_THREADS, user_api="blas"):
        states = problem.trace(d)
    ks = float(k_sharp(beta, d))
    energies = np.array([problem.free_energy(state) for state in states])
    return Branch(
        beta=beta,
        d=d,
        k_sharp=ks,
        nodes=problem.t,
        weights=problem.w,
        r=np.array([state.r for state in states]),
        k=ks * np.array([state.kappa for state in states]),
        free_energy=energies[:, 0],
        free_energy_uniform=energies[:, 1],
        delta_f=np.array([problem.delta_f(state) for state in states]),
        log_rho=np.array([state.u for state in states]),
    )


@dataclass(frozen=True)
class Transition:
    """The phase transition of Eq. N3 at one ``(beta, d)``, from the zonal branch on ``n_nodes`` nodes.

    ``k_c``: the smallest ``K`` at which a branch state has ``Delta F <= 0`` (``= k_sharp`` when
    ``continuous``); ``k_s``: the spinodal, min of ``K`` along the branch (its saddle-node;
    ``= k_sharp`` when the branch leaves forwards); ``r_c``: ``r`` of the clustered state at ``k_c``
    (the jump of the order parameter; 0 when continuous). ``resolution``: the largest change of
    ``k_c / k_sharp``, ``k_s / k_sharp`` and ``r_c`` between ``n_nodes / 2`` and ``n_nodes`` nodes.
    """

    beta: float
    d: int
    n_nodes: int
    k_sharp: float
    k_c: float
    k_s: float
    r_c: float
    continuous: bool
    resolution: float


def _transition_at(beta: float, d: int, n_nodes: int) -> tuple[float, float, float] | None:
    """``(K_c / K_#, K_s / K_#, r_c)`` on ``n_nodes`` nodes (see Transition); None when the resolved
    branch ends before ``Delta F <= 0`` with ``K`` increasing, i.e. before ``K_c`` is bracketed."""
    problem = _Zonal(beta, d, n_nodes)
    states = problem.trace(d)
    delta_fs = [0.0] + [problem.delta_f(state) for state in states[1:]]
    if delta_fs[-1] > 0.0 or states[-1].kappa < states[-2].kappa:
        return None

    def along(x: float) -> _State:  # x in [i, i + 1]: the segment from point i to point i + 1
        i = min(int(x), len(states) - 2)
        return problem.between(x - i, states[i], states[i + 1])

    # Delta F decreases as K grows along the branch (dDelta F / dK = -(1/beta) int int W (rho - 1)^2 < 0),
    # so the smallest K with Delta F <= 0 sits at r = 0 (K_#), at a root of Delta F or at a branch point.
    candidates = [(state.kappa, state.r) for state, delta_f in zip(states, delta_fs) if delta_f <= 0.0]
    for i in range(1, len(states) - 1):
        if (delta_fs[i] > 0.0) != (delta_fs[i + 1] > 0.0):
            root = along(brentq(lambda x: problem.delta_f(along(x)), i, i + 1, xtol=X_TOL))
            candidates.append((root.kappa, root.r))
    kappa_c, r_c = min(candidates)
    i = int(np.argmin([state.kappa for state in states]))
    kappa_s = states[i].kappa
    if i > 0:  # an interior minimum (the last point has K increasing): refine it over its two segments
        spinodal = minimize_scalar(
            lambda x: along(x).kappa, bounds=(i - 1, i + 1), method="bounded", options={"xatol": X_TOL}
        )
        kappa_s = min(float(spinodal.fun), kappa_s)
    return kappa_c, kappa_s, r_c


def transition(beta: float, d: int, n_nodes: int = N_NODES) -> Transition:
    """``K_c``, ``K_s`` and ``r_c`` of Eq. N3 (see Transition).

    Solved on ``n = n_nodes`` nodes, doubled (up to N_MAX) until the resolved branch brackets
    ``K_c``, then on ``2 n`` nodes: the values are the ``2 n`` solve's, ``resolution`` their change
    from the ``n`` solve. Assumes the untraced rest of the branch (``r -> 1``, ``K -> oo``, past
    ``Delta F <= 0`` with ``K`` increasing) holds no state with a smaller ``K``.
    """
    beta, d = float(beta), int(_check_d(d))
    _check_beta(as_float(beta), positive=True)
    n = n_nodes
    with threadpool_limits(BLAS_THREADS, user_api="blas"):
        while (coarse := _transition_at(beta, d, n)) is None:
            require(2 * n <= N_MAX, f"K_c not bracketed on {N_MAX} nodes at beta = {beta}, d = {d}")
            n *= 2
        fine = _transition_at(beta, d, 2 * n)
    require(fine is not None, f"K_c not bracketed on {2 * n} nodes at beta = {beta}, d = {d}")
    kappa_c, kappa_s, r_c = fine
    ks = float(k_sharp(beta, d))
    return Transition(
        beta=beta,
        d=d,
        n_nodes=2 * n,
        k_sharp=ks,
        k_c=ks * kappa_c,
        k_s=ks * kappa_s,
        r_c=float(r_c),
        continuous=bool(r_c == 0.0),
        resolution=float(np.abs(np.subtract(fine, coarse)).max()),
    )


def table(dims_star: range = range(2, 17), betas: range = range(1, 9), dims: tuple[int, ...] = (2, 3, 8)) -> str:
    """Markdown: ``beta_*`` for ``dims_star``, then ``K_#``, ``K_c / K_#``, ``K_s / K_#``, ``r_c``, the nodes of the
    finer solve and the resolution (see Transition) per ``(d, beta)``."""
    lines = ["| d | beta_* |", "|---|---|"]
    lines += [f"| {d} | {beta_star(d):.12f} |" for d in dims_star]
    lines += [
        "",
        "| d | beta | K_# | K_c / K_# | K_s / K_# | r_c | nodes | resolution |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for d in dims:
        for beta in betas:
            tr = transition(beta, d)
            kc = "1 (continuous)" if tr.continuous else f"{tr.k_c / tr.k_sharp:.9f}"
            lines.append(
                f"| {d} | {beta} | {tr.k_sharp:.9g} | {kc} | {tr.k_s / tr.k_sharp:.9f} | {tr.r_c:.6f} "
                f"| {tr.n_nodes} | {tr.resolution:.1e} |"
            )
    return "\n".join(lines)
