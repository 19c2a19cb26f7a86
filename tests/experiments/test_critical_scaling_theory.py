"""Tests of the simplex closed forms of paper 000 (critical_scaling/theory.py).

Truth comes from outside the formulas: a direct evaluation of the layer on exact simplex
tokens (lambda), a dense exact Jacobian by complex step (eta, plus one torch.func.jacrev
cross-check), and the paper's own expressions evaluated in 80-digit arithmetic (tails).
"""

from __future__ import annotations

import numpy as np
import pytest

from attnsweep.experiments.critical_scaling import theory

# ------------------------------------------------------------------ independent truth


def direct_lambda(X: np.ndarray, beta: float, alpha: float) -> float:
    """Eq. 26 from one explicit layer x' = ATT(N(x)) + alpha x, softmax in log space."""
    Y = X / np.linalg.norm(X, axis=1, keepdims=True)
    S = beta * (Y @ Y.T)
    m = S.max(axis=1, keepdims=True)
    log_A = S - (m + np.log(np.exp(S - m).sum(axis=1, keepdims=True)))
    X_out = np.exp(log_A) @ Y + alpha * X
    Y_out = X_out / np.linalg.norm(X_out, axis=1, keepdims=True)
    i, j = np.triu_indices(X.shape[0], k=1)
    # 1 - <u, v> = ||u - v||^2 / 2 for unit vectors
    num = ((Y_out[i] - Y_out[j]) ** 2).sum(axis=1)
    den = ((Y[i] - Y[j]) ** 2).sum(axis=1)
    return float(np.mean(num / den))


def att_normalized(X: np.ndarray, beta: float) -> np.ndarray:
    """ATT(N(X)) for a batch (..., n, d), analytic so it accepts complex input."""
    Y = X / np.sqrt((X * X).sum(axis=-1, keepdims=True))
    S = beta * np.einsum("...id,...jd->...ij", Y, Y)
    S = S - S.real.max(axis=-1, keepdims=True)
    W = np.exp(S)
    A = W / W.sum(axis=-1, keepdims=True)
    return A @ Y


def dense_eta_complex_step(X: np.ndarray, beta: float) -> float:
    """||d ATT(N(X)) / dX||_F^2 / (n d), all nd columns at once by complex step."""
    n, d = X.shape
    h = 1e-30
    probes = np.eye(n * d).reshape(n * d, n, d)
    J = att_normalized(X[None] + 1j * h * probes, beta).imag / h
    return float((J**2).sum() / (n * d))


def eta_eq86(n, d, rho, gamma, q, cross_factor):
    """Paper Eq. 86 with Eqs. 90, 96, 105 divided by E^4 (plain float64, moderate beta).

    ``cross_factor`` multiplies the beta E F term of Eq. 90: 1 as printed, 2 corrected.
    """
    beta = gamma * np.log(n)
    f = np.exp(-(1 - rho) * beta)
    e, z, ap = 1.0, 1 + (n - 1) * f, n * rho + 1 - rho
    S_R = (
        beta**2 * f**2 * n
        * (n**2 * rho**2 * (1 - rho) + n * (1 - rho) * (1 + rho - 3 * rho**2)
           - (1 + 2 * rho) * (1 - rho) ** 2)
        + cross_factor * beta * e * f * n * (n - 1) * (1 - rho**2)
        + e**2 * (d - 1) * n
        + f**2 * (beta**2 * (1 - rho**2) + d - 1) * n * (n - 1)
    )
    S_UR = n * (n - 1) * (
        rho * beta**2 * f**2 * (e - f) * ap * (1 - rho)
        + beta**2 * f**3 * ap**2 * (1 - rho)
        + beta * f**2 * e * ap * (1 - rho)
        + beta * f**2 * (e - f) * (beta * rho + 1) * (1 - rho**2)
        + beta * f**3 * ap * (beta * (1 - rho**2) + 1 - rho)
    )
    S_UU = (
        beta**2 * f**2 * n * (n - 1) * (n * rho + 2) * (1 - rho)
        * ((e - f) ** 2 + 2 * f * (e - f) * ap + f**2 * n * ap)
    )
    return (z**2 * S_R - 2 * z * S_UR + S_UU) / (q * n * d * z**4)


# -------------------------------------------------------------------------- tokens


@pytest.mark.parametrize("n, d, rho, q", [(1, 1, 0.3, 1.0), (5, 5, 0.0, 2.0),
                                          (17, 20, 0.7, 0.5), (64, 64, 0.999, 1.0)])
def test_simplex_tokens_gram(n, d, rho, q):
    X = theory.simplex_tokens(n, d, rho, q)
    assert X.shape == (n, d) and X.dtype == np.float64
    expected = q * (rho + (1 - rho) * np.eye(n))
    np.testing.assert_allclose(X @ X.T, expected, rtol=0, atol=1e-14)


def test_simplex_tokens_rejects_impossible():
    with pytest.raises(ValueError, match=r"\bd\b"):
        theory.simplex_tokens(5, 4, 0.3)
    with pytest.raises(ValueError, match="rho"):
        theory.simplex_tokens(5, 5, 1.0)
    with pytest.raises(ValueError, match="rho"):
        theory.simplex_tokens(5, 5, -0.1)
    with pytest.raises(ValueError, match="q"):
        theory.simplex_tokens(5, 5, 0.3, q=0.0)


# -------------------------------------------------------------------------- lambda


@pytest.mark.parametrize(
    "n, rho, gamma, alpha, q",
    [
        (5, 0.3, 1.0, 0.0, 1.0),
        (5, 0.0, 0.7, 0.0, 1.0),
        (5, 0.8, 0.0, 0.4, 2.0),
        (17, 0.5, 2.0, 0.0, 1.0),  # critical
        (17, 0.9, 25.0, 0.3, 0.7),
        (17, 0.2, 0.6, 1.5, 3.0),
        (64, 0.5, 1.0, 0.0, 1.0),
        (64, 0.95, 20.0, 0.0, 1.0),  # critical
        (64, 0.6, 6.0, 0.2, 1.3),
        (64, 0.05, 30.0, 0.0, 0.5),  # beta ~ 125
    ],
)
def test_simplex_lambda_matches_direct_layer(n, rho, gamma, alpha, q):
    X = theory.simplex_tokens(n, n + 2, rho, q)
    beta = gamma * np.log(n)
    expected = direct_lambda(X, beta, alpha)
    np.testing.assert_allclose(theory.simplex_lambda(n, rho, gamma, alpha, q), expected,
                               rtol=1e-10, atol=0)


# ----------------------------------------------------------------------------- eta

ETA_CASES = [
    (2, 2, 0.5, 1.0, 1.0),
    (5, 5, 0.3, 1.0, 1.0),
    (5, 8, 0.0, 2.0, 2.5),
    (12, 15, 0.9, 10.0, 0.5),  # critical
    (20, 20, 0.6, 4.0, 1.7),
    (30, 33, 0.1, 0.5, 1.0),
    (30, 30, 0.8, 12.0, 0.8),
]


@pytest.mark.parametrize("n, d, rho, gamma, q", ETA_CASES)
def test_simplex_eta_matches_dense_jacobian(n, d, rho, gamma, q):
    X = theory.simplex_tokens(n, d, rho, q)
    expected = dense_eta_complex_step(X, gamma * np.log(n))
    np.testing.assert_allclose(theory.simplex_eta(n, d, rho, gamma, q), expected,
                               rtol=1e-9, atol=0)


def test_simplex_eta_matches_torch_jacrev():
    import torch

    n, d, rho, gamma, q = 9, 11, 0.4, 1.5, 1.3
    beta = gamma * np.log(n)

    def layer(X):
        Y = X / X.norm(dim=1, keepdim=True)
        return torch.softmax(beta * (Y @ Y.T), dim=1) @ Y

    X = torch.tensor(theory.simplex_tokens(n, d, rho, q), dtype=torch.float64)
    J = torch.func.jacrev(layer)(X)
    expected = float((J**2).sum()) / (n * d)
    np.testing.assert_allclose(theory.simplex_eta(n, d, rho, gamma, q), expected,
                               rtol=1e-9, atol=0)


@pytest.mark.parametrize("n, d, rho, gamma, q", ETA_CASES[1:])
def test_eq90_erratum_factor_two(n, d, rho, gamma, q):
    """Eq. 86 needs the factor 2 on Eq. 90's beta E F term (docs/papers/000.md §5 item 2)."""
    truth = dense_eta_complex_step(theory.simplex_tokens(n, d, rho, q), gamma * np.log(n))
    corrected = eta_eq86(n, d, rho, gamma, q, cross_factor=2.0)
    as_printed = eta_eq86(n, d, rho, gamma, q, cross_factor=1.0)
    np.testing.assert_allclose(corrected, truth, rtol=1e-9)
    assert abs(as_printed / truth - 1) > 1e-4  # >= 1e5 x the agreement above
    # and the stable rewrite is the corrected Eq. 86
    np.testing.assert_allclose(theory.simplex_eta(n, d, rho, gamma, q), corrected, rtol=1e-12)


# ------------------------------------------------------- tails: exact arithmetic truth

TAIL_CASES = [
    # (n, rho, gamma): subcritical, near-critical and supercritical, large beta
    (10**6, 0.3, 0.3),
    (10**6, 0.3, 1.0),
    (10**6, 0.5, 2.0),
    (10**6, 0.9, 9.5),
    (10**6, 0.9, 200.0),
    (10**6, 0.999, 1000.0),
    (10**6, 0.0, 1000.0),
    (4096, 0.95, 30.0),
    (3, 1e-6, 1e-4),
]


def test_tails_match_paper_forms_in_exact_arithmetic():
    import mpmath as mp
    mp.mp.dps = 80

    def lambda_closed_form(n, rho, gamma, alpha, q):  # docs/papers/000.md §4: s, c, a, b, rho'
        n, rho, gamma, alpha, q = map(mp.mpf, (n, rho, gamma, alpha, q))
        beta = gamma * mp.log(n)
        E, F = mp.e**beta, mp.e ** (rho * beta)
        Z = E + (n - 1) * F
        s = (E + (n - 1) * rho * F) / Z
        c = (rho * E + (1 + (n - 2) * rho) * F) / Z
        a = (E**2 + 2 * (n - 1) * rho * E * F + (n - 1) * (1 + (n - 2) * rho) * F**2) / Z**2
        b = (rho * E**2 + 2 * (1 + (n - 2) * rho) * E * F
             + ((n - 2) + (n**2 - 3 * n + 3) * rho) * F**2) / Z**2
        t = alpha * mp.sqrt(q)
        rho_out = (t * t * rho + 2 * t * c + b) / (t * t + 2 * t * s + a)
        return (1 - rho_out) / (1 - rho)

    def eta_paper(n, d, rho, gamma, q):  # Eq. 86 with corrected Eq. 90
        n, d, rho, gamma, q = map(mp.mpf, (n, d, rho, gamma, q))
        beta = gamma * mp.log(n)
        E, F = mp.e**beta, mp.e ** (rho * beta)
        Z, ap = E + (n - 1) * F, n * rho + 1 - rho
        S_R = (beta**2 * F**2 * n * (n**2 * rho**2 * (1 - rho)
                                     + n * (1 - rho) * (1 + rho - 3 * rho**2)
                                     - (1 + 2 * rho) * (1 - rho) ** 2)
               + 2 * beta * E * F * n * (n - 1) * (1 - rho**2) + E**2 * (d - 1) * n
               + F**2 * (beta**2 * (1 - rho**2) + d - 1) * n * (n - 1))
        S_UR = n * (n - 1) * (rho * beta**2 * F**2 * (E - F) * ap * (1 - rho)
                              + beta**2 * F**3 * ap**2 * (1 - rho)
                              + beta * F**2 * E * ap * (1 - rho)
                              + beta * F**2 * (E - F) * (beta * rho + 1) * (1 - rho**2)
                              + beta * F**3 * ap * (beta * (1 - rho**2) + 1 - rho))
        S_UU = (beta**2 * F**2 * n * (n - 1) * (n * rho + 2) * (1 - rho)
                * ((E - F) ** 2 + 2 * F * (E - F) * ap + F**2 * n * ap))
        return (Z**2 * S_R - 2 * Z * S_UR + S_UU) / (q * n * d * Z**4)

    for n, rho, gamma in TAIL_CASES:
        for alpha, q in [(0.0, 1.0), (0.7, 2.0)]:
            got = theory.simplex_lambda(n, rho, gamma, alpha, q)
            want = float(lambda_closed_form(n, rho, gamma, alpha, q))
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=0,
                                       err_msg=f"lambda {n=} {rho=} {gamma=} {alpha=}")
        for d in (n, 4 * n):
            got = theory.simplex_eta(n, d, rho, gamma, 1.7)
            want = float(eta_paper(n, d, rho, gamma, 1.7))
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=0,
                                       err_msg=f"eta {n=} {d=} {rho=} {gamma=}")


def test_no_overflow_and_broadcasting():
    rho = np.linspace(0.0, 0.99, 12)[:, None]
    gamma = np.array([0.0, 0.5, 5.0, 200.0, 1000.0])[None, :]
    with np.errstate(over="raise", invalid="raise", divide="raise", under="ignore"):
        lam = theory.simplex_lambda(1e6, rho, gamma, 0.3, 1.0)
        eta = theory.simplex_eta(1e6, 1e6, rho, gamma)
    assert lam.shape == eta.shape == (12, 5)
    assert np.all(np.isfinite(lam)) and np.all(np.isfinite(eta))
    assert np.all((lam >= 0) & (lam <= 1 + 1e-12))
    assert np.all(eta >= 0)
    # deep supercritical: identity attention, eta = (1 - 1/d)/q exactly
    np.testing.assert_allclose(eta[:, -1], 1 - 1e-6, rtol=1e-12)
    np.testing.assert_allclose(lam[:, -1], 1.0, rtol=1e-12)
    assert isinstance(theory.simplex_lambda(10, 0.5, 1.0), np.float64)


# -------------------------------------------------------------------------- limits

RHOS = np.array([0.1, 0.3, 0.6, 0.9])


@pytest.mark.parametrize("alpha, q", [(0.0, 1.0), (0.5, 2.0)])
@pytest.mark.parametrize("ratio", [0.5, 2.0])  # gamma / gamma_c, off the critical line
def test_simplex_lambda_approaches_theorem_2_1(alpha, q, ratio):
    gamma = ratio * theory.gamma_critical(RHOS)
    limit = theory.lambda_limit(RHOS, gamma, alpha, q)
    errors = [np.abs(theory.simplex_lambda(n, RHOS, gamma, alpha, q) - limit)
              for n in (1e4, 1e8, 1e12)]
    assert np.all(errors[2] < 2e-6)  # corrections ~ n^-1/2
    assert np.all(errors[2] <= errors[1]) and np.all(errors[1] <= errors[0])


@pytest.mark.parametrize("alpha, q", [(0.0, 1.0), (0.5, 2.0), (3.0, 0.5)])
def test_simplex_lambda_at_gamma_c_approaches_lambda_critical(alpha, q):
    gamma_c = theory.gamma_critical(RHOS)
    lam_c = theory.lambda_critical(RHOS, alpha, q)
    np.testing.assert_allclose(theory.lambda_limit(RHOS, gamma_c, alpha, q), lam_c)
    np.testing.assert_allclose(theory.simplex_lambda(1e8, RHOS, gamma_c, alpha, q), lam_c,
                               rtol=0, atol=1e-7)  # O(1/n)
    if alpha == 0.0:
        np.testing.assert_allclose(lam_c, 1 / (1 + 3 * RHOS), rtol=1e-15)


@pytest.mark.parametrize("q", [1.0, 2.5])
@pytest.mark.parametrize("ratio", [0.5, 1.0, 2.0])
def test_simplex_eta_approaches_theorem_2_3(q, ratio):
    gamma = ratio * theory.gamma_critical(RHOS)
    n = 1e12
    eta = theory.simplex_eta(n, n, RHOS, gamma, q)  # d = n
    limit = theory.eta_limit(n, RHOS, gamma, q)
    np.testing.assert_allclose(eta, limit, rtol=0, atol=5e-6)
    expected = {0.5: 0.0, 1.0: 0.25 / q, 2.0: 1.0 / q}[ratio]
    np.testing.assert_allclose(limit, expected, rtol=1e-11)


def test_limit_regimes_and_rtol():
    # 1/(1 - 0.95) = 19.999999999999982 in float64; a grid value 20.0 is critical
    assert theory.lambda_limit(0.95, 20.0) == pytest.approx(1 / (1 + 3 * 0.95))
    assert theory.eta_limit(10, 0.95, 20.0) == pytest.approx(0.9 / 4)
    assert theory.lambda_limit(0.95, 20.0, rtol=0.0) == 1.0
    assert theory.lambda_limit(0.5, 1.999) == 0.0
    # Theorem 2.1 assumes rho > 0: its subcritical alpha = 0 formula is 0/0 at rho = 0
    assert np.isnan(theory.lambda_limit(0.0, 0.5))
    assert theory.lambda_limit(0.0, 0.5, alpha=1.0) == 1.0


# ---------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    "call",
    [
        lambda rho: theory.gamma_critical(rho),
        lambda rho: theory.simplex_lambda(10, rho, 1.0),
        lambda rho: theory.simplex_eta(10, 10, rho, 1.0),
        lambda rho: theory.lambda_limit(rho, 1.0),
        lambda rho: theory.lambda_critical(rho),
        lambda rho: theory.eta_limit(10, rho, 1.0),
    ],
)
@pytest.mark.parametrize("rho", [1.0, -0.2, [0.3, 1.0], np.nan])
def test_rho_outside_unit_interval_raises(call, rho):
    with pytest.raises(ValueError, match="rho"):
        call(rho)


def test_other_invalid_arguments_raise():
    with pytest.raises(ValueError, match="n must"):
        theory.simplex_lambda(1, 0.5, 1.0)
    with pytest.raises(ValueError, match="gamma"):
        theory.simplex_eta(10, 10, 0.5, -1.0)
    with pytest.raises(ValueError, match="alpha"):
        theory.simplex_lambda(10, 0.5, 1.0, alpha=-1.0)
    with pytest.raises(ValueError, match="q"):
        theory.simplex_eta(10, 10, 0.5, 1.0, q=0.0)
    with pytest.raises(ValueError, match="d must"):
        theory.simplex_eta(10, 0.5, 0.5, 1.0)


# ------------------------------------------------------------------ the simplex boundary


def lambda_crossing_closed_form(n: float, rho: float) -> float:
    """gamma* of lambda on the simplex at alpha = 0, by hand: with f = n^(-gamma (1 - rho)),
    m = n - 1, p = 1/z, r = f/z, z = 1 + m f, lambda = (p - r)^2 / (rho + (1 - rho)(p^2 + m r^2))
    (theory.simplex_lambda's notes) equals 1/(1 + 3 rho) exactly where
    3 rho - 2 (1 + 3 rho + rho m) f + (1 + 3 rho - rho m^2 - (1 - rho) m) f^2 = 0,
    a quadratic in f whose root in (0, 1) gives gamma = -ln f / ((1 - rho) ln n)."""
    m = n - 1.0
    a, b, c = 1 + 3 * rho - rho * m * m - (1 - rho) * m, -2 * (1 + 3 * rho + rho * m), 3 * rho
    f = (-b - np.sqrt(b * b - 4 * a * c)) / (2 * a)  # a < 0 < c: the one positive root
    assert 0 < f < 1
    return float(-np.log(f) / ((1 - rho) * np.log(n)))


@pytest.mark.parametrize("n", [16, 256, 4096, 65536])
@pytest.mark.parametrize("rho", [0.05, 0.3, 0.7, 0.95])
def test_simplex_gamma_star_lambda_matches_quadratic_root(n, rho):
    # brentq stops at 1e-12 relative; lambda's slope in gamma at the crossing is O(ln n), so
    # rounding in lambda (~1e-15) moves the root by far less: 1e-9 relative is loose.
    got = float(theory.simplex_gamma_star(n, rho))
    assert got == pytest.approx(lambda_crossing_closed_form(n, rho), rel=1e-9)


def test_simplex_gamma_star_lambda_approaches_gamma_critical():
    """Theorem 2.1: the crossing of lambda_c sits on gamma_c = 1/(1 - rho) as n grows. Expanding the
    quadratic of ``lambda_crossing_closed_form`` in 1/m: f = (1 + O(1/(rho m)))/m, m = n - 1, so
    gamma* (1 - rho) = -ln f / ln n = 1 + O(1/(rho n ln n)); at rho >= 0.05 and ln n >= 5 that is
    at most about 4/n for a unit constant, and 10/n leaves a margin."""
    rho = np.array([0.05, 0.5, 0.95])
    for n in (256, 4096, 65536):
        scaled = theory.simplex_gamma_star(n, rho) * (1 - rho)
        assert np.all(np.abs(scaled - 1) < 10 / n)
    assert np.isnan(theory.simplex_gamma_star(1024, 0.0))  # lambda_c = 1: no crossing at rho = 0


@pytest.mark.parametrize("n, d", [(64, 64), (1024, 1024), (1024, 16)])
def test_simplex_gamma_star_eta_is_the_first_crossing(n, d):
    rho = 0.4
    star = float(theory.simplex_gamma_star(n, rho, d=d))
    ratio = lambda g: theory.simplex_eta(n, d, rho, g) / (1 - 1 / d)  # noqa: E731
    assert ratio(star) == pytest.approx(0.25, abs=1e-9)  # brentq's 1e-12 times a slope O(ln n)
    below = np.linspace(0, star, 200, endpoint=False)
    assert np.all(ratio(below) < 0.25)
    if d >= n:  # a true simplex: Theorem 2.3 puts the 1/4 crossing at gamma_c, up to O(beta/d) with
        # beta = ln n / (1 - rho) = 1.7 ln n there; 3 ln n / d allows a constant near 2
        assert abs(star * (1 - rho) - 1) < 3 * np.log(n) / d
