"""Critical points from the flow's end states: Newton's polish, the class, and its certificate
(numpy, float64, batched over systems of one n).

Newton's method on F = n^2 grad E (:mod:`.potential`) in the complement of the rotation:
theta <- theta - U (U^T H U)^{-1} U^T F, a step halved until |F| falls. The polished point is then

- ``synchronized``: every pair within ``merge`` (the global maximum, Hessian -n e^beta off the rotation);
- ``spurious``: a certified strict local maximum that is not synchronized (a spurious attractor);
- ``saddle``: a certified critical point with a positive eigenvalue off the rotation;
- ``unresolved``: Newton did not converge, or the certificate fails (a degenerate point).

The certificate (Newton-Kantorovich on the complement of the rotation). Let mu be the smallest
|eigenvalue| of H off the rotation at the polished theta, r = |F| there, eta = r / mu, and
L = 2 n sup|g''| a Lipschitz constant of H in the operator norm (v^T (H(a) - H(b)) v =
-sum_{i<j} (g'(a_ij) - g'(b_ij)) (v_i - v_j)^2, each |v_i - v_j|^2 summing to at most n |v|^2, and
|a_ij - b_ij| <= 2 |a - b|). If 2 L eta < mu, a true critical point lies within 2 eta, unique there
(Kantorovich's h = L eta / mu <= 1/2), and its Hessian differs from the computed one by at most
2 L eta < mu in norm (Weyl): it has the same inertia. Rounding is charged to both sides: mu loses
8 n eps |H|_F (the eigensolver's backward error) and r gains 8 n eps n e^{|beta|} (the sum of n
forces of size up to n e^{|beta|}).
"""

from __future__ import annotations

import numpy as np

from attnsweep.experiments.circle_synchronization import potential

#: Classes of a polished end state, in the order of the store's ``kind`` flag values.
KINDS = ("synchronized", "spurious", "saddle", "unresolved")
EPS = np.finfo(np.float64).eps


def polish(theta: np.ndarray, beta: np.ndarray, tol: float = 1e-13, max_iter: int = 40) -> np.ndarray:
    """Newton's method on F from ``theta`` (B, n) at ``beta`` (B,): the polished angles (B, n).
    Stops per system when max |F_i| <= tol n e^{|beta|} or no halved step reduces |F|."""
    theta = np.array(theta, float)
    n = theta.shape[-1]
    u = potential.complement_basis(n)
    scale = tol * n * np.exp(np.abs(beta))
    f = potential.force(theta, beta)
    active = np.abs(f).max(-1) > scale
    for _ in range(max_iter):
        if not active.any():
            break
        idx = np.nonzero(active)[0]
        h = u.T @ potential.hessian(theta[idx], beta[idx]) @ u
        rhs = f[idx] @ u
        try:
            step = -np.linalg.solve(h, rhs[..., None])[..., 0] @ u.T
        except np.linalg.LinAlgError:  # a singular Hessian somewhere: least squares, one system at a time
            step = -np.stack([np.linalg.lstsq(h_i, r_i, rcond=None)[0] for h_i, r_i in zip(h, rhs)]) @ u.T
        size = np.ones(len(idx))
        norm = np.linalg.norm(f[idx], axis=-1)
        improved = np.zeros(len(idx), bool)
        for _ in range(20):
            trial = theta[idx] + size[:, None] * step
            f_trial = potential.force(trial, beta[idx])
            better = (np.linalg.norm(f_trial, axis=-1) < norm) & ~improved
            theta[idx[better]], f[idx[better]] = trial[better], f_trial[better]
            improved |= better
            if improved.all():
                break
            size = np.where(improved, size, size / 2)
        active[idx[~improved]] = False
        active &= np.abs(f).max(-1) > scale
    return theta


def classify(theta: np.ndarray, beta: np.ndarray, merge: float = 1e-6) -> dict[str, np.ndarray]:
    """The class of each polished state (B, n) and what certifies it: ``kind`` (index into KINDS),
    ``top`` (the largest eigenvalue of H off the rotation), ``margin`` (-top / |H|_2: how far inside
    the stable side), ``residual`` (|F|), ``certified`` (the inequality of the module docstring)."""
    n = theta.shape[-1]
    h = potential.hessian(theta, beta)
    eig = potential.complement_spectrum(h)
    r = np.linalg.norm(potential.force(theta, beta), axis=-1) + 8 * n * EPS * n * np.exp(np.abs(beta))
    mu = np.abs(eig).min(-1) - 8 * n * EPS * np.linalg.norm(h, axis=(-1, -2))
    lipschitz = 2 * n * potential.g2_bound(beta)
    certified = (mu > 0) & (2 * lipschitz * r / np.where(mu > 0, mu, 1.0) < mu)
    top = eig[..., -1]
    spread = np.abs(np.angle(np.exp(1j * (theta - theta[..., :1])))).max(-1)
    kind = np.full(theta.shape[0], KINDS.index("unresolved"))
    kind[certified & (top > 0)] = KINDS.index("saddle")
    kind[certified & (top < 0)] = KINDS.index("spurious")
    kind[spread < merge] = KINDS.index("synchronized")
    scale = np.abs(eig).max(-1)
    return {"kind": kind, "top": top, "margin": -top / np.where(scale > 0, scale, 1.0), "residual": r,
            "certified": certified}


def cluster_masses(theta: np.ndarray, merge: float = 1e-6) -> list[tuple[int, ...]]:
    """Per state, the masses of its clusters (particles within ``merge`` of a neighbour along the
    circle) in circular order, from the cluster after the widest gap."""
    out = []
    for angles in np.mod(theta, 2 * np.pi):
        a = np.sort(angles)
        gaps = np.diff(np.concatenate([a, [a[0] + 2 * np.pi]]))  # the gap after each particle
        # start after the widest gap: a cluster ends after each gap >= merge, the last at the widest
        after = np.roll(gaps, -(int(np.argmax(gaps)) + 1))
        ends = np.nonzero(after >= merge)[0]
        out.append(tuple(int(s) for s in np.diff(np.concatenate([[-1], ends]))))
    return out
