"""Data of paper 002 (Definition 2.1): the exact, equally weighted population of sequences.

Signals: group signals c_1..c_K and classification signals v_1..v_K, orthonormal in R^d
(d >= 2K; d = 2K with c_k = e_k, v_k = e_{K+k} is exact, notes 002 s2). A sample is
(c_k, y v_k, eps_1 v_{k'_1}, ..., eps_{L-2} v_{k'_{L-2}}) with label y, k' != k, eps = +-1; the model
has no positional encoding, so one token order stands for every order and the population is the
2K (2(K-1))^{L-2} sequences of that order, each of weight 1/N (notes 002 s1). A distractor with
eps = -y opposes the label: samples with none are consistent (easy), the others conflicting
(hard); for L = 3 these are the paper's X_{k,s,s} and X_{k,s,-s}.
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

    @property
    def hard(self) -> np.ndarray:
        """Conflicting samples: at least one distractor opposes the label."""
        return self.opposing > 0

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
