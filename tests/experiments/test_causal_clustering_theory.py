"""Tests of the causal-attention closed forms and centres of paper 003 (causal_clustering/theory.py).

Truth comes from outside the module: O(n^2) loops over the Section 5.1 definitions with
arccos, hand-built configurations with exact ties, elementary cap areas, scipy quadrature,
Monte Carlo of i.i.d. uniform tokens, Renyi's integral equation solved on a grid, the
published digits of Renyi's constant, finite differences, and a small RK4 of the two-token
causal dynamics on S^2.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.integrate import quad

from attnsweep.experiments.causal_clustering import theory

#: Renyi's parking constant, published digits (e.g. OEIS A050996).
C_RENYI = 0.7475979202533


def uniform_sphere(rng: np.random.Generator, shape: tuple[int, ...], d: int) -> np.ndarray:
    x = rng.standard_normal((*shape, d))
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def sine_power(t: float, d: int) -> float:
    """sin(t)^(d - 2): the density of the polar angle on S^{d-1}, up to its normalisation."""
    return math.sin(t) ** (d - 2)


def dist(x: np.ndarray, y: np.ndarray) -> float:
    return math.acos(min(1.0, max(-1.0, float(x @ y))))


def brute_renyi(x: np.ndarray, delta: float) -> np.ndarray:
    """Section 5.1, greedy: k is a centre iff dist > delta to every earlier centre."""
    centres: list[int] = []
    for k in range(len(x)):
        if all(dist(x[k], x[s]) > delta for s in centres):
            centres.append(k)
    return np.isin(np.arange(len(x)), centres)


def brute_strong(x: np.ndarray, delta: float) -> np.ndarray:
    """Section 5.1: s is a strong centre iff dist > delta to every earlier token."""
    return np.array([all(dist(x[s], x[i]) > delta for i in range(s)) for s in range(len(x))])


def on_circle(angles: list[float]) -> np.ndarray:
    """Unit vectors (cos a, sin a, 0) in S^2."""
    a = np.asarray(angles)
    return np.stack([np.cos(a), np.sin(a), np.zeros_like(a)], axis=-1)


# ------------------------------------------------------------------------- centres


@pytest.mark.parametrize("d", [2, 3, 5])
@pytest.mark.parametrize("delta", [0.05, 0.4, 1.2, 2.8])
def test_centres_match_brute_force(d: int, delta: float) -> None:
    rng = np.random.default_rng(100 * d + int(10 * delta))
    x0 = uniform_sphere(rng, (2, 3, 40), d)
    renyi, strong = theory.renyi_centres(x0, delta), theory.strong_centres(x0, delta)
    assert renyi.shape == strong.shape == (2, 3, 40)
    for idx in np.ndindex(2, 3):
        np.testing.assert_array_equal(renyi[idx], brute_renyi(x0[idx], delta))
        np.testing.assert_array_equal(strong[idx], brute_strong(x0[idx], delta))
    assert renyi[..., 0].all() and strong[..., 0].all()
    assert not (strong & ~renyi).any()  # strong centres are Renyi centres


def test_centres_clustered_input_and_subset() -> None:
    # Tokens in a few tight clumps: many rejections, Renyi and strong differ.
    rng = np.random.default_rng(7)
    seeds = uniform_sphere(rng, (5,), 3)
    x0 = seeds[rng.integers(0, 5, size=(50, 120))] + 0.05 * rng.standard_normal((50, 120, 3))
    x0 /= np.linalg.norm(x0, axis=-1, keepdims=True)
    renyi, strong = theory.renyi_centres(x0, 0.3), theory.strong_centres(x0, 0.3)
    for b in range(0, 50, 7):
        np.testing.assert_array_equal(renyi[b], brute_renyi(x0[b], 0.3))
        np.testing.assert_array_equal(strong[b], brute_strong(x0[b], 0.3))
    assert not (strong & ~renyi).any()
    assert (renyi.sum(-1) > strong.sum(-1)).any()


def test_centres_edge_cases() -> None:
    delta = 0.7
    # Exactly delta apart: <x0, x1> == cos(delta) to the bit, so not separated.
    tie = on_circle([0.0, delta])
    assert tie[0] @ tie[1] == math.cos(delta)
    np.testing.assert_array_equal(theory.renyi_centres(tie, delta), [True, False])
    np.testing.assert_array_equal(theory.strong_centres(tie, delta), [True, False])
    apart = on_circle([0.0, delta + 1e-9])
    np.testing.assert_array_equal(theory.renyi_centres(apart, delta), [True, True])
    np.testing.assert_array_equal(theory.strong_centres(apart, delta), [True, True])
    # 0.6 is blocked by 0; 1.2 is > 1 from the centre 0 (Renyi) but 0.6 from token 1 (not strong).
    chain = on_circle([0.0, 0.6, 1.2])
    np.testing.assert_array_equal(theory.renyi_centres(chain, 1.0), [True, False, True])
    np.testing.assert_array_equal(theory.strong_centres(chain, 1.0), [True, False, False])
    # Duplicates, a single token, and delta = pi (even the antipode is not > pi away).
    dup = on_circle([0.3, 0.3, 2.0])
    np.testing.assert_array_equal(theory.renyi_centres(dup, 0.5), [True, False, True])
    np.testing.assert_array_equal(theory.strong_centres(dup, 0.5), [True, False, True])
    np.testing.assert_array_equal(theory.renyi_centres(on_circle([1.0]), 0.5), [True])
    antipodes = on_circle([0.0, math.pi])
    antipodes[1] = -antipodes[0]
    np.testing.assert_array_equal(theory.renyi_centres(antipodes, math.pi), [True, False])
    np.testing.assert_array_equal(theory.strong_centres(antipodes, math.pi), [True, False])
    np.testing.assert_array_equal(theory.renyi_centres(antipodes, 3.0), [True, True])


# ------------------------------------------------------------------ cap and counts


def test_cap_measure_closed_forms_and_quadrature() -> None:
    delta = np.linspace(0.0, math.pi, 41)
    np.testing.assert_allclose(theory.cap_measure(delta, 2), delta / math.pi, atol=1e-15)
    np.testing.assert_allclose(theory.cap_measure(delta, 3), np.sin(delta / 2) ** 2, atol=1e-15)
    for d in (4, 5, 8):
        total = quad(sine_power, 0.0, math.pi, args=(d,))[0]
        for x in (0.1, 0.9, 2.0, 3.0):
            part = quad(sine_power, 0.0, x, args=(d,))[0]
            assert theory.cap_measure(x, d) == pytest.approx(part / total, abs=1e-13)


@pytest.mark.parametrize("d", [2, 3])
def test_cap_measure_monte_carlo(d: int) -> None:
    rng = np.random.default_rng(d)
    x = uniform_sphere(rng, (400_000,), d)
    for delta in (0.5, 1.7):
        hit = np.arccos(np.clip(x[:, 0], -1.0, 1.0)) <= delta
        se = math.sqrt(hit.mean() * (1 - hit.mean()) / hit.size)
        assert abs(hit.mean() - theory.cap_measure(delta, d)) < 4 * se


@pytest.mark.parametrize("d", [2, 3])
def test_strong_count_monte_carlo(d: int) -> None:
    """Lemma C.1 at n = 200, delta = 4/sqrt(64): 2000 i.i.d. uniform sequences.
    For d = 3 the printed (3 sin^2(delta/2))^{-1} ~ 5.4 would fail; the corrected limit is 16.3."""
    n, delta = 200, 4.0 / math.sqrt(64.0)
    x0 = uniform_sphere(np.random.default_rng(30 + d), (2000, n), d)
    counts = theory.strong_centres(x0, delta).sum(-1)
    expected = theory.expected_strong_count(n, delta, d)
    assert abs(counts.mean() - expected) < 4 * counts.std(ddof=1) / math.sqrt(counts.size)
    # The per-index probability (1 - p)^(k-1) is the finite-n formula term by term.
    p = theory.cap_measure(delta, d)
    assert expected == pytest.approx(sum((1 - p) ** k for k in range(n)), rel=1e-12)
    assert theory.expected_strong_count(10**9, delta, d) == pytest.approx(1 / p, rel=1e-12)


def test_renyi_constant_published_digits() -> None:
    assert abs(theory.renyi_constant() - C_RENYI) < 1e-10


def renyi_parking_mean(length: float, per_unit: int = 1000) -> float:
    """Renyi's M(x): mean cars of length 1 parked on [0, x]. M = 0 on [0, 1) and
    M(x) = 1 + (2/(x-1)) int_0^{x-1} M for x >= 1; M is continuous on [1, inf), so a
    cumulative trapezoid on a grid with 1 as a node is explicit (x - 1 is an earlier node)."""
    h = 1.0 / per_unit
    steps = int(math.ceil(length / h)) + 1
    m = np.zeros(steps + 1)
    integral = np.zeros(steps + 1)  # int_1^{x_i} M
    m[per_unit : 2 * per_unit + 1] = 1.0
    for i in range(per_unit + 1, steps + 1):
        if i > 2 * per_unit:
            m[i] = 1.0 + 2.0 * integral[i - per_unit] / (i * h - 1.0)
        integral[i] = integral[i - 1] + 0.5 * h * (m[i] + m[i - 1])
    return float(np.interp(length, np.arange(steps + 1) * h, m))


def test_renyi_saturated_count_is_parking_on_the_circle() -> None:
    """docs/papers/003.md §4: after the first centre, parking on the arc of 2 pi/delta - 1 car lengths, so
    the saturated mean is 1 + M(2 pi/delta - 1) = c_R 2 pi/delta up to a superexponential error."""
    for delta in (0.5, 0.8):
        exact = 1.0 + renyi_parking_mean(2 * math.pi / delta - 1.0)
        assert theory.renyi_saturated_count(delta) == pytest.approx(exact, abs=1e-5)


def test_renyi_count_monte_carlo_circle() -> None:
    """d = 2, delta = 0.5, n = 5000, 400 runs against the saturated c_R 2 pi/delta = 9.3946.

    What is compared: the MC mean count with c_R 2 pi/delta (which already contains the
    c_R - 1 end correction, see the previous test). At n = 5000 parking is not quite saturated:
    1D random sequential adsorption approaches jamming as e^{-2 gamma}/t with t = n delta/(2 pi)
    attempts per car length, a deficit of (2 pi/delta)^2 e^{-2 gamma}/n ~ 0.010 cars, which is
    subtracted; the 4-SE tolerance is ~0.12.
    """
    n, delta, runs = 5000, 0.5, 400
    angles = np.random.default_rng(11).uniform(0.0, 2 * math.pi, (runs, n))
    x0 = np.stack([np.cos(angles), np.sin(angles)], axis=-1)
    counts = theory.renyi_centres(x0, delta).sum(-1)
    length = 2 * math.pi / delta
    expected = theory.renyi_saturated_count(delta) - length**2 * math.exp(-2 * np.euler_gamma) / n
    se = counts.std(ddof=1) / math.sqrt(runs)
    assert abs(counts.mean() - expected) < 4 * se
    # Renyi centres are pairwise > delta apart on the circle, so at most floor(2 pi/delta).
    assert counts.max() <= math.floor(length)


# ------------------------------------------------------------------ Lemma A.1


@pytest.mark.parametrize("beta", [1.0, 2.0, 10.0, 64.0, 500.0])
def test_tau_star_is_the_argmax_of_h(beta: float) -> None:
    x = np.linspace(0.0, math.pi, 2_000_001)
    h, _ = theory.interaction(x, beta)
    tau = float(theory.tau_star(beta))
    assert abs(x[np.argmax(h)] - tau) <= x[1]
    assert (beta + 0.5) ** -0.5 < tau < beta**-0.5
    assert math.cos(tau) == pytest.approx((-1 + math.sqrt(4 * beta**2 + 1)) / (2 * beta), rel=1e-14)


def test_tau_star_at_beta_zero() -> None:
    assert theory.tau_star(0.0) == pytest.approx(math.pi / 2, rel=1e-15)


@pytest.mark.parametrize("beta", [0.5, 9.0, 64.0])
def test_g_is_the_derivative_of_h(beta: float) -> None:
    x = np.linspace(-math.pi, math.pi, 1001)
    eps = 1e-6
    h, g = theory.interaction(x, beta)
    fd = (theory.interaction(x + eps, beta)[0] - theory.interaction(x - eps, beta)[0]) / (2 * eps)
    np.testing.assert_allclose(g, fd, atol=1e-7 * max(1.0, beta))
    np.testing.assert_allclose(h, np.exp(beta * (np.cos(x) - 1)) * np.sin(x), rtol=1e-15)
    np.testing.assert_allclose(h, -theory.interaction(-x, beta)[0], atol=0)  # h is odd


# ------------------------------------------------------- Lemma 3.1 and two tokens


def tangent_field(x: np.ndarray, v: np.ndarray) -> np.ndarray:
    """P_x(V x) for unit x, rows of x are states."""
    vx = x @ v.T
    return vx - (vx * x).sum(-1, keepdims=True) * x


@pytest.mark.parametrize("d", [3, 4])
def test_first_token_solves_its_ode(d: int) -> None:
    rng = np.random.default_rng(d)
    v = rng.standard_normal((d, d))
    x1 = uniform_sphere(rng, (), d)
    t = np.linspace(0.0, 3.0, 13)
    eps = 1e-5
    x = theory.first_token(t, v, x1)
    assert x.shape == (13, d)
    np.testing.assert_allclose(np.linalg.norm(x, axis=-1), 1.0, atol=1e-14)
    np.testing.assert_allclose(x[0], x1, atol=1e-15)
    fd = (theory.first_token(t + eps, v, x1) - theory.first_token(t - eps, v, x1)) / (2 * eps)
    np.testing.assert_allclose(fd, tangent_field(x, v), atol=1e-8)
    # V = I: the first token is fixed (docs/papers/003.md §1).
    np.testing.assert_allclose(
        theory.first_token(t, np.eye(d), x1), np.tile(x1, (13, 1)), atol=1e-15
    )


@pytest.mark.parametrize(("c0", "beta"), [(0.2, 2.0), (-0.7, 1.0), (0.6, 9.0), (0.95, 64.0)])
def test_second_token_cosine_solves_its_ode(c0: float, beta: float) -> None:
    t = np.linspace(0.0, 40.0, 81)
    eps = 1e-4
    c = theory.second_token_cosine(t, c0, beta)
    assert c[0] == c0 and np.all(np.diff(c) >= 0)
    fd = (
        theory.second_token_cosine(t[1:] + eps, c0, beta)
        - theory.second_token_cosine(t[1:] - eps, c0, beta)
    ) / (2 * eps)
    rate = (1 - c[1:] ** 2) / (1 + np.exp(beta * (1 - c[1:])))
    np.testing.assert_allclose(fd, rate, atol=1e-9)


def csa_two_tokens(
    x1: np.ndarray, x2: np.ndarray, beta: float, dt: float, steps: int, every: int
) -> list[np.ndarray]:
    """RK4 of CSA with Q = K = V = I and n = 2: x1 sees only itself (fixed), x2 attends to
    {x1, x2} with softmax weights of beta <x2, x_j>, diagonal included. Returns x2 every
    ``every`` steps, starting with x2(0)."""

    def rhs(y: np.ndarray) -> np.ndarray:
        scores = beta * np.array([y @ x1, y @ y])
        w = np.exp(scores - scores.max())
        w /= w.sum()
        mix = w[0] * x1 + w[1] * y
        return mix - (mix @ y) / (y @ y) * y

    out = [x2.copy()]
    y = x2.copy()
    for step in range(1, steps + 1):
        k1 = rhs(y)
        k2 = rhs(y + 0.5 * dt * k1)
        k3 = rhs(y + 0.5 * dt * k2)
        k4 = rhs(y + dt * k3)
        y = y + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        if step % every == 0:
            out.append(y.copy())
    return out


@pytest.mark.parametrize(
    ("c0", "beta", "horizon"), [(0.2, 2.0, 10.0), (-0.5, 1.0, 10.0), (0.6, 9.0, 40.0)]
)
def test_second_token_cosine_matches_csa_simulation(c0: float, beta: float, horizon: float) -> None:
    x1 = np.array([0.0, 0.0, 1.0])
    x2 = np.array([math.sqrt(1 - c0**2), 0.0, c0])
    dt, every = 0.01, 100
    steps = int(round(horizon / dt))
    sim = np.array(
        [x1 @ y / np.linalg.norm(y) for y in csa_two_tokens(x1, x2, beta, dt, steps, every)]
    )
    t = np.arange(len(sim)) * dt * every
    np.testing.assert_allclose(theory.second_token_cosine(t, c0, beta), sim, atol=1e-9)
    assert sim[-1] - sim[0] > 0.05  # the tokens really moved


def test_second_token_cosine_fixed_points_and_limit() -> None:
    t = np.array([0.0, 1.0, 1e6])
    np.testing.assert_array_equal(theory.second_token_cosine(t, 1.0, 4.0), 1.0)
    np.testing.assert_array_equal(theory.second_token_cosine(t, -1.0, 4.0), -1.0)
    assert theory.second_token_cosine(np.array(1e4), 0.0, 4.0) == 1.0  # Theorem 4.1: x2 -> x1


# ------------------------------------------------------------------- Section 5


def test_scaling_exponent_recovers_planted_slope() -> None:
    rng = np.random.default_rng(5)
    beta = np.array([4.0, 8.0, 16.0, 32.0, 64.0, 128.0])
    counts = 3.0 * beta[:, None] ** 0.5 * rng.lognormal(0.0, 0.3, size=(6, 300))
    slope, low, high = theory.scaling_exponent(beta, counts)
    assert low < slope < high and low < 0.5 < high
    assert slope == pytest.approx(0.5, abs=0.03) and high - low < 0.1
    assert theory.scaling_exponent(beta, counts) == (slope, low, high)  # seeded
    # Without noise the slope is exact and the interval collapses to it.
    exact = theory.scaling_exponent(beta, np.tile(2.0 * beta[:, None] ** 1.5, (1, 20)))
    np.testing.assert_allclose(exact, 1.5, rtol=1e-12)
