"""Cluster configurations on the circle: k clusters of masses m_a at angles phi_a (numpy, float64).

n = sum_a m_a particles, m_a of them at phi_a. Such a configuration is critical for the flow of
:mod:`.potential` iff every cluster feels no force,

    F_a(phi) = -sum_b m_b g(phi_a - phi_b) = 0                                          (C.1)

(g(0) = 0: a cluster does not pull on itself), a system of k equations in k - 1 unknowns
(a rotation changes nothing, and sum_a m_a F_a = 0 identically since g is odd). The n x n Hessian
H of the whole configuration splits into two invariant subspaces:

- inside cluster a, vectors summing to zero on it: eigenvalue
  lambda_a = -sum_b m_b g'(phi_a - phi_b) (g'(0) = e^beta: the cluster's own pull), multiplicity
  m_a - 1;                                                                               (C.2)
- vectors constant on each cluster: the eigenvalues of R = S M, R_ab = m_b g'(phi_a - phi_b)
  (a != b), R_aa = -sum_{b != a} m_b g'(phi_a - phi_b); R is similar to the symmetric
  M^{1/2} S M^{1/2}, and R 1 = 0 is the rotation.                                        (C.3)

The configuration is a spurious attractor (a strict local maximum of E up to rotation) when every
lambda_a with m_a >= 2 and every eigenvalue of R but the rotation's is negative.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnsweep.experiments.circle_synchronization.potential import g, g1


@dataclass(frozen=True)
class Configuration:
    """Cluster masses (k,) and angles (k,), in circular order from phi_0 = 0."""

    masses: tuple[int, ...]
    phi: np.ndarray

    def angles(self) -> np.ndarray:
        """The n particles' angles, cluster by cluster."""
        return np.repeat(self.phi, self.masses)


def _pairs(phi: np.ndarray) -> np.ndarray:
    return phi[:, None] - phi[None, :]


def spectrum(phi: np.ndarray, masses: np.ndarray, beta: float) -> tuple[np.ndarray, np.ndarray]:
    """(intra, inter): lambda_a of (C.2) for the clusters of mass >= 2, and the k - 1 eigenvalues of
    R of (C.3) other than the rotation's, ascending (from the symmetric form on sqrt(m)-perp)."""
    m = np.asarray(masses, float)
    h = g1(_pairs(phi), beta)
    intra = -(h * m[None, :]).sum(-1)[m >= 2]
    off = h.copy()
    np.fill_diagonal(off, 0.0)
    s = off - np.diag((off * m[None, :]).sum(-1) / m)
    root = np.sqrt(m)
    sym = root[:, None] * s * root[None, :]
    # remove the rotation, whose eigenvector is sqrt(m) / |sqrt(m)|
    basis, _ = np.linalg.qr(np.concatenate([root[:, None], np.eye(len(m))[:, :-1]], axis=1))
    basis = basis[:, 1:]
    inter = np.linalg.eigvalsh(basis.T @ sym @ basis) if len(m) > 1 else np.zeros(0)
    return intra, inter


def largest_eigenvalue(phi: np.ndarray, masses: np.ndarray, beta: float) -> float:
    """The top of the Hessian's spectrum off the rotation: negative iff a strict local maximum."""
    intra, inter = spectrum(phi, masses, beta)
    return float(np.concatenate([intra, inter]).max(initial=-np.inf))


def newton(phi: np.ndarray, masses: np.ndarray, beta: np.ndarray, tol: float = 1e-12,
           max_iter: int = 30) -> tuple[np.ndarray, np.ndarray]:
    """Solve (C.1) by Newton's method for a batch of starts ``phi`` (B, k) at ``beta`` (B,), with
    phi_0 held at 0. Since sum_a m_a F_a = 0, the last equation follows from the others: the step
    solves the square system of the first k - 1 in phi_1 ... phi_{k-1}; a step that does not reduce
    |F| is halved (ten times at most, then the start is given up). Converged where
    max |F_a| <= tol x n e^{|beta|} (the scale of a force): the angles (B, k) and that mask (B,)."""
    m = np.asarray(masses, float)
    phi = np.array(phi, float)
    phi -= phi[:, :1]
    beta = np.asarray(beta, float)
    scale = tol * m.sum() * np.exp(np.abs(beta))
    f = force(phi, m, beta)
    norm = np.linalg.norm(f, axis=-1)
    active = np.abs(f).max(-1) > scale
    for _ in range(max_iter):
        idx = np.nonzero(active)[0]
        if len(idx) == 0:
            break
        r = jacobian(phi[idx], m, beta[idx])[:, :-1, 1:]
        solvable = np.abs(np.linalg.det(r)) > 0
        step = np.zeros((len(idx), len(m) - 1))
        step[solvable] = np.linalg.solve(r[solvable], -f[idx][solvable][:, :-1, None])[..., 0]
        size = np.where(solvable, 1.0, 0.0)
        moved = np.zeros(len(idx), bool)
        for _ in range(10):
            trial = phi[idx].copy()
            trial[:, 1:] += size[:, None] * step
            f_trial = force(trial, m, beta[idx])
            better = (np.linalg.norm(f_trial, axis=-1) < norm[idx]) & ~moved
            phi[idx[better]], f[idx[better]] = trial[better], f_trial[better]
            norm[idx[better]] = np.linalg.norm(f_trial[better], axis=-1)
            moved |= better
            size = np.where(moved, size, size / 2)
            if moved.all():
                break
        active[idx[~moved]] = False
        active &= np.abs(f).max(-1) > scale
    return phi, np.abs(f).max(-1) <= scale


def force(phi: np.ndarray, m: np.ndarray, beta: np.ndarray) -> np.ndarray:
    """F_a of (C.1) for a batch of configurations (B, k) at beta (B,)."""
    return -(g(phi[:, :, None] - phi[:, None, :], beta[:, None, None]) * m).sum(-1)


def jacobian(phi: np.ndarray, m: np.ndarray, beta: np.ndarray) -> np.ndarray:
    """dF_a / dphi_b = R of (C.3) for a batch (B, k, k)."""
    r = g1(phi[:, :, None] - phi[:, None, :], beta[:, None, None]) * m
    k = phi.shape[-1]
    r[:, np.arange(k), np.arange(k)] = 0.0
    return r - r.sum(-1)[..., None] * np.eye(k)


def circular_masses(phi: np.ndarray, masses: tuple[int, ...], merge: float = 1e-6) -> tuple[int, ...] | None:
    """The masses in circular order of ``phi`` (mod 2 pi), starting at the first cluster, or None where
    two clusters lie within ``merge`` of each other (the configuration has fewer clusters)."""
    angles = np.mod(phi, 2 * np.pi)
    order = np.argsort(angles)
    gaps = np.diff(np.concatenate([angles[order], [angles[order[0]] + 2 * np.pi]]))
    if len(phi) > 1 and gaps.min() < merge:
        return None
    start = int(np.nonzero(order == 0)[0][0])
    return tuple(int(masses[i]) for i in np.roll(order, -start))


def bracelet(masses: tuple[int, ...]) -> tuple[int, ...]:
    """The canonical form of a circular sequence under rotation and reflection (its least rotation
    of itself or its reverse): the label of a family."""
    seqs = (masses, masses[::-1])
    return min(s[i:] + s[:i] for s in seqs for i in range(len(s)))
