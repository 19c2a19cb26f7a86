"""The two-headed ReLU transformer of paper 002 (Section 2.2, Eq. 1) and its loss.

Every function broadcasts over leading system dimensions (seeds, grid values): ``w`` (..., 2, d)
and ``S`` (..., 2, d, d) hold the + head (index 0) and the - head (index 1), ``X`` (N, L, d) the
sequences, shared by every system. S = W_K^T W_Q: the logit of query token x_l on key token x_h
is x_h^T S x_l, and the score mu^T S nu has mu the key, nu the query (notes 002 s2).
"""

from __future__ import annotations

import torch
from torch import Tensor

PAIR_BUDGET = 1 << 22  # entries of the pair tensor up to which the logits are one matrix product


def logits(S: Tensor, X: Tensor) -> Tensor:
    """x_h^T S x_l (..., N, L, L), query l, key h.

    Small data (N L^2 d^2 <= PAIR_BUDGET, e.g. 2 million for K = 8, L = 3): one matrix product of
    the flattened S with the flattened pairs x_h x_l^T, built from X on each call (X carries no
    gradient); 1.4x faster than the two einsums below at K = 8 with 64 systems. Otherwise (the
    digit images) the einsums, which never hold the pairs.
    """
    N, L, d = X.shape
    if N * L * L * d * d <= PAIR_BUDGET:
        pairs = torch.einsum("nhi,nlj->nlhij", X, X).reshape(N * L * L, d * d)
        return (S.flatten(-2) @ pairs.T).unflatten(-1, (N, L, L))
    queries = torch.einsum("...ij,nlj->...nli", S, X)  # S x_l
    return torch.einsum("nhi,...nli->...nlh", X, queries)


def attention(S: Tensor, X: Tensor) -> Tensor:
    """p (..., N, L, L): row l is softmax_h(x_h^T S x_l), query l over keys h, from log-space logits."""
    return logits(S, X).log_softmax(-1).exp()


def attended(p: Tensor, X: Tensor) -> Tensor:
    """sum_l X p_l (..., N, d): every query's attention average of the tokens, summed over queries."""
    return torch.einsum("...nlh,nhi->...ni", p, X)


def heads(w: Tensor, S: Tensor, X: Tensor) -> Tensor:
    """H(X) = sum_l w^T X softmax(X^T S x_l) (Eq. 1), (..., 2, N): a sum over queries, not a mean."""
    return torch.einsum("...ni,...i->...n", attended(attention(S, X), X), w)


def output(w: Tensor, S: Tensor, X: Tensor, b: Tensor) -> Tensor:
    """f(X) = ReLU(H_+ + b) - ReLU(H_- + b) (Eq. 1), (..., N); ``b`` (...,) the fixed bias."""
    H = heads(w, S, X) + b[..., None, None]
    return torch.relu(H[..., 0, :]) - torch.relu(H[..., 1, :])


def loss(f: Tensor, y: Tensor) -> Tensor:
    """l(y f) = log(1 + e^{-y f}) per sample (Section 2.2), computed as softplus(-y f)."""
    return torch.nn.functional.softplus(-y * f)


def features(w: Tensor, S: Tensor, X: Tensor, b: Tensor) -> Tensor:
    """F(X) = [s_+ sum_l X p_l^+ ; -s_- sum_l X p_l^- ; b (s_+ - s_-)] (Eq. 2), (..., N, 2d + 1),
    with s_+- = 1[H_+- + b > 0]: the features of which f = [w_+; w_-; 1]^T F is linear."""
    pooled = attended(attention(S, X), X)  # (..., 2, N, d)
    bias = b[..., None, None]
    active = (torch.einsum("...ni,...i->...n", pooled, w) + bias > 0).to(pooled.dtype)  # (..., 2, N)
    plus, minus = active[..., 0, :], active[..., 1, :]
    return torch.cat([plus[..., None] * pooled[..., 0, :, :], -minus[..., None] * pooled[..., 1, :, :],
                      (bias[..., 0] * (plus - minus))[..., None]], -1)
