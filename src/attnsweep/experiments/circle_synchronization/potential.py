"""The interaction energy on the circle, its gradient and Hessian in closed form (numpy, float64).

Angles theta in R^n, batched over leading dimensions. With h(x) = e^{beta cos x},
g(x) = -h'(x) / beta = e^{beta cos x} sin x, paper 001's energy (Eq. 7.4) and flow (Eq. 7.1) are

    E(theta) = (1 / (2 beta n^2)) sum_{i,j} (e^{beta cos(theta_i - theta_j)} - 1),
    theta_i' = n dE/dtheta_i = -(1/n) sum_j g(theta_i - theta_j)                          (USA)

(the -1 makes E continuous at beta = 0, where it is Kuramoto's (1/(2 n^2)) sum cos). Every real
beta is allowed: the flow is the gradient ascent of E whatever its sign. The Hessian is
n^2 d^2E = H with H_ik = g'(theta_i - theta_k) for i != k and rows summing to zero,

    g'(x) = e^{beta cos x} (cos x - beta sin^2 x),
    g''(x) = e^{beta cos x} sin x (beta^2 sin^2 x - 3 beta cos x - 1),

so H = -sum_{i<j} g'(theta_i - theta_j) (e_i - e_j)(e_i - e_j)^T, and H 1 = 0 (the rotation).
SA (softmax weights) has the field theta_i' = -(1/Z_i) sum_j g(theta_i - theta_j), Z_i =
sum_j e^{beta cos(theta_i - theta_j)}: the same critical points, and at each the Jacobian
D^{-1} H with D = diag(Z) > 0, which has the inertia of H (Sylvester): the same attractors.
"""

from __future__ import annotations

import numpy as np


def differences(theta: np.ndarray) -> np.ndarray:
    """theta_i - theta_j, shape (..., n, n)."""
    return theta[..., :, None] - theta[..., None, :]


def g(x: np.ndarray, beta: np.ndarray | float) -> np.ndarray:
    return np.exp(beta * np.cos(x)) * np.sin(x)


def g1(x: np.ndarray, beta: np.ndarray | float) -> np.ndarray:
    """g'(x)."""
    s = np.sin(x)
    return np.exp(beta * np.cos(x)) * (np.cos(x) - beta * s * s)


def g2(x: np.ndarray, beta: np.ndarray | float) -> np.ndarray:
    """g''(x)."""
    s = np.sin(x)
    return np.exp(beta * np.cos(x)) * s * (beta * beta * s * s - 3 * beta * np.cos(x) - 1)


def g2_bound(beta: np.ndarray | float) -> np.ndarray:
    """An upper bound of |g''| on the circle: e^{|beta|} (1 + 3|beta| + beta^2)."""
    b = np.abs(beta)
    return np.exp(b) * (1 + 3 * b + b * b)


def _beta(beta: np.ndarray | float, theta: np.ndarray) -> np.ndarray:
    """beta broadcast against the (..., n, n) differences of ``theta`` (..., n)."""
    return np.asarray(beta, float)[..., None, None] * np.ones(theta.shape[:-1])[..., None, None]


def energy(theta: np.ndarray, beta: np.ndarray | float) -> np.ndarray:
    """E(theta) of Eq. 7.4 (minus its value at beta's limit 0 of the constant), shape (...)."""
    b = _beta(beta, theta)
    c = np.cos(differences(theta))
    n = theta.shape[-1]
    # expm1(beta c) / beta, and its limit c at beta = 0
    safe = np.where(b == 0, 1.0, b)
    terms = np.where(b == 0, c, np.expm1(b * c) / safe)
    return terms.sum((-1, -2)) / (2 * n * n)


def force(theta: np.ndarray, beta: np.ndarray | float) -> np.ndarray:
    """F_i = -sum_j g(theta_i - theta_j) = n^2 dE/dtheta_i, shape (..., n)."""
    return -g(differences(theta), _beta(beta, theta)).sum(-1)


def hessian(theta: np.ndarray, beta: np.ndarray | float) -> np.ndarray:
    """H = n^2 d^2E (..., n, n): g'(theta_i - theta_k) off the diagonal, rows summing to zero."""
    h = g1(differences(theta), _beta(beta, theta))
    n = theta.shape[-1]
    eye = np.eye(n, dtype=bool)
    h = np.where(eye, 0.0, h)
    return h - np.eye(n) * h.sum(-1)[..., None]


def usa_field(theta: np.ndarray, beta: np.ndarray | float) -> np.ndarray:
    """theta' of USA (Eq. 7.1): F / n."""
    return force(theta, beta) / theta.shape[-1]


def sa_field(theta: np.ndarray, beta: np.ndarray | float) -> np.ndarray:
    """theta' of SA: F_i / Z_i."""
    b = _beta(beta, theta)
    weights = np.exp(b * np.cos(differences(theta)))
    return force(theta, beta) / weights.sum(-1)


def complement_basis(n: int) -> np.ndarray:
    """An orthonormal basis (n, n - 1) of the complement of the rotation mode 1 / sqrt(n)."""
    q, _ = np.linalg.qr(np.concatenate([np.ones((n, 1)), np.eye(n)[:, : n - 1]], axis=1))
    return q[:, 1:]


def complement_spectrum(h: np.ndarray) -> np.ndarray:
    """Eigenvalues of H restricted to 1-perp (..., n - 1), ascending: H 1 = 0 exactly, so these are
    the spectrum of H with its rotation mode removed."""
    u = complement_basis(h.shape[-1])
    return np.linalg.eigvalsh(u.T @ h @ u)
