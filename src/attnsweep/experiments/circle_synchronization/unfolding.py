"""The leading family's threshold near -2/3: the three-cluster bifurcation unfolded by a mass
imbalance (docs/papers/circle.md §7; numpy, float64).

At n = 3q + 1 and 3q + 2 the structured search's leading family is three nearly equal clusters,
(q - 1, q + 1, q + 1) and (q, q + 1, q + 1): fractions (1/3 - 2 delta, 1/3 + delta, 1/3 + delta)
with delta = 2 / (3n) and 1 / (3n). A family's threshold depends on its fractions alone (scaling
the masses scales (C.1) and the spectra of (C.2), (C.3)), so both residues follow one curve
beta_c(delta), whose expansion is

    beta_c(delta) = -2/3 - (2 sqrt(10) / 3) sqrt(delta) + O(delta).
"""

from __future__ import annotations

import math

import numpy as np

from attnsweep.experiments.circle_synchronization import clusters

#: The coefficient of sqrt(delta): 2 sqrt(10) / 3 (docs/papers/circle.md §7).
COEFFICIENT = 2 * math.sqrt(10) / 3
#: Where the continuation starts: below every threshold of delta <= 1/30 (n >= 10), the branch there
#: is the splay of three, deformed.
START = -2.0


def imbalance(n: int) -> float:
    """delta of the leading family of n: 2 / (3n) at n = 3q + 1, 1 / (3n) at 3q + 2, 0 at 3q."""
    return (0.0, 2 / (3 * n), 1 / (3 * n))[n % 3]


def leading_order(delta: float) -> float:
    """-2/3 - (2 sqrt(10) / 3) sqrt(delta): the expansion's first two terms."""
    return -2 / 3 - COEFFICIENT * math.sqrt(delta)


def _fractions(delta: float) -> np.ndarray:
    return np.array([1 / 3 - 2 * delta, 1 / 3 + delta, 1 / 3 + delta])


def _stable_solution(phi: np.ndarray, delta: float, beta: float) -> np.ndarray | None:
    """The critical configuration Newton reaches from ``phi`` at beta, where its (C.3) spectrum off the
    rotation is negative; None otherwise (no solution, or not a strict maximum)."""
    m = _fractions(delta)
    found, ok = clusters.newton(phi[None], m, np.array([beta]), tol=1e-14)
    if not ok[0] or clusters.spectrum(found[0], m, beta)[1].max() >= 0:
        return None
    return found[0]


def threshold(delta: float, steps: int = 400, tol: float = 1e-12) -> float:
    """beta_c(delta), the stable side: the near-splay branch of fractions (1/3 - 2 delta, 1/3 + delta,
    1/3 + delta) followed from START up a grid of ``steps`` betas to -2/3, then bisected to ``tol``
    where it stops being a strict maximum (the inter-cluster modes, (C.3): the intra-cluster ones of
    (C.2) are stable near -2/3, and clusters of fractions carry none)."""
    if not 0 < delta < 1 / 6:
        raise ValueError(f"delta = {delta} is outside (0, 1/6)")
    phi = np.array([0.0, 2 * math.pi / 3, 4 * math.pi / 3])
    low = None
    for beta in np.linspace(START, -2 / 3, steps):
        found = _stable_solution(phi, delta, float(beta))
        if found is None:
            break
        low, phi = float(beta), found
    if low is None:
        raise ValueError(f"delta = {delta}: the branch is not stable at beta = {START}")
    high = float(beta)
    while high - low > tol:
        mid = (low + high) / 2
        found = _stable_solution(phi, delta, mid)
        if found is None:
            high = mid
        else:
            low, phi = mid, found
    return low


def table(ns: tuple[int, ...] = (10, 76, 77, 151, 152, 301, 302)) -> str:
    """n, delta, beta_c(delta) and the leading order, as text."""
    rows = ["n | delta | beta_c(delta) | leading order | (beta_c + 2/3) sqrt(n)"]
    for n in ns:
        delta = imbalance(n)
        if delta:
            beta = threshold(delta)
            rows.append(f"{n} | {delta:.6f} | {beta:.6f} | {leading_order(delta):.6f} | "
                        f"{(beta + 2 / 3) * math.sqrt(n):.4f}")
    return "\n".join(rows)
