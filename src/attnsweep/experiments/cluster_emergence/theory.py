"""Limit shapes of paper 004 that a finite run can check (numpy and scipy only).

Model: rescaled tokens z_i(t) in R^d (Eq. 3.1), z_i' = sum_j P_ij V (z_j - z_i). Write
F for the eigenspace of the eigenvalue lambda_1 > 0 of V of largest real part, k = dim F,
and c_i(t) in R^k for the coordinates of z_i(t) along F in the dual basis (phi_j^*, Section 9.1).
On F the field is lambda_1 times a convex combination, c_i' = lambda_1 sum_j P_ij (c_j - c_i)
(Eq. 9.3), for any Q and K. Hence:

- Prop. 8.2 / Eq. 9.3: conv{c_i(t)} is non-increasing in t (``hull_excess`` <= 0).
- Theorem 3.1 (V = I, Q^T K > 0; k = d): z_i(t) -> a point of S, which lies in the boundary of
  the limit polytope K or at 0, generically a vertex (``vertex_fraction`` -> 1).
- Theorem 4.2 (good triple, k = 1): c_i(t) -> {a, 0, b}, a and b the limits of min_j c_j and
  max_j c_j: the boundary of conv{c} (two points) or 0.
- Theorem 5.2 (paranormal V, Q^T K > 0; 1 <= k): dist(z_i(t), (dK u {0}) x G) -> 0.

The last three say the same of c: every c_i(t) ends on the boundary of conv{c(t)} or at 0
(``limit_fraction`` -> 1). Theorem 2.1 (d = 1, V > 0, Q K > 0): P(t) tends to a Boolean
matrix of rank <= 2 for almost every start (``RANK_BOUND_D1``). Theorem 4.2 in one number:
the values c_i(T) take at most three levels (``levels``).

Eq. 12.1 (Section 12.2, Fig. 18) is an observation, not a theorem: with sigma = ReLU, W = I the
tokens reach the positive orthant and follow at most three hyperplanes (``orthant_fraction`` -> 1,
``levels`` <= 3); with tanh, or ReLU and a random W, they collapse to 0 (``contraction`` -> 0).

Distances are in the units of the tokens; fractions are of the n tokens of one run.
Reference: *The emergence of clusters in self-attention dynamics*, Geshkovski, Letrouit,
Polyanskiy and Rigollet, arXiv:2305.05465.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.spatial import ConvexHull

from attnsweep.experiments.arrays import FloatArray

__all__ = [
    "RANK_BOUND_D1",
    "boundary_distance",
    "contraction",
    "dominant_multiplicity",
    "hull_excess",
    "hull_vertices",
    "levels",
    "limit_fraction",
    "orthant_fraction",
    "vertex_fraction",
]


#: Theorem 2.1: rank of the Boolean limit P* for almost every initial sequence (d = 1).
RANK_BOUND_D1 = 2
#: Relative tolerance of eigenvalue ties and of flat point clouds.
RTOL = 1e-9


def dominant_multiplicity(values: ArrayLike, rtol: float = RTOL) -> NDArray[np.int64]:
    """k = dim F for eigenvalues (..., d) of V: how many equal lambda_1 = max Re(lambda) when
    lambda_1 is real and positive and every other eigenvalue has |lambda| < lambda_1; else 0.

    k = 1 is the spectral part of a good triple (Def. 4.1), k >= 1 of a paranormal V (Def. 5.1,
    with V diagonalisable on F), k = d of V = lambda_1 I (Theorem 3.1).
    """
    values = np.asarray(values, dtype=complex)
    top = values.real.max(-1, keepdims=True)
    scale = np.abs(values).max(-1, keepdims=True)
    equal = np.abs(values - top) <= rtol * scale
    k = equal.sum(-1)
    smaller = np.where(equal, True, np.abs(values) < top * (1 - rtol)).all(-1)
    return np.where((top[..., 0] > 0) & smaller, k, 0)


def _frame(points: FloatArray, rtol: float = RTOL) -> FloatArray:
    """Coordinates (n, r) of points (n, k) in an orthonormal frame of their affine span."""
    centred = points - points.mean(0)
    _, s, vt = np.linalg.svd(centred, full_matrices=False)
    r = int((s > rtol * max(s.max(initial=0.0), np.abs(points).max(initial=0.0))).sum())
    return centred @ vt[:r].T


def hull_vertices(points: ArrayLike) -> NDArray[np.int64]:
    """Indices of the vertices of conv(points), points (n, k); in the affine span if flat."""
    coords = _frame(np.asarray(points, dtype=float))
    if coords.shape[1] == 0:
        return np.array([0])
    if coords.shape[1] == 1:
        return np.unique([coords[:, 0].argmin(), coords[:, 0].argmax()])
    return np.sort(ConvexHull(coords).vertices)


def boundary_distance(points: ArrayLike) -> FloatArray:
    """Distance of each point (n, k) to the boundary of conv(points) in R^k: 0 for all when the
    hull is flat (it is then its own boundary), else the smallest distance to a facet plane."""
    points = np.asarray(points, dtype=float)
    if _frame(points).shape[1] < points.shape[1]:
        return np.zeros(len(points))
    if points.shape[1] == 1:
        c = points[:, 0]
        return np.minimum(c - c.min(), c.max() - c)
    equations = ConvexHull(points).equations  # unit normals a, offsets b: a.x + b <= 0 inside
    return np.maximum(-(points @ equations[:, :-1].T + equations[:, -1]).max(-1), 0.0)


def limit_fraction(points: ArrayLike, radius: float) -> float:
    """Fraction of points c_i (n, k) within ``radius`` of the boundary of conv{c} or of 0:
    the limit set of Theorems 3.1, 4.2 and 5.2 (-> 1 as t -> infinity)."""
    points = np.asarray(points, dtype=float)
    near = np.minimum(boundary_distance(points), np.linalg.norm(points, axis=-1))
    return float((near <= radius).mean())


def vertex_fraction(points: ArrayLike, radius: float) -> float:
    """Fraction of points (n, k) within ``radius`` of a vertex of their convex hull: the generic
    limit of Theorem 3.1 (-> 1)."""
    points = np.asarray(points, dtype=float)
    vertices = points[hull_vertices(points)]
    gaps = np.linalg.norm(points[:, None, :] - vertices[None], axis=-1).min(-1)
    return float((gaps <= radius).mean())


def hull_excess(points: ArrayLike, reference: ArrayLike) -> float:
    """Largest distance of a point (n, k) outside conv(reference) (m, k), or minus the smallest
    distance of a point inside to its boundary: <= 0 when conv(points) lies in conv(reference),
    as Prop. 8.2 and Eq. 9.3 predict for later times. NaN when the reference is flat."""
    points, reference = np.asarray(points, dtype=float), np.asarray(reference, dtype=float)
    if _frame(reference).shape[1] < reference.shape[1]:
        return float("nan")
    if reference.shape[1] == 1:
        lo, hi = reference.min(), reference.max()
        return float(np.maximum(lo - points[:, 0], points[:, 0] - hi).max())
    equations = ConvexHull(reference).equations
    return float((points @ equations[:, :-1].T + equations[:, -1]).max())


def levels(values: ArrayLike, radius: float) -> int:
    """Number of groups of the values (n,) when sorted values more than ``radius`` apart start a
    new group: the hyperplanes phi_1^*(z) = c the tokens lie on (Theorem 4.2: at most 3)."""
    return int(1 + (np.diff(np.sort(np.asarray(values, dtype=float))) > radius).sum())


def orthant_fraction(points: ArrayLike, tol: float) -> float:
    """Fraction of points (n, k) with every coordinate >= -``tol`` (Fig. 18, top: -> 1)."""
    return float((np.asarray(points, dtype=float) >= -tol).all(-1).mean())


def contraction(points: ArrayLike, reference: ArrayLike) -> float:
    """max_i |points_i| / max_i |reference_i| (Fig. 18, middle and bottom: -> 0)."""
    norm = np.linalg.norm
    return float(norm(np.asarray(points, dtype=float), axis=-1).max() / norm(np.asarray(reference, dtype=float),
                                                                             axis=-1).max())
