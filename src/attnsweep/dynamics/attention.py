"""Observables of the attention matrix P(t) and of the token cloud in R^d (paper 004, docs/papers/004.md §2, §6).

Every function takes a batch, P (B, n, n) or tokens z (B, n, d), and returns one value per
system (B,) unless it says otherwise; a system with a non-finite input gets NaN.

- P(t): numerical rank, Boolean defect b(t) = 1 - min_i max_j P_ij, number of leaders
  |{argmax_j P_ij}| (Theorem 2.1: P(t) tends to a Boolean matrix of rank at most 3, in d = 1),
  and whether the scores still fix P despite their rounding error.
- Tokens: cluster count (connected components at a distance threshold), diameter, support
  function max_i <u, z_i> (conv{z_i(t)} shrinks for V = I, Prop. 8.2), and the eigen-coordinates
  phi_j^*(z_i) in the dual basis of an eigenbasis of V (Section 9.1 and Theorem 4.2;
  docs/papers/004.md §5 item 3: the dual basis, not an orthonormal one, and real 2-D invariant
  planes for complex pairs).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch import Tensor

from attnsweep.dynamics import observables

#: Numerical rank: singular values above ``RANK_TOL`` times the largest (docs/papers/004.md §6).
RANK_TOL = 1e-6
#: Eigenbases with a condition number above this (V defective or nearly so) give NaN coordinates.
MAX_CONDITION = 1e12


def _finite(a: Tensor) -> Tensor:
    """(B,) True where every entry of a system is finite."""
    return torch.isfinite(a).flatten(1).all(-1)


def _masked(value: Tensor, finite: Tensor) -> Tensor:
    return torch.where(finite, value.to(torch.float64), math.nan)


def numerical_rank(p: Tensor, tol: float = RANK_TOL) -> Tensor:
    """Number of singular values of P above ``tol`` sigma_max.

    Relative to the largest: for a row-stochastic P, sigma_max lies in [1, sqrt(n)] (P 1 = 1 and
    ||P||_2^2 <= ||P||_1 ||P||_inf = n), so this differs from an absolute threshold by at most
    sqrt(n) and does not depend on the units of anything.
    """
    finite = _finite(p)
    safe = torch.where(finite[:, None, None], p, 0.0)
    return _masked(torch.linalg.matrix_rank(safe, rtol=tol), finite)


def boolean_defect(p: Tensor) -> Tensor:
    """b(t) = 1 - min_i max_j P_ij: 0 exactly when every row is a unit vector (P Boolean).

    Half the distance of P to the nearest row-stochastic Boolean matrix in the max-row-sum norm
    ||A||_inf = max_i sum_j |A_ij|: row i is nearest to e_{argmax_j P_ij}, at l1 distance
    2 (1 - max_j P_ij).
    """
    finite = _finite(p)
    return _masked(1 - p.amax(-1).amin(-1), finite)


def leader_count(p: Tensor) -> Tensor:
    """|{argmax_j P_ij : i}|: how many tokens are some token's strongest key (first on ties)."""
    finite = _finite(p)
    top = torch.where(finite[:, None, None], p, 0.0).argmax(-1)
    hit = torch.zeros(p.shape[:-1], dtype=torch.bool, device=p.device).scatter_(-1, top, True)
    return _masked(hit.sum(-1), finite)


def resolved(logits: Tensor, error: Tensor, margin: float = 40.0) -> Tensor:
    """1 where the scores (B, n, n) fix P despite their rounding ``error`` (B,), else 0: the error
    is below 1 (P to a relative e^{error} - 1), or every row's largest score leads its second by
    more than error + ``margin`` (P Boolean to e^{-margin} whatever the error). Past that, P and
    with it the trajectory are noise: a float64 run of Eq. 3.1 holds about e^{lambda_1 t} < 1/eps
    within a cluster (t ~ 37/lambda_1)."""
    top = logits.topk(2, dim=-1).values  # n >= 2
    gap = (top[..., 0] - top[..., 1]).amin(-1)
    ok = (error < 1) | (gap > error + margin)
    return _masked(ok, _finite(logits))


def diameter(z: Tensor) -> Tensor:
    """max_{i,j} ||z_i - z_j||."""
    return _masked(_distances(z).amax((-2, -1)), _finite(z))


def _distances(z: Tensor) -> Tensor:
    """||z_i - z_j||, (B, n, n), from the differences (no |a|^2 + |b|^2 - 2ab cancellation)."""
    return torch.cdist(z, z, compute_mode="donot_use_mm_for_euclid_dist")


def cluster_count(z: Tensor, radius: Tensor) -> Tensor:
    """Connected components of the graph ||z_i - z_j|| <= radius (docs/papers/004.md §6), ``radius`` (B,)
    in the units of z (the experiment uses 1e-3 diam z(0))."""
    finite = _finite(z)
    return _masked(observables.components(_distances(z) <= radius[:, None, None]), finite)


def support(z: Tensor, u: Tensor) -> Tensor:
    """Support function h(u) = max_i <u, z_i> of conv{z_i}, for directions u (m, d): (B, m).

    conv{z_i(t)} is non-increasing for V = I, Q^T K > 0 (Prop. 8.2) iff h(u) is, for every u.
    """
    return (z @ u.T).amax(-2)


class Eigenbasis(NamedTuple):
    """A real eigenbasis of V and its dual basis, modes sorted by decreasing Re(lambda).

    values : (B, d) complex eigenvalues; a conjugate pair is adjacent, +Im first.
    vectors : (B, d, d) real basis, column j = phi_j: the unit eigenvector of a real eigenvalue;
        for a pair a +- ib with eigenvector u + iw (phase chosen so that u is orthogonal to w and
        |u| >= |w|), the columns u and w span the real invariant plane (V u = a u - b w).
    dual : (B, d, d) the dual basis: row j is phi_j^*, with phi_j^*(phi_k) = delta_jk
        (rows of vectors^{-1}); for a real eigenvalue, the left eigenvector psi_j scaled so that
        psi_j^T phi_j = 1 (docs/papers/004.md §5 item 3). NaN where the basis is singular (V defective).
    """

    values: Tensor
    vectors: Tensor
    dual: Tensor


def _fix_phase(vectors: Tensor) -> Tensor:
    """Multiply each complex column u + iw by e^{i theta} so that u ^ w = 0 and |u| >= |w|
    (v^T v real positive), then flip its sign so that the largest |entry| of u is positive."""
    square = (vectors * vectors).sum(-2)  # v^T v, not conjugated
    vectors = vectors * torch.exp(-0.5j * torch.angle(square))[..., None, :]
    real = vectors.real
    top = real.abs().argmax(-2, keepdim=True)
    sign = torch.where(real.gather(-2, top) < 0, -1.0, 1.0)
    return vectors * sign


def eigenbasis(v: Tensor) -> Eigenbasis:
    """The real eigenbasis of V (B, d, d) and its dual basis (see :class:`Eigenbasis`).

    Computed by ``torch.linalg.eig`` on V as given (float64 on the CPU for reproducible signs);
    ties in Re(lambda) keep LAPACK's order, so V = I gives the standard basis.
    """
    values, vectors = torch.linalg.eig(v)
    order = torch.sort(values.imag, dim=-1, descending=True, stable=True).indices
    order = order.gather(-1, torch.sort(values.real.gather(-1, order), dim=-1, descending=True,
                                        stable=True).indices)
    values = values.gather(-1, order)
    vectors = _fix_phase(vectors.gather(-1, order[..., None, :].expand_as(vectors)))
    # Column j of the real basis: Re(phi_j), or Im(phi_{j-1}) for the second of a conjugate pair.
    second = (values.imag < 0)[..., None, :]
    shifted = torch.roll(vectors, 1, dims=-1)
    basis = torch.where(second, shifted.imag, vectors.real)
    condition = torch.linalg.cond(basis)
    good = torch.isfinite(condition) & (condition < MAX_CONDITION)
    safe = torch.where(good[:, None, None], basis, torch.eye(v.shape[-1], dtype=basis.dtype, device=basis.device))
    dual = torch.where(good[:, None, None], torch.linalg.inv(safe), math.nan)
    return Eigenbasis(values, basis, dual)


def eigen_coordinates(z: Tensor, dual: Tensor) -> Tensor:
    """phi_j^*(z_i) for the dual rows ``dual`` (B, m, d): (B, n, m). For a real eigenvalue
    lambda_j, (1/lambda_j) d/dt phi_j^*(z_i) = sum_k P_ik (phi_j^*(z_k) - phi_j^*(z_i)) (Eq. 9.3)."""
    return z @ dual.transpose(-1, -2)


def moments(c: Tensor) -> tuple[Tensor, Tensor]:
    """Mean and variance (1/count) of coordinates c (B, n, m) over three groups of tokens: those
    with c_ij < 0, all of them, those with c_ij > 0; two (B, m, 3) tensors, NaN for an empty group.

    Figs. 7b and 15: for Re(lambda_j) > 0 the tokens split between two values a < 0 < b
    (Theorem 4.2), so each sign group's variance tends to 0 and its mean to a or b.
    """
    groups = torch.stack([c < 0, torch.ones_like(c, dtype=torch.bool), c > 0], -1).to(c.dtype)
    count = groups.sum(-3)
    mean = (groups * c[..., None]).sum(-3) / count
    var = (groups * (c[..., None] - mean[..., None, :, :]) ** 2).sum(-3) / count
    return mean, var
