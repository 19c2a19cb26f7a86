"""Multi-head self-attention of tokens on the sphere (paper 001, Section 2.3.1, Eq. 2.7), heads batched.

The attention vector of token i is

    A_i = c sum_{h=1}^H sum_j W^h_ij V_h x_j,

W^h the SA or USA weights of head h (scores beta <Q_h x_i, K_h x_j>, Eq. 2.3 per head), c = 1 as
in Eq. 2.7 (``sum``) or 1/H (``mean``, as the public simuformer code does). The heads fold into
the batch: one product over B H systems, no loop over heads. Row convention of
:mod:`attnsweep.dynamics.sphere`: ``x`` (B, n, d); ``qk`` (B, H, d, d) holding Q_h^T K_h and ``v``
(B, H, d, d) holding V_h, None meaning the identity in every head. Token j contributes V_h x_j
(Eq. 2.7); a caller following another convention passes the matrix that gives it (simuformer's
V^T x_j: :mod:`attnsweep.experiments.normalized_attention.matrices`).
"""

from __future__ import annotations

import torch
from torch import Tensor

from attnsweep.dynamics import sphere
from attnsweep.dynamics.ops import bmm

REDUCTIONS = ("sum", "mean")
MASKS = ("full", "causal")


def hidden_keys(n: int, mask: str, window: int | None, device: torch.device) -> Tensor | bool | None:
    """The keys hidden from each query, as :mod:`attnsweep.dynamics.sphere` takes them: None
    (``full``), True (``causal``: j > i), or with a ``window`` w an (n, n) bool tensor, True where
    |i - j| >= w (full) or where j > i or i - j >= w (causal, a sliding window). Every query sees
    itself; a window of width n hides nothing (the tensor is then all False)."""
    if mask not in MASKS:
        raise ValueError(f"unknown mask {mask!r} ({', '.join(MASKS)})")
    if window is None:
        return True if mask == "causal" else None
    i = torch.arange(n, device=device)
    lag = i[:, None] - i[None, :]  # i - j
    far = lag.abs() >= window
    return far | (lag < 0) if mask == "causal" else far


def attention_vector(x: Tensor, beta: Tensor, qk: Tensor | None, v: Tensor | None, heads: int, weights: str,
                     reduction: str, hidden: Tensor | bool | None = None, gram: Tensor | None = None,
                     plan: tuple[bool, bool] | None = None) -> Tensor:
    """A_i of Eq. 2.7, (B, n, d), for ``heads`` heads (``qk``, ``v``: (B, H, d, d) or None).

    ``weights``: ``sa`` or ``usa`` (:func:`attnsweep.dynamics.sphere.attention`); ``reduction``:
    ``sum`` or ``mean`` over heads; ``hidden``: :func:`hidden_keys`. With Q_h = K_h = V_h = I
    every head is the same, so one is computed (times H for ``sum``); with one head the numbers
    are those of :func:`attnsweep.dynamics.sphere.field` before its projection, bit for bit.
    ``gram`` (the Gram matrix of ``x``, spares a product when every Q_h^T K_h = I) and ``plan``:
    see :func:`attnsweep.dynamics.sphere.weighted_sum`.
    """
    if reduction not in REDUCTIONS:
        raise ValueError(f"unknown reduction {reduction!r} ({', '.join(REDUCTIONS)})")
    if qk is None and v is None:
        a = sphere.weighted_sum(x, beta, None, x, weights, gram, hidden, plan)
        return a * heads if reduction == "sum" and heads > 1 else a
    b, n, d = x.shape
    rows = x.unsqueeze(1).expand(b, heads, n, d).reshape(b * heads, n, d)
    per_head = qk.reshape(b * heads, d, d) if qk is not None else None
    if v is None and heads > 1:  # V_h = I: the heads' weights combined first, then one product with x
        w = sphere.attention(rows, beta.repeat_interleave(heads), per_head, weights, causal=hidden)
        w = w.view(b, heads, n, n)
        return bmm(w.sum(1) if reduction == "sum" else w.mean(1), x)
    values = rows if v is None else bmm(rows, v.reshape(b * heads, d, d).transpose(-1, -2))
    a = sphere.weighted_sum(rows, beta.repeat_interleave(heads), per_head, values, weights,
                            gram.repeat_interleave(heads, 0) if gram is not None and per_head is None else None,
                            hidden, plan).view(b, heads, n, d)
    return a.sum(1) if reduction == "sum" else a.mean(1)
