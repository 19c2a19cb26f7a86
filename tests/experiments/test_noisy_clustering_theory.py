"""Tests of the noisy-clustering mean-field theory (noisy_clustering/theory.py).

Truth comes from outside the module: scipy quadrature of the Funk-Hecke integral against Gegenbauer
polynomials, 30-digit mpmath Bessel functions, the convolution ``W * f`` as a direct double integral
over the sphere (no Bessel function, no Funk-Hecke), the mean-field equation's right-hand side
differentiated by Chebyshev interpolation, and the solver's profiles interpolated off its nodes.
"""

# ruff: noqa: E741 -- the degree of a spherical harmonic is l, as in the maths
from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from numpy.polynomial import Chebyshev
from scipy.integrate import quad
from scipy.interpolate import BarycentricInterpolator
from scipy.special import eval_chebyt, eval_gegenbauer, iv, roots_legendre

from attnsweep.experiments.noisy_clustering import theory

# ------------------------------------------------------------------ independent truth


def gegenbauer(l: int, d: int, t):
    """The degree-l zonal harmonic of S^{d-1} as a polynomial in t, normalised to P_l(1) = 1."""
    if d == 2:
        return eval_chebyt(l, t)
    return eval_gegenbauer(l, (d - 2) / 2, t) / eval_gegenbauer(l, (d - 2) / 2, 1.0)


def sphere_rule(d: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Polar angles theta of y on S^{d-1} and weights of dsigma's marginal (sum 1): Gauss-Legendre in
    theta with sin^{d-2}, or for d = 2 the trapezoid rule on the full circle."""
    if d == 2:
        return 2 * np.pi * np.arange(n) / n, np.full(n, 1.0 / n)
    x, w = roots_legendre(n)
    theta = np.pi * (x + 1) / 2
    w = w * np.sin(theta) ** (d - 2)
    return theta, w / w.sum()


def convolve(f, t, beta: float, d: int, n: int = 200, n_phi: int = 48) -> np.ndarray:
    """(W * f)(x) at <x, e> = t for zonal f: int e^{beta <x, y>} f(<y, e>) dsigma(y) as a double integral.

    y = cos(theta) e + sin(theta) v: theta by sphere_rule (n points, to resolve f), and for d >= 3 the angle
    phi between v and the part of x orthogonal to e, whose law on S^{d-2} has density ~ sin^{d-3} phi
    (n_phi Gauss-Legendre points: the phi-integrand is e^{z cos phi} times a polynomial, z <= beta)."""
    theta, w_theta = sphere_rule(d, n)
    if d == 2:
        phi, w_phi = np.zeros(1), np.ones(1)  # theta already runs over the whole circle
    else:
        x, w_phi = roots_legendre(n_phi)
        phi = np.pi * (x + 1) / 2
        w_phi = w_phi * np.sin(phi) ** (d - 3)
        w_phi = w_phi / w_phi.sum()
    weights = w_theta * f(np.cos(theta))
    out = []
    for ti in np.atleast_1d(t):
        cos_xy = ti * np.cos(theta)[:, None] + math.sqrt(1 - ti**2) * np.sin(theta)[:, None] * np.cos(phi)
        out.append(weights @ np.exp(beta * cos_xy) @ w_phi)
    return np.array(out)


def sphere_mean(g, d: int, n: int = 2000) -> float:
    """int g(<y, e>) dsigma(y) for zonal g."""
    theta, w = sphere_rule(d, n)
    return float(w @ g(np.cos(theta)))


# ------------------------------------------------------------------ closed forms


@pytest.mark.parametrize(
    "l, beta, d",
    [(0, 0.5, 2), (1, 2.0, 2), (3, 5.0, 2), (0, 1.0, 3), (2, 3.0, 3), (1, 7.5, 4), (4, 2.0, 5), (2, 10.0, 8),
     (5, 6.0, 16)],
)
def test_funk_hecke_is_the_gegenbauer_integral(l, beta, d):
    a = (d - 3) / 2  # quad's 'alg' weight (1 + t)^a (1 - t)^a = (1 - t^2)^{(d-3)/2}, endpoint singular for d = 2
    # quad's error is relative to the integrand's size, up to e^beta, not to the (smaller, l > 0) result
    num = quad(lambda t: math.exp(beta * t) * gegenbauer(l, d, t), -1, 1, weight="alg", wvar=(a, a),
               epsabs=1e-14 * math.exp(beta), epsrel=1e-12, limit=200)[0]
    den = quad(lambda t: 1.0, -1, 1, weight="alg", wvar=(a, a), epsabs=0, epsrel=1e-13)[0]
    assert abs(theory.funk_hecke(l, beta, d) - num / den) <= 1e-12 * math.exp(beta) + 1e-11 * abs(num / den)


def test_funk_hecke_closed_forms_for_d3_and_beta0():
    beta = np.array([1e-6, 5e-4, 0.3, 1.0, 7.0, 40.0])  # 1e-6 and 5e-4: the series branch (beta < 1e-3)
    # cosh(b)/b - sinh(b)/b^2 cancels 13 digits at b = 1e-6: evaluate in mpmath at 40 digits
    with mpmath.workdps(40):
        lam0 = [float(mpmath.sinh(b) / b) for b in map(mpmath.mpf, beta)]
        lam1 = [float(mpmath.cosh(b) / b - mpmath.sinh(b) / b**2) for b in map(mpmath.mpf, beta)]
    np.testing.assert_allclose(theory.funk_hecke(0, beta, 3), lam0, rtol=1e-13)  # a few ulps from ive and exp(log)
    np.testing.assert_allclose(theory.funk_hecke(1, beta, 3), lam1, rtol=1e-13)
    assert theory.funk_hecke(0, 0.0, 5) == 1.0 and theory.funk_hecke(2, 0.0, 5) == 0.0  # W = 1 at beta = 0


@mpmath.workdps(30)
def test_funk_hecke_does_not_overflow_at_large_beta():
    for d in (2, 3, 8, 16):
        for l in (0, 1, 2):
            exact = mpmath.gamma(mpmath.mpf(d) / 2) * (2 / mpmath.mpf(100)) ** (mpmath.mpf(d) / 2 - 1) * mpmath.besseli(
                l + mpmath.mpf(d) / 2 - 1, 100)
            # ive is good to ~1e-15 relative; exp(log) of a ~100 log adds 100 ulps at most
            assert theory.funk_hecke(l, 100.0, d) == pytest.approx(float(exact), rel=1e-13)


@pytest.mark.parametrize("d", [2, 3, 5, 8, 16])
def test_k_sharp_limits_and_forms(d):
    # beta -> 0: K_# = (d/2) / 0F1(; d/2 + 1; beta^2/4) = (d/2)(1 - beta^2 / (2 (d + 2)) + ...)
    assert theory.k_sharp(0.0, d) == d / 2
    assert theory.k_sharp(1e-8, d) == pytest.approx(d / 2, rel=1e-15)  # the beta^2 term is 1e-17
    assert theory.k_sharp(1e-2, d) == pytest.approx(d / 2 * (1 - 1e-4 / (2 * (d + 2))), rel=1e-9)  # next: beta^4
    beta = np.array([0.1, 1.0, 4.0, 30.0])
    # K_# = beta / (2 lambda_1): the threshold where gamma_1 vanishes; both sides from the module, so this
    # checks k_sharp's own closed form against funk_hecke's (tested above against quadrature)
    np.testing.assert_allclose(theory.k_sharp(beta, d), beta / (2 * theory.funk_hecke(1, beta, d)), rtol=1e-13)
    # gamma_1 = (d - 1)(lambda_1 / beta - 1 / 2K) vanishes there, to rounding of its terms (lambda_1 ~ e^beta)
    terms = (d - 1) * theory.funk_hecke(1, beta, d) / beta
    np.testing.assert_allclose(theory.growth_rate(1, beta, d, theory.k_sharp(beta, d)), 0.0, atol=1e-14 * terms.max())
    exact = [float(mpmath.mpf(b) ** (mpmath.mpf(d) / 2) / (2 ** (mpmath.mpf(d) / 2) * mpmath.gamma(mpmath.mpf(d) / 2)
                   * mpmath.besseli(mpmath.mpf(d) / 2, b))) for b in (1.0, 100.0)]
    np.testing.assert_allclose(theory.k_sharp([1.0, 100.0], d), exact, rtol=1e-13)  # 1e-40 at beta = 100: no underflow


def test_k_sharp_on_the_circle():
    beta = np.array([1e-3, 0.1, 1.0, 5.0, 30.0])
    np.testing.assert_allclose(theory.k_sharp(beta, 2), beta / (2 * iv(1, beta)), rtol=1e-14)  # iv: ~1 ulp


@mpmath.workdps(30)
def test_beta_star_solves_its_equation():
    for d in range(2, 17):
        b = theory.beta_star(d)
        ratio = mpmath.besseli(mpmath.mpf(d) / 2 + 1, b) / mpmath.besseli(mpmath.mpf(d) / 2, b)
        # brentq to 1e-14 in beta; the ratio's slope is < 1, so the residual is a few 1e-15
        assert abs(float(ratio) - 1 / d) < 1e-13
        assert abs(theory.branch_curvature(b, d)) < 1e-12  # C changes sign exactly there
    root = mpmath.findroot(lambda b: mpmath.besseli(2, b) / mpmath.besseli(1, b) - mpmath.mpf(1) / 2, 2.4)
    assert abs(theory.beta_star(2) - float(root)) < 1e-10  # d = 2: beta_* = 2.4469183112...
    assert theory.beta_star(3) < 2.0 < theory.beta_star(2)  # so beta = 2 is continuous for d = 2, not d = 3


@pytest.mark.parametrize("l, beta, d, k", [(1, 2.0, 2, 0.7), (2, 3.0, 3, 1.3), (3, 1.5, 5, 2.0), (1, 4.0, 8, 0.5)])
def test_growth_rate_is_the_linearised_mean_field_equation(l, beta, d, k):
    """d_t rho = (1/2K) Lap rho - (1/beta) div(rho grad W*rho) at rho = 1 +- P_l, on zonal functions of t:
    Lap g = (1 - t^2) g'' - (d - 1) t g', div(rho grad phi) = rho Lap phi + (1 - t^2) rho' phi'. The equation is
    quadratic in rho, so half the difference at 1 + P and 1 - P is its linear part exactly."""

    def rhs(sign: int) -> Chebyshev:
        rho = Chebyshev.interpolate(lambda t: 1 + sign * gegenbauer(l, d, t), l + 2)
        phi = Chebyshev.interpolate(lambda t: convolve(lambda s: 1 + sign * gegenbauer(l, d, s), t, beta, d, 64), 30)
        x = Chebyshev.identity()
        lap = lambda g: (1 - x**2) * g.deriv(2) - (d - 1) * x * g.deriv()
        return lap(rho) / (2 * k) - (rho * lap(phi) + (1 - x**2) * rho.deriv() * phi.deriv()) / beta

    t = np.array([-0.7, -0.2, 0.4, 0.9])
    linear = (rhs(+1)(t) - rhs(-1)(t)) / 2
    scale = l * (l + d - 2) * (theory.funk_hecke(l, beta, d) / beta + 1 / (2 * k))  # size of the two terms
    # degree-30 Chebyshev interpolants of an entire function, differentiated twice: ~1e-11 of the scale
    np.testing.assert_allclose(linear, theory.growth_rate(l, beta, d, k) * gegenbauer(l, d, t), atol=1e-9 * scale)


@pytest.mark.parametrize("d", [2, 3, 4, 8])
def test_zonal_kernel_is_the_mean_over_the_orthogonal_sphere(d):
    beta = 3.0
    t = np.array([-0.9, 0.0, 0.5, 0.99999999])  # the last: z = 4e-4, on the series branch (z < 1e-3)
    s = np.array([0.3, -0.99, 0.7, 0.2])
    # int over phi on S^{d-2} of e^{beta (t s + sqrt(1-t^2) sqrt(1-s^2) cos phi)}
    if d == 2:
        direct = np.exp(beta * t * s) * np.cosh(beta * np.sqrt((1 - t**2) * (1 - s**2)))
    else:
        x, w = roots_legendre(80)
        phi = np.pi * (x + 1) / 2
        w = w * np.sin(phi) ** (d - 3)
        z = beta * np.sqrt((1 - t**2) * (1 - s**2))
        direct = np.exp(beta * t * s) * (np.exp(z[:, None] * np.cos(phi)) @ w) / w.sum()
    np.testing.assert_allclose(theory.zonal_kernel(t, s, beta, d), direct, rtol=1e-13)  # 80-point Gauss: exact
    # beta = 100 at the poles and across: finite and equal to e^{beta t s} there (z = 0)
    assert theory.zonal_kernel(1.0, 1.0, 100.0, d) == pytest.approx(math.exp(100.0), rel=1e-14)


# ------------------------------------------------------------------ the zonal solver


@pytest.fixture(scope="module")
def branches() -> dict[tuple[float, int], theory.Branch]:
    """Clustered branches on the default nodes, discontinuous (beta > beta_*) and continuous."""
    return {(beta, d): theory.clustered_branch(beta, d) for beta, d in [(6.0, 2), (4.0, 3), (1.0, 3)]}


@pytest.mark.parametrize("beta, d", [(1.0, 2), (2.0, 2), (1.0, 3), (1.75, 3)])
def test_transition_is_continuous_below_beta_star(beta, d):
    assert beta < theory.beta_star(d)  # 2.4469 for d = 2, 1.8162 for d = 3
    tr = theory.transition(beta, d)
    assert tr.continuous and tr.r_c == 0.0
    assert tr.k_c == tr.k_s == tr.k_sharp == theory.k_sharp(beta, d)  # exactly: the branch leaves forwards


@pytest.mark.parametrize("beta, d", [(6.0, 2), (4.0, 3), (2.0, 3)])
def test_transition_is_discontinuous_above_beta_star(branches, beta, d):
    tr = theory.transition(beta, d)
    assert not tr.continuous
    assert tr.resolution < 1e-9  # the 2N solve moves K_c / K_# by less than that (spectral quadrature)
    assert tr.k_s < tr.k_c < tr.k_sharp
    assert tr.k_sharp - tr.k_c > 1e3 * tr.resolution * tr.k_sharp  # strictly below, far beyond the resolution
    if (beta, d) in branches:  # K_c and r_c lie where Delta F changes sign along the traced branch
        b = branches[(beta, d)]
        i = np.flatnonzero((b.delta_f[1:-1] > 0) & (b.delta_f[2:] <= 0))[0] + 1
        assert b.r[i] < tr.r_c < b.r[i + 1] and b.k[i] < tr.k_c < b.k[i + 1]
        assert tr.k_s <= b.k.min() < tr.k_s * (1 + 1e-3)  # the refined minimum is at most a grid step below


@pytest.mark.parametrize("beta, d", [(6.0, 2), (4.0, 3), (1.0, 3)])
def test_branch_leaves_k_sharp_as_the_landau_expansion_says(branches, beta, d):
    """K(r) / K_# = 1 + C r^2 + O(r^4) and Delta F = -(d C / 4) r^4 + O(r^6) (branch_curvature, from the
    expansion of F at fixed r; the solver knows nothing of it). Points 1, 2 of the branch: r = 1e-3, 2e-3."""
    b = branches[(beta, d)]
    C = theory.branch_curvature(beta, d)
    r = b.r[1:3]
    assert b.r[0] == 0 and b.k[0] == b.k_sharp and b.delta_f[0] == 0  # the branch starts at the uniform state
    # the relative corrections are O(r^2): below 5 r^2 = 2e-5 in these cases, so 1e-4 leaves a factor 5
    np.testing.assert_allclose((b.k[1:3] / b.k_sharp - 1) / r**2, C, rtol=1e-4)
    np.testing.assert_allclose(b.delta_f[1:3] / (-d * C / 4 * r**4), 1.0, rtol=1e-4)


@pytest.mark.parametrize("d", [2, 3, 8])
def test_branch_turns_back_exactly_above_beta_star(d):
    """The paper's dichotomy at its root: the branch leaves K_# forwards below beta_*, backwards above."""
    b_star = theory.beta_star(d)
    below, above = (theory.clustered_branch(f * b_star, d, n_nodes=32) for f in (0.95, 1.05))
    assert below.k[1] > below.k_sharp and below.delta_f[1] < 0  # K(r) - K_# ~ C r^2 ~ 5e-8: far above rounding
    assert above.k[1] < above.k_sharp and above.delta_f[1] > 0


@pytest.mark.parametrize("key", [(6.0, 2), (4.0, 3)])
@pytest.mark.parametrize("where", ["middle", "last"])
def test_branch_profiles_solve_the_stationary_equation_off_the_nodes(branches, key, where):
    """log rho(t) - log rho(t') = (2K / beta)[(W * rho)(t) - (W * rho)(t')] at points off the nodes, with rho
    interpolated (barycentric, degree N - 1) and W * rho a direct double integral over the sphere; mass 1,
    order parameter r and the free energy by a fine quadrature. Mid-branch and at the last point (the most
    concentrated profile the resolution check let through)."""
    beta, d = key
    b = branches[key]
    i = len(b.r) // 2 if where == "middle" else len(b.r) - 1
    log_rho = BarycentricInterpolator(b.nodes, b.log_rho[i])
    rho = lambda s: np.exp(log_rho(s))
    t = np.concatenate([np.random.default_rng(0).uniform(-1, 1, 6), [0.999]])
    c_w_rho = 2 * b.k[i] / beta * convolve(rho, t, beta, d, 400)
    # interpolation and quadrature both converge spectrally: 1e-12 of the field c W * rho (up to ~12) is
    # found at the last point for d = 3, where the profile is sharpest; 1e-10 leaves a factor 100
    np.testing.assert_allclose(log_rho(t) - log_rho(t[0]), c_w_rho - c_w_rho[0], atol=1e-10 * np.abs(c_w_rho).max())
    assert sphere_mean(rho, d) == pytest.approx(1.0, abs=1e-12)  # 7e-14 found there
    assert sphere_mean(lambda s: s * rho(s), d) == pytest.approx(b.r[i], abs=1e-12)
    # F = int rho log rho - (K / beta) int rho W * rho, on a fine rule of its own
    theta, w = sphere_rule(d, 300)
    y = np.cos(theta)
    free = w @ (rho(y) * log_rho(y)) - b.k[i] / beta * (w @ (rho(y) * convolve(rho, y, beta, d, 300)))
    assert b.free_energy[i] == pytest.approx(free, abs=1e-11)  # F is O(1); 8e-13 found, as the equation above
    assert b.free_energy_uniform[i] == pytest.approx(-b.k[i] / beta * theory.funk_hecke(0, beta, d), rel=1e-13)
    assert b.delta_f[i] == pytest.approx(b.free_energy[i] - b.free_energy_uniform[i], abs=1e-10)


def test_branch_ends_where_the_quadrature_stops_resolving(branches):
    """More nodes resolve sharper profiles: the branch on 2N nodes reaches further towards r = 1."""
    b = branches[(6.0, 2)]
    finer = theory.clustered_branch(6.0, 2, n_nodes=2 * b.nodes.size)
    assert b.r[-1] < finer.r[-1] < 1


def test_k_c_and_k_s_match_a_finely_stepped_branch(monkeypatch):
    """K_c and K_s come from root finding and minimisation between branch points; a branch traced with
    five times finer steps finds them by linear interpolation and by its smallest point instead."""
    coarse = theory.transition(6.0, 2)
    monkeypatch.setattr(theory, "DS_MAX", 0.01)
    fine = theory.clustered_branch(6.0, 2)
    i = np.flatnonzero((fine.delta_f[1:-1] > 0) & (fine.delta_f[2:] <= 0))[0] + 1
    f = fine.delta_f[i] / (fine.delta_f[i] - fine.delta_f[i + 1])
    k_c = (1 - f) * fine.k[i] + f * fine.k[i + 1]
    # errors of the fine grid: (step 0.01)^2 times K'' ~ 1, i.e. ~1e-5 of K_#, against shifts of ~4e-4 that
    # the coarse grid (step 0.05) alone would leave
    assert k_c == pytest.approx(coarse.k_c, abs=5e-5 * coarse.k_sharp)
    assert coarse.k_s <= fine.k.min() <= coarse.k_s + 5e-5 * coarse.k_sharp


def test_branch_passes_a_fold_in_r():
    """At d = 16, beta = 8 the branch folds in r (r rises to ~0.212, falls to ~0.204, rises again) while K
    keeps falling: a continuation in r alone stops there; the arclength continuation goes on."""
    b = theory.clustered_branch(8.0, 16, n_nodes=128)
    dr = np.diff(b.r)
    assert (dr < 0).any() and b.r[-1] > 0.5  # past the fold (the 128 nodes resolve up to r ~ 0.6)
    assert np.all(np.diff(b.k) < 0)  # still before the spinodal
