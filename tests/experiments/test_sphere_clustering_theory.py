"""Tests of the clustering closed forms of paper 001 (sphere_clustering/theory.py).

Truth comes from outside the module: the token vector fields (SA, USA) evaluated on explicit
embeddings and integrated by a small RK4, scipy quadrature and ODE events on the paper's own
form of Eqs. 6.9-6.10, 30-digit mpmath, elementary closed forms at beta = 0, exact small
Wendel probabilities, and hand computations.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import mpmath
import numpy as np
import pytest
from scipy.integrate import quad, solve_ivp

from attnsweep.experiments.sphere_clustering import theory

MODELS = ("sa", "usa")


# ------------------------------------------------------------------ independent truth


def paper_rate(gamma: float, beta: float, n: int, model: str) -> float:
    """Eq. 6.9 / 6.10 exactly as printed (SA not rescaled)."""
    core = math.exp(beta * gamma) * (1.0 - gamma) * ((n - 1) * gamma + 1.0)
    if model == "sa":
        return 2.0 * core / (math.exp(beta) + (n - 1) * math.exp(beta * gamma))
    return 2.0 * core / n


def inverse_rate_at_gap(v: float, beta: float, n: int, model: str) -> float:
    """1 / (Eq. 6.9 or 6.10) at gamma = 1 - v, with v passed exactly."""
    core = math.exp(beta * (1.0 - v)) * v * ((n - 1) * (1.0 - v) + 1.0)
    if model == "sa":
        return (math.exp(beta) + (n - 1) * math.exp(beta * (1.0 - v))) / (2.0 * core)
    return n / (2.0 * core)


def field(X: np.ndarray, beta: float, model: str) -> np.ndarray:
    """x_i' = P^perp_{x_i}(sum_j A_ij x_j), rows of X are tokens (Eq. 2.6 and USA)."""
    S = beta * X @ X.T
    if model == "sa":
        W = np.exp(S - S.max(axis=1, keepdims=True))
        A = W / W.sum(axis=1, keepdims=True)
    else:
        A = np.exp(S) / X.shape[0]
    V = A @ X
    return V - (V * X).sum(axis=1, keepdims=True) * X


def equal_cosine_tokens(gamma: float, n: int) -> np.ndarray:
    """x_m = sqrt(gamma) e_0 + sqrt(1 - gamma) e_m: unit vectors with all cosines gamma."""
    X = math.sqrt(1.0 - gamma) * np.eye(n, n + 1, k=1)
    X[:, 0] = math.sqrt(gamma)
    return X


def derivative(func: Callable[[np.ndarray], np.ndarray], t: np.ndarray, h: float) -> np.ndarray:
    """Five-point central difference, error O(h^4)."""
    return (8 * (func(t + h) - func(t - h)) - (func(t + 2 * h) - func(t - 2 * h))) / (12 * h)


def rk4(X: np.ndarray, beta: float, model: str, h: float, steps: int) -> np.ndarray:
    for _ in range(steps):
        k1 = field(X, beta, model)
        k2 = field(X + 0.5 * h * k1, beta, model)
        k3 = field(X + 0.5 * h * k2, beta, model)
        k4 = field(X + h * k3, beta, model)
        X = X + h / 6.0 * (k1 + 2 * k2 + 2 * k3 + k4)
    return X


# --------------------------------------------------------------- Eqs. 6.9 and 6.10


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("n", [2, 5, 32])
@pytest.mark.parametrize("beta", [0.0, 1.0, 4.0, 9.0])
def test_rates_equal_token_field(model: str, n: int, beta: float) -> None:
    # d<x_1, x_2>/dt = <x_1', x_2> + <x_1, x_2'> on tokens with all cosines gamma.
    rate = theory.gamma_rate_sa if model == "sa" else theory.gamma_rate_usa
    for gamma in [0.0, 0.2, 0.7, 0.99]:
        X = equal_cosine_tokens(gamma, n)
        V = field(X, beta, model)
        direct = V[0] @ X[1] + X[0] @ V[1]
        assert rate(gamma, beta, n) == pytest.approx(direct, rel=1e-12, abs=1e-15)
        assert rate(gamma, beta, n) == pytest.approx(paper_rate(gamma, beta, n, model), rel=1e-13)


def test_rates_vectorised_and_overflow_safe() -> None:
    gamma = np.linspace(0.0, 1.0, 11)
    beta = np.array([[0.0], [800.0]])
    sa = theory.gamma_rate_sa(gamma, beta, 32)
    assert sa.shape == (2, 11)
    assert np.all(np.isfinite(sa)) and np.all(sa >= 0.0)
    assert sa[:, -1].tolist() == [0.0, 0.0]
    assert theory.gamma_rate_usa(gamma, beta[0], 32) == pytest.approx(sa[0])  # beta = 0: same


# ----------------------------------------------------------- Theorem 6.8: gamma_beta(t)


@pytest.mark.parametrize(("model", "beta"), [("sa", 3.0), ("usa", 1.0)])
def test_theorem_6_8_rk4_tokens(model: str, beta: float) -> None:
    # n = 3 orthonormal tokens in R^3, integrated as vectors; all cosines follow gamma_beta.
    h, steps = 1e-3, 500
    X = np.eye(3)
    for k in range(1, 5):
        X = rk4(X, beta, model, h, steps)
        G = X @ X.T
        gamma = theory.gamma_curve(k * h * steps, beta, 3, model)
        assert np.diag(G) == pytest.approx(1.0, abs=1e-12)
        assert G[np.triu_indices(3, 1)] == pytest.approx(gamma, abs=1e-8)
    assert gamma > 0.1  # the check is not trivial


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize(("beta", "n"), [(0.5, 2), (4.0, 32), (9.0, 32), (2.0, 7)])
def test_gamma_curve_matches_independent_ode(model: str, beta: float, n: int) -> None:
    t = np.linspace(0.0, 12.0, 61)[::-1]  # any order
    sol = solve_ivp(
        lambda _t, y: [paper_rate(y[0], beta, n, model)],
        (0.0, 12.0),
        [0.0],
        method="DOP853",
        t_eval=t[::-1],
        rtol=1e-13,
        atol=1e-15,
    )
    assert theory.gamma_curve(t, beta, n, model) == pytest.approx(sol.y[0][::-1], abs=1e-9)


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("beta", [0.5, 4.0, 9.0])
def test_gamma_curve_derivative_is_the_rate(model: str, beta: float) -> None:
    n = 32
    t = np.array([0.3, 1.0, 3.0, 6.0]) * (30.0 if model == "sa" and beta == 9.0 else 1.0)
    g = theory.gamma_curve(t, beta, n, model)
    dg = derivative(lambda s: theory.gamma_curve(s, beta, n, model), t, 1e-3)
    rate = theory.gamma_rate_sa if model == "sa" else theory.gamma_rate_usa
    assert dg == pytest.approx(rate(g, beta, n), rel=1e-8, abs=1e-12)


def test_gamma_curve_beta_zero_closed_form() -> None:
    # beta = 0: gamma' = (2/n)(1 - gamma)((n-1) gamma + 1), so
    # gamma = (e^{2t} - 1)/(e^{2t} + n - 1).
    t = np.array([0.0, 0.01, 0.5, 2.0, 10.0])
    for n in [2, 32]:
        exact = np.expm1(2 * t) / (np.exp(2 * t) + n - 1)
        for model in MODELS:
            assert theory.gamma_curve(t, 0.0, n, model) == pytest.approx(
                exact, rel=1e-13, abs=1e-16
            )


def test_gamma_curve_shapes_and_limits() -> None:
    t = np.array([[5.0, 0.0, 1e3]])
    g = theory.gamma_curve(t, np.array([1.0, 4.0, 9.0]), 32)
    assert g.shape == (3, 1, 3)
    assert np.all(g[:, 0, 1] == 0.0)
    assert np.all(g[:, 0, 2] == 1.0)
    assert np.all(np.diff(theory.gamma_curve(np.linspace(0, 300, 301), 9.0, 32)) >= 0.0)


# ------------------------------------------------------------- Eq. 6.12: hitting time


def test_hitting_time_reference_value() -> None:
    assert float(theory.hitting_time(4.0, 32, 1e-3)) == pytest.approx(6.95350, abs=5e-6)


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("n", [2, 32])
@pytest.mark.parametrize("delta", [0.3, 1e-3, 1e-8])
def test_hitting_time_vs_scipy_quadrature(model: str, n: int, delta: float) -> None:
    betas = [0.0, 0.5, 4.0, 9.0, 20.0]
    got = theory.hitting_time(betas, n, delta, model)
    for beta, value in zip(betas, got):
        # in v = 1 - gamma = e^{-w}: exact endpoint (1 - 1e-8 is not) and a bounded integrand
        ref, _ = quad(
            lambda w, beta=beta: math.exp(-w) * inverse_rate_at_gap(math.exp(-w), beta, n, model),
            0.0,
            -math.log(delta),
            epsabs=0.0,
            epsrel=1e-13,
            limit=200,
        )
        assert value == pytest.approx(ref, rel=1e-10)


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize(("beta", "n"), [(20.0, 32), (50.0, 32), (300.0, 32), (400.0, 2)])
def test_hitting_time_vs_mpmath(model: str, beta: float, n: int) -> None:
    with mpmath.workdps(30):
        b, d, m = mpmath.mpf(beta), mpmath.mpf("1e-3"), n - 1

        def inv_rate(g: mpmath.mpf) -> mpmath.mpf:
            core = (1 - g) * (m * g + 1)
            if model == "sa":
                return (mpmath.exp(b * (1 - g)) + m) / (2 * core)
            return n * mpmath.exp(-b * g) / (2 * core)

        ref = mpmath.quad(inv_rate, [0, 1 / b, 0.5, 0.9, 1 - d])
        if model == "sa":  # the closed form of docs/papers/001.md §4, in 30 digits
            closed = (
                m / mpmath.mpf(2 * n) * mpmath.log((n - m * d) / d)
                + (mpmath.ei(b) - mpmath.ei(b * d)) / (2 * n)
                + mpmath.exp(b * n / m)
                / (2 * n)
                * (mpmath.e1(b / m) - mpmath.e1(b * (n - m * d) / m))
            )
            assert abs(closed - ref) < 1e-20 * ref
        assert float(theory.hitting_time(beta, n, 1e-3, model)) == pytest.approx(
            float(ref), rel=1e-12
        )


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("beta", [1.0, 4.0, 9.0])
def test_hitting_time_vs_ode_event(model: str, beta: float) -> None:
    n, delta = 32, 1e-3

    def reach(_t: float, y: np.ndarray) -> float:
        return y[0] - (1.0 - delta)

    reach.terminal = True
    sol = solve_ivp(
        lambda _t, y: [paper_rate(y[0], beta, n, model)],
        (0.0, 1e4),
        [0.0],
        method="DOP853",
        events=reach,
        rtol=1e-13,
        atol=1e-15,
    )
    t_star = theory.hitting_time(beta, n, delta, model)
    assert float(t_star) == pytest.approx(sol.t_events[0][0], rel=1e-9)
    assert float(theory.gamma_curve(t_star, beta, n, model)) == pytest.approx(
        1.0 - delta, abs=1e-12
    )


def test_hitting_time_monotone_in_beta_and_beta_zero() -> None:
    n, delta = 32, 1e-3
    beta = np.linspace(0.0, 50.0, 201)
    sa, usa = theory.hitting_time(beta, n, delta, "sa"), theory.hitting_time(beta, n, delta, "usa")
    assert np.all(np.diff(sa) > 0.0)  # SA: P ~ 1 lies at t > t*(beta), later for larger beta
    assert np.all(np.diff(usa) < 0.0)  # USA: speeds O(e^beta)
    assert (
        sa[0] == usa[0] == pytest.approx(0.5 * math.log((n - (n - 1) * delta) / delta), rel=1e-15)
    )
    assert theory.hitting_time(np.array([[4.0, 9.0]]), n, delta).shape == (1, 2)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"beta": 1.0, "n": 32, "delta": 0.0}, "delta"),
        ({"beta": 701.0, "n": 32, "delta": 0.1}, "beta"),
        ({"beta": -1.0, "n": 32, "delta": 0.1}, "beta"),
        ({"beta": 1.0, "n": 1, "delta": 0.1}, "n must"),
        ({"beta": 1.0, "n": 32, "delta": 0.1, "model": "xa"}, "model"),
    ],
)
def test_hitting_time_rejects_bad_input(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        theory.hitting_time(**kwargs)


# ------------------------------------------------------------- Theorems 6.3 and 6.7


def test_wendel_exact_values() -> None:
    assert theory.wendel_hemisphere_probability(3, 2) == 0.75  # three points on the circle
    assert theory.wendel_hemisphere_probability(4, 3) == 0.875  # tetrahedron misses the centre: 1/8
    for n in range(1, 12):
        assert theory.wendel_hemisphere_probability(n, 1) == 2.0 ** (1 - n)  # S^0 = {-1, 1}
        assert theory.wendel_hemisphere_probability(n, 2) == n / 2 ** (n - 1)  # circle
        assert theory.wendel_hemisphere_probability(n, n) == 1.0
        assert theory.wendel_hemisphere_probability(n, n + 3) == 1.0  # Theorem 6.3
        # the d <= n sum itself gives 1 at d = n
        assert sum(math.comb(n - 1, k) for k in range(n)) == 2 ** (n - 1)
    assert theory.wendel_hemisphere_probability(200, 100) == 0.5  # C(199, k) is symmetric
    assert theory.wendel_hemisphere_probability(201, 101) == pytest.approx(
        0.5 + math.comb(200, 100) / 2**201
    )


def test_wendel_circle_monte_carlo() -> None:
    # On S^1 the points lie in an open half-circle iff the largest circular gap exceeds pi.
    n, samples = 5, 40_000
    theta = np.sort(np.random.default_rng(0).uniform(0.0, 2 * np.pi, (samples, n)), axis=1)
    gaps = np.diff(theta, axis=1, append=theta[:, :1] + 2 * np.pi)
    p_hat = np.mean(gaps.max(axis=1) > np.pi)
    p = theory.wendel_hemisphere_probability(n, 2)
    assert abs(p_hat - p) < 4.0 * math.sqrt(p * (1 - p) / samples)


# ------------------------------------------------------------------ Eq. 7.1: circle


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("beta", [0.0, 1.0, 6.0])
def test_circle_rate_equals_cartesian_field(model: str, beta: float) -> None:
    theta = np.random.default_rng(1).uniform(-np.pi, np.pi, (3, 6))
    got = theory.circle_angle_rate(theta, beta, model)
    for row, rates in zip(theta, got):
        X = np.stack([np.cos(row), np.sin(row)], axis=1)
        V = field(X, beta, model)
        tangent = np.stack([-np.sin(row), np.cos(row)], axis=1)
        assert rates == pytest.approx((V * tangent).sum(axis=1), rel=1e-12, abs=1e-14)


def test_circle_rate_broadcasts_beta_and_survives_large_beta() -> None:
    theta = np.array([[0.0, 0.5, 2.0], [0.1, 0.2, 0.3]])
    rates = theory.circle_angle_rate(theta, np.array([1.0, 800.0]), "sa")
    assert rates.shape == (2, 3) and np.all(np.isfinite(rates))
    assert rates[0] == pytest.approx(theory.circle_angle_rate(theta[0], 1.0, "sa"))


@pytest.mark.parametrize("model", MODELS)
def test_two_token_angle_beta_zero(model: str) -> None:
    # beta = 0: phi' = -sin(phi) for both models, so tan(phi/2) = tan(phi0/2) e^{-t}.
    t = np.array([4.0, 0.0, 0.1, 1.0, 20.0])
    for phi0 in [0.3, np.pi / 2, 3.0]:
        exact = 2.0 * np.arctan(np.tan(phi0 / 2) * np.exp(-t))
        assert theory.two_token_angle(t, phi0, 0.0, model) == pytest.approx(exact, rel=1e-9)


@pytest.mark.parametrize("model", MODELS)
def test_two_token_angle_vs_mpmath_travel_time(model: str) -> None:
    beta, phi0, phi1 = 3.0, 2.5, 0.3

    def inv_speed(p: mpmath.mpf) -> mpmath.mpf:  # 1/|phi'| from Eq. 7.1 with n = 2
        if model == "sa":
            return (mpmath.exp(beta * (1 - mpmath.cos(p))) + 1) / (2 * mpmath.sin(p))
        return mpmath.exp(-beta * mpmath.cos(p)) / mpmath.sin(p)

    with mpmath.workdps(25):
        t1 = float(mpmath.quad(inv_speed, [phi1, 1.0, phi0]))
    assert float(theory.two_token_angle(t1, phi0, beta, model)) == pytest.approx(phi1, rel=1e-9)


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("beta", [0.7, 4.0])
def test_two_token_angle_consistent_with_circle_rate_and_gamma(model: str, beta: float) -> None:
    t = np.array([0.2, 1.0, 3.0])
    phi = theory.two_token_angle(t, 2.0, beta, model)
    dphi = derivative(lambda s: theory.two_token_angle(s, 2.0, beta, model), t, 1e-3)
    rates = theory.circle_angle_rate(np.stack([phi, np.zeros_like(phi)], axis=1), beta, model)
    assert dphi == pytest.approx(rates[:, 0] - rates[:, 1], rel=1e-6)
    # Theorem 6.8 with d = n = 2: orthogonal start, cos(phi) = gamma_beta.
    cos_phi = np.cos(theory.two_token_angle(t, np.pi / 2, beta, model))
    assert cos_phi == pytest.approx(theory.gamma_curve(t, beta, 2, model), abs=1e-9)


def test_two_token_angle_fixed_points_and_validation() -> None:
    assert theory.two_token_angle([0.0, 5.0], np.pi, 2.0, "usa").tolist() == [np.pi, np.pi]
    assert theory.two_token_angle([0.0, 5.0], 0.0, 2.0, "sa").tolist() == [0.0, 0.0]
    with pytest.raises(ValueError, match="phi0"):
        theory.two_token_angle([1.0], 4.0, 1.0, "sa")


# ------------------------------------------------------------------ Eq. 3.5: energy


def test_energy_two_tokens_by_hand() -> None:
    beta, c = 2.0, 0.3
    G = np.array([[1.0, c], [c, 1.0]])
    assert float(theory.energy(G, beta)) == pytest.approx(
        (2 * math.e**2 + 2 * math.exp(0.6)) / (2 * 2.0 * 4)
    )
    batch = theory.energy(np.stack([G, np.eye(2)]), np.array([beta, 1.0]))
    assert batch == pytest.approx([float(theory.energy(G, beta)), (2 * math.e + 2) / 8])


@pytest.mark.parametrize("model", MODELS)
def test_energy_rate_along_orthogonal_flow(model: str) -> None:
    # Eq. 3.6: dE/dt = (1/n^2) sum_i Z_i |x_i'|^2 (SA), (1/n) sum_i |x_i'|^2 (USA).
    beta, n = 2.0, 6

    def energy_at(t: np.ndarray) -> np.ndarray:
        g = theory.gamma_curve(t, beta, n, model)
        return theory.energy(
            np.stack([equal_cosine_tokens(x, n) @ equal_cosine_tokens(x, n).T for x in g]), beta
        )

    t = np.array([0.3, 1.5])
    dE = derivative(energy_at, t, 1e-3)
    for t_k, dE_k in zip(t, dE):
        X = equal_cosine_tokens(float(theory.gamma_curve(t_k, beta, n, model)), n)
        speed2 = (field(X, beta, model) ** 2).sum(axis=1)
        Z = np.exp(beta * X @ X.T).sum(axis=1)
        expected = (Z * speed2).sum() / n**2 if model == "sa" else speed2.sum() / n
        assert dE_k == pytest.approx(expected, rel=1e-8)
