"""Two engines of one gradient-descent step, batched over systems (seeds and grid values).

A step minimises sum_b sum_n weight[b, n] l(y_n f_b(X_n)): each system's objective depends on its
own parameters only, so one backward pass gives every system's exact gradient. ``lr_w`` and
``lr_att`` (B,) are the step sizes of w and of the attention weights (0 freezes them: the stages
of Algorithm 1).

- :class:`Direct`: the parameters w_+-, W_K+-, W_Q+- (m x d) themselves, autograd through S = W_K^T W_Q.
- :class:`Gram`: w, S = W_K^T W_Q, K~ = W_K^T W_K, Q~ = W_Q^T W_Q (docs/papers/002.md §3). With G = dL/dS,
  one GD step on (W_K, W_Q) is exactly
  S' = S - eta (K~ G + G Q~) + eta^2 G S^T G,
  K~' = K~ - eta (G S^T + S G^T) + eta^2 G Q~ G^T,
  Q~' = Q~ - eta (G^T S + S^T G) + eta^2 G^T K~ G,
  so m enters only through the initial Grams, and S = 0, K~ = Q~ = omega^2 I is the
  infinite-width model of Definition 5.1 (Lemma C.1).
"""

from __future__ import annotations

import torch
from torch import Tensor

from attnsweep.experiments.mixture_training import model


def objective(w: Tensor, S: Tensor, X: model.Sequences, y: Tensor, b: Tensor, weight: Tensor) -> Tensor:
    """sum_b sum_n weight[b, n] l(y_n f_b(X_n)): the sum over systems of each one's weighted loss."""
    return (weight * model.loss(model.output(w, S, X, b), y)).sum()


class Direct:
    """Parameters w (B, 2, d), W_K, W_Q (B, 2, m, d); autograd through every one of them."""

    def __init__(self, w: Tensor, W_K: Tensor, W_Q: Tensor):
        self.w, self.W_K, self.W_Q = w, W_K, W_Q

    @property
    def scores(self) -> Tensor:
        """S = W_K^T W_Q (B, 2, d, d)."""
        return self.W_K.transpose(-1, -2) @ self.W_Q

    def step(self, X: model.Sequences, y: Tensor, b: Tensor, weight: Tensor, lr_w: Tensor, lr_att: Tensor) -> None:
        params = [p.detach().requires_grad_(True) for p in (self.w, self.W_K, self.W_Q)]
        w, W_K, W_Q = params
        grads = torch.autograd.grad(objective(w, W_K.transpose(-1, -2) @ W_Q, X, y, b, weight), params)
        rate_w, rate_att = lr_w[:, None, None], lr_att[:, None, None, None]
        self.w = self.w - rate_w * grads[0]
        self.W_K = self.W_K - rate_att * grads[1]
        self.W_Q = self.W_Q - rate_att * grads[2]


class Gram:
    """w (B, 2, d) and the Grams S, K~, Q~ (B, 2, d, d); exact GD on W_K, W_Q at any width."""

    def __init__(self, w: Tensor, S: Tensor, K: Tensor, Q: Tensor):
        self.w, self.S, self.K, self.Q = w, S, K, Q

    @classmethod
    def from_weights(cls, w: Tensor, W_K: Tensor, W_Q: Tensor) -> Gram:
        """The Grams of given attention weights (B, 2, m, d)."""
        K_t, Q_t = W_K.transpose(-1, -2), W_Q.transpose(-1, -2)
        return cls(w, K_t @ W_Q, K_t @ W_K, Q_t @ W_Q)

    @property
    def scores(self) -> Tensor:
        return self.S

    def step(self, X: model.Sequences, y: Tensor, b: Tensor, weight: Tensor, lr_w: Tensor, lr_att: Tensor) -> None:
        w, S = (p.detach().requires_grad_(True) for p in (self.w, self.S))
        grad_w, G = torch.autograd.grad(objective(w, S, X, y, b, weight), (w, S))
        eta = lr_att[:, None, None, None]
        S, K, Q = self.S, self.K, self.Q
        G_t = G.transpose(-1, -2)
        self.w = self.w - lr_w[:, None, None] * grad_w
        self.S = S - eta * (K @ G + G @ Q) + eta**2 * (G @ S.transpose(-1, -2) @ G)
        self.K = K - eta * (G @ S.transpose(-1, -2) + S @ G_t) + eta**2 * (G @ Q @ G_t)
        self.Q = Q - eta * (G_t @ S + S.transpose(-1, -2) @ G) + eta**2 * (G_t @ K @ G)
