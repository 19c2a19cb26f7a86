"""Data of paper 002 (Definition 2.1): the exact, equally weighted population of sequences.

Signals: group signals c_1..c_K and classification signals v_1..v_K, orthonormal in R^d
(d >= 2K; d = 2K with c_k = e_k, v_k = e_{K+k} is exact, docs/papers/002.md §2). A sample is
(c_k, y v_k, eps_1 v_{k'_1}, ..., eps_{L-2} v_{k'_{L-2}}) with label y, k' != k, eps = +-1; the model
has no positional encoding, so one token order stands for every order and the population is the
2K (2(K-1))^{L-2} sequences of that order, each of weight 1/N (docs/papers/002.md §1). A distractor with
eps = -y opposes the label: samples with none are consistent (easy), the others conflicting
(hard); for L = 3 these are the paper's X_{k,s,s} and X_{k,s,-s}.

Both sources of training data are :class:`Samples` in token space: the exact population
(:func:`exact`), and i.i.d. draws with real images as the classification signals
(:func:`of_images`, App. A.5).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np


def signals(K: int, d: int | None = None, rotation: np.ndarray | None = None) -> np.ndarray:
    """Rows c_1..c_K, v_1..v_K (2K, d): the first 2K canonical vectors of R^d (d = 2K by
    default), turned by the orthogonal ``rotation`` (d, d) if given."""
    d = 2 * K if d is None else d
    if d < 2 * K:
        raise ValueError(f"d = {d} < 2K = {2 * K}: the 2K signals must be orthonormal")
    basis = np.eye(2 * K, d)
    return basis if rotation is None else basis @ rotation.T


@dataclass(frozen=True)
class Population:
    """The population of Definition 2.1 in signal coordinates.

    ``tokens`` (N, L, 2K): each token's coefficients on (c_1..c_K, v_1..v_K); ``label`` (N,) y;
    ``group`` (N,) k - 1; ``opposing`` (N,) the number of distractors with eps = -y.
    """

    tokens: np.ndarray
    label: np.ndarray
    group: np.ndarray
    opposing: np.ndarray

    def sequences(self, basis: np.ndarray) -> np.ndarray:
        """The sequences X (N, L, d) for signal rows ``basis`` (2K, d) (see :func:`signals`)."""
        return self.tokens @ basis


def population(K: int, L: int) -> Population:
    """Every sequence of Definition 2.1 once: y, k, then (k', eps) per distractor (N = 2K (2(K-1))^{L-2})."""
    if K < 2 or L < 3:
        raise ValueError(f"Definition 2.1 needs K >= 2 and L >= 3 (got K = {K}, L = {L})")
    rows, labels, groups, opposing = [], [], [], []
    for y, k in itertools.product((1, -1), range(K)):
        others = [(j, e) for j in range(K) if j != k for e in (1, -1)]
        for distractors in itertools.product(others, repeat=L - 2):
            tokens = np.zeros((L, 2 * K))
            tokens[0, k] = 1.0
            tokens[1, K + k] = y
            for pos, (j, e) in enumerate(distractors, start=2):
                tokens[pos, K + j] = e
            rows.append(tokens)
            labels.append(y)
            groups.append(k)
            opposing.append(sum(e == -y for _, e in distractors))
    return Population(np.stack(rows), np.array(labels, float), np.array(groups), np.array(opposing))


def sample_types(pop: Population) -> np.ndarray:
    """Indices of the 2^{L-1} samples of group 1 whose distractors all come from group 2, one per
    (y, eps pattern), y = +1 first: the sample types whose attention maps Fig. 2 shows."""
    K = pop.tokens.shape[-1] // 2
    from_group_2 = (pop.tokens[:, 2:, K + 1] != 0).all(-1)
    return np.flatnonzero((pop.group == 0) & from_group_2)


@dataclass(frozen=True)
class Samples:
    """A training set in token space, equally weighted: what the engines train on and observe.

    ``X`` (N, L, d) the sequences; ``label`` (N,) y; ``opposing`` (N,) the number of distractors
    with eps = -y; ``basis`` (2K, d) the rows c_1..c_K, v_1..v_K on which the alignments w^T mu
    and the scores mu^T S nu are read; ``types`` (2^{L-1}, L, d) the sequences of the sample types
    of Fig. 2 (:func:`sample_types`) on that basis.
    """

    X: np.ndarray
    label: np.ndarray
    opposing: np.ndarray
    basis: np.ndarray
    types: np.ndarray

    @property
    def hard(self) -> np.ndarray:
        """Conflicting samples: at least one distractor opposes the label."""
        return self.opposing > 0


def exact(K: int, L: int) -> Samples:
    """The population of Definition 2.1 with d = 2K, c_k = e_k, v_k = e_{K+k} (exact, docs/papers/002.md §2)."""
    pop, basis = population(K, L), signals(K)
    X = pop.sequences(basis)
    return Samples(X, pop.label, pop.opposing, basis, X[sample_types(pop)])


def of_images(images: list[np.ndarray], L: int, samples: int, gen: np.random.Generator) -> Samples:
    """``samples`` i.i.d. draws of Definition 2.1 with real images as classification signals (App. A.5).

    ``images[k]`` (n_k, d): unit-norm images of class k, K = len(images). A draw is y, k uniform;
    the token y x with x a uniform image of class k; L - 2 distractors eps x' with x' a uniform
    image of a uniform other class and eps = +-1; and c_k, K random unit vectors of R^d drawn
    once (the group signals). ``basis``: c_k and the unit class means, on which the figures read
    alignments and scores and build the sample types.
    """
    K, d = len(images), images[0].shape[1]
    c = gen.standard_normal((K, d))
    c /= np.linalg.norm(c, axis=1, keepdims=True)
    pool = np.concatenate(images)
    sizes = np.array([len(x) for x in images])
    start = np.r_[0, np.cumsum(sizes)[:-1]]

    def draw(group: np.ndarray) -> np.ndarray:
        """A uniform index into the pool, within each entry's image class ``group``."""
        return start[group] + (gen.random(group.shape) * sizes[group]).astype(int)

    y = gen.choice([1.0, -1.0], samples)
    k = gen.integers(K, size=samples)
    others = (k[:, None] + 1 + gen.integers(K - 1, size=(samples, L - 2))) % K
    eps = gen.choice([1.0, -1.0], (samples, L - 2))
    X = np.concatenate([c[k][:, None], (y[:, None] * pool[draw(k)])[:, None], eps[..., None] * pool[draw(others)]], 1)
    means = np.stack([x.mean(0) for x in images])
    basis = np.concatenate([c, means / np.linalg.norm(means, axis=1, keepdims=True)])
    pop = population(K, L)
    return Samples(X, y, (eps == -y[:, None]).sum(1), basis, pop.sequences(basis)[sample_types(pop)])
