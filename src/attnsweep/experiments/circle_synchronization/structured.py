"""The structured search: per n, the largest beta at which some cluster configuration is a spurious
attractor, family by family (numpy, float64; the reduction's theory overlay).

A family is a circular sequence of cluster masses up to rotation and reflection (a bracelet:
:func:`.clusters.bracelet`). Searched: every family of k = 2 ... k_max clusters whose masses lie
within ``spread`` of n / k, and the equal-mass families of every k dividing n (k = n is the splay
state; on the complete graph a q-twisted state is the splay or an equal-mass family relabelled).
Per family, the critical points of (C.1) are sought at every beta of a grid by one batched Newton
from several starting guesses; the largest grid beta at which a solution of the family is stable,
and the grid's next beta, bracket the family's threshold, which bisection, continuing from the last
stable solution, locates to ``tol``: a sign change of the top eigenvalue, or a fold (the branch
ends: Newton finds no solution of the family past it).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from attnsweep.experiments.circle_synchronization import clusters

#: Random starting guesses per family and beta, beside the two deterministic ones.
RANDOM_GUESSES = 4


@dataclass(frozen=True)
class Threshold:
    """A family's threshold: stable at ``beta_low``, not at ``beta_high`` (beta_high - beta_low <= tol),
    how stability ends there (``"sign"``: an eigenvalue crosses 0; ``"fold"``: the branch ends;
    ``"beyond"``: still stable at the grid's last beta, ``beta_high`` infinite), and the stable
    configuration at ``beta_low``."""

    masses: tuple[int, ...]
    beta_low: float
    beta_high: float
    end: str
    configuration: clusters.Configuration


def scan(grid: dict[str, float]) -> np.ndarray:
    """The betas of the search's grid (the option ``scan``), start to stop by step, both ends included."""
    count = int(np.floor((grid["stop"] - grid["start"]) / grid["step"] + 1e-9)) + 1
    return grid["start"] + grid["step"] * np.arange(count)


def compositions(n: int, k: int, low: int, high: int) -> Iterator[tuple[int, ...]]:
    """Ordered k-tuples of integers in [low, high] summing to n."""
    if k == 1:
        if low <= n <= high:
            yield (n,)
        return
    for first in range(max(low, n - (k - 1) * high), min(high, n - (k - 1) * low) + 1):
        for rest in compositions(n - first, k - 1, low, high):
            yield (first, *rest)


def families(n: int, k_max: int, spread: int) -> list[tuple[int, ...]]:
    """The bracelets searched at n (see the module docstring), sorted by k then masses."""
    found = set()
    for k in range(2, min(k_max, n) + 1):
        low, high = max(1, int(np.ceil(n / k - spread))), int(np.floor(n / k + spread))
        found.update(clusters.bracelet(c) for c in compositions(n, k, low, high))
    found.update((n // k,) * k for k in range(2, n + 1) if n % k == 0)
    return sorted(found, key=lambda m: (len(m), m))


def _guesses(masses: tuple[int, ...], rng: np.random.Generator) -> list[np.ndarray]:
    """Equal spacing, spacing by mass (each cluster at the middle of its particles' share of an
    equally spaced circle), and random angles kept in the family's circular order."""
    k = len(masses)
    m = np.asarray(masses, float)
    equal = 2 * np.pi * np.arange(k) / k
    share = 2 * np.pi * (np.cumsum(m) - m / 2) / m.sum()
    randoms = [np.sort(rng.uniform(0, 2 * np.pi, k)) for _ in range(RANDOM_GUESSES)]
    return [equal, share - share[0], *(r - r[0] for r in randoms)]


def _solve(masses: tuple[int, ...], beta: np.ndarray, starts: np.ndarray) -> list[list[np.ndarray]]:
    """Per beta (B,), the distinct solutions of the family found from each of ``starts`` (G, k): one
    batched Newton over every (beta, start)."""
    m = np.asarray(masses, float)
    target = clusters.bracelet(masses)
    g = len(starts)
    phi, ok = clusters.newton(np.tile(starts, (len(beta), 1)), m, np.repeat(beta, g))
    found: list[list[np.ndarray]] = [[] for _ in beta]
    for row in np.nonzero(ok)[0]:
        order = clusters.circular_masses(phi[row], masses)
        if order is None or clusters.bracelet(order) != target:
            continue
        here = found[row // g]
        if not any(_same(phi[row], other) for other in here):
            here.append(phi[row])
    return found


def critical_points(masses: tuple[int, ...], beta: float) -> list[np.ndarray]:
    """The distinct critical configurations of the family at beta that the search's guesses reach."""
    return _solve(masses, np.array([beta]), np.stack(_guesses(masses, _rng(sum(masses), masses))))[0]


def _same(a: np.ndarray, b: np.ndarray, tol: float = 1e-7) -> bool:
    """Equal configurations up to rotation (angles matched cluster by cluster)."""
    d = np.angle(np.exp(1j * ((a - a[0]) - (b - b[0]))))
    return bool(np.abs(d).max() < tol)


def _stable(phi: np.ndarray, masses: tuple[int, ...], beta: float) -> bool:
    return clusters.largest_eigenvalue(phi, np.asarray(masses, float), beta) < 0


def _rng(n: int, masses: tuple[int, ...]) -> np.random.Generator:
    key = hashlib.sha256(f"circle_synchronization|{n}|{masses}".encode()).digest()[:8]
    return np.random.default_rng(int.from_bytes(key, "little"))


def threshold(masses: tuple[int, ...], betas: np.ndarray, tol: float = 1e-9) -> Threshold | None:
    """The family's threshold on the grid ``betas`` (ascending), refined by bisection to ``tol``;
    None where no solution of the family is stable at any grid beta."""
    starts = np.stack(_guesses(masses, _rng(sum(masses), masses)))
    solutions = _solve(masses, np.asarray(betas, float), starts)
    stable = [[phi for phi in found if _stable(phi, masses, float(b))] for b, found in zip(betas, solutions)]
    held = [i for i, found in enumerate(stable) if found]
    if not held:
        return None
    i = held[-1]
    phi = stable[i][0]
    if i == len(betas) - 1:  # stable to the grid's end: the threshold lies beyond it
        return Threshold(masses, float(betas[i]), np.inf, "beyond", clusters.Configuration(masses, phi))
    low, high, end = float(betas[i]), float(betas[i + 1]), "fold"
    while high - low > tol:  # continuation from the last stable solution
        mid = (low + high) / 2
        found = _solve(masses, np.array([mid]), phi[None])[0]
        if found and _stable(found[0], masses, mid):
            low, phi = mid, found[0]
        else:
            high, end = mid, "sign" if found else "fold"
    return Threshold(masses, low, high, end, clusters.Configuration(masses, phi))
