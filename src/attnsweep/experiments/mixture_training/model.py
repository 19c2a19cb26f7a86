"""The two-headed ReLU transformer of paper 002 (Section 2.2, Eq. 1) and its loss.

Every function broadcasts over leading system dimensions (seeds, grid values): ``w`` (..., 2, d)
and ``S`` (..., 2, d, d) hold the + head (index 0) and the - head (index 1); the sequences are
:class:`Sequences`, shared by every system. S = W_K^T W_Q: the logit of query token x_l on key
token x_h is x_h^T S x_l, and the score mu^T S nu has mu the key, nu the query (docs/papers/002.md §2).

Inside, arrays over (query l, key h, sample n) are laid out (..., L, L, N), the sample innermost:
the softmax over the L keys and the sums over positions then run along contiguous rows of N, not
along rows of L = 3 (forward and backward 3x faster at K = 8 with 64 systems on one thread).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass(frozen=True)
class Sequences:
    """Sequences X (N, L, d) as their distinct tokens u_a (T, d) and the index a (L, N) with
    x_{n,l} = u_{a[l, n]}: the exact population has T = 3K distinct tokens (c_k, +-v_k) for its
    N L positions, so every logit is an entry of the T x T matrix U S U^T."""

    tokens: Tensor
    index: Tensor

    @classmethod
    def of(cls, X: Tensor) -> Sequences:
        """The factorisation of X (N, L, d); exact (rows are compared by value, so -0.0 = 0.0)."""
        N, L, d = X.shape
        tokens, index = torch.unique(X.transpose(0, 1).reshape(L * N, d), dim=0, return_inverse=True)
        return cls(tokens, index.reshape(L, N))

    @property
    def positions(self) -> Tensor:
        """The tokens by position, (L, N, d)."""
        return self.tokens[self.index]

    @property
    def X(self) -> Tensor:
        """The sequences, (N, L, d)."""
        return self.positions.transpose(0, 1)


def logits(S: Tensor, seq: Sequences) -> Tensor:
    """x_h^T S x_l (..., L, L, N) at [l, h, n], query l, key h.

    Few distinct tokens (T^2 <= L^2 N: the population): entries of U S U^T gathered by token
    index (``index_select``: its backward is 2.5x faster than that of advanced indexing). Otherwise
    (the digit images): S x_l for every position, then one product per sample.
    """
    U, a = seq.tokens, seq.index
    L, N = a.shape
    T = U.shape[0]
    if T**2 <= L * L * N:
        M = U @ S @ U.T  # (..., T, T): [a, b] = u_a^T S u_b
        entries = (a[None, :, :] * T + a[:, None, :]).flatten()  # [l, h, n] -> M[a[h, n], a[l, n]], flat
        return M.flatten(-2).index_select(-1, entries).unflatten(-1, (L, L, N))
    X = seq.positions  # (L, N, d)
    queries = (X.reshape(L * N, -1) @ S.transpose(-1, -2)).unflatten(-2, (L, N))  # (..., L, N, d): S x_l
    return torch.einsum("hni,...lni->...lhn", X, queries)


def weights(S: Tensor, seq: Sequences) -> Tensor:
    """p (..., L, L, N): p[l, :, n] = softmax_h(x_h^T S x_l), from log-space logits."""
    return logits(S, seq).log_softmax(-2).exp()


def attention(S: Tensor, seq: Sequences) -> Tensor:
    """p (..., N, L, L): row l is query l's attention over the keys h (Fig. 2)."""
    return weights(S, seq).movedim(-1, -3)


def received(S: Tensor, seq: Sequences) -> Tensor:
    """sum_l p_lh (..., L, N): the attention every key position receives, summed over the queries."""
    return weights(S, seq).sum(-3)


def heads(w: Tensor, S: Tensor, seq: Sequences) -> Tensor:
    """H(X) = sum_l w^T X softmax(X^T S x_l) = sum_h (sum_l p_lh) w^T x_h (Eq. 1), (..., 2, N):
    a sum over queries, not a mean."""
    values = (w @ seq.tokens.T).index_select(-1, seq.index.flatten()).unflatten(-1, seq.index.shape)  # w^T x_h
    return (received(S, seq) * values).sum(-2)


def output(w: Tensor, S: Tensor, seq: Sequences, b: Tensor) -> Tensor:
    """f(X) = ReLU(H_+ + b) - ReLU(H_- + b) (Eq. 1), (..., N); ``b`` (...,) the fixed bias."""
    H = heads(w, S, seq) + b[..., None, None]
    return torch.relu(H[..., 0, :]) - torch.relu(H[..., 1, :])


def loss(f: Tensor, y: Tensor) -> Tensor:
    """l(y f) = log(1 + e^{-y f}) per sample (Section 2.2), computed as softplus(-y f)."""
    return torch.nn.functional.softplus(-y * f)


def features(w: Tensor, S: Tensor, seq: Sequences, b: Tensor) -> Tensor:
    """F(X) = [s_+ sum_l X p_l^+ ; -s_- sum_l X p_l^- ; b (s_+ - s_-)] (Eq. 2), (..., N, 2d + 1),
    with s_+- = 1[H_+- + b > 0]: the features of which f = [w_+; w_-; 1]^T F is linear."""
    pooled = torch.einsum("...hn,hni->...ni", received(S, seq), seq.positions)  # (..., 2, N, d): sum_l X p_l
    bias = b[..., None, None]
    active = (torch.einsum("...ni,...i->...n", pooled, w) + bias > 0).to(pooled.dtype)  # (..., 2, N)
    plus, minus = active[..., 0, :], active[..., 1, :]
    return torch.cat([plus[..., None] * pooled[..., 0, :, :], -minus[..., None] * pooled[..., 1, :, :],
                      (bias[..., 0] * (plus - minus))[..., None]], -1)
