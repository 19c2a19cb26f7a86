"""Self-attention dynamics on the sphere S^{d-1} (paper 001), batched over systems.

Row convention: ``x`` is (B, n, d) with token x_i in row i, ``qk`` is (B, d, d) holding
Q^T K, ``v`` is (B, d, d) holding V (None means the identity). ``causal`` (B,) bool marks the
systems under the causal mask of paper 003 (CSA, Section 2): token i attends to j <= i only,
itself included; None means full attention for every system.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor

Field = Callable[..., Tensor]


def scores(x: Tensor, beta: Tensor, qk: Tensor | None) -> Tensor:
    """beta <Q x_i, K x_j> = beta x_i^T (Q^T K) x_j, shape (B, n, n) (Eq. 2.3)."""
    left = beta[:, None, None] * (x if qk is None else x @ qk)  # scale n x d, not n x n
    return left @ x.transpose(-1, -2)


def masked(logits: Tensor, causal: Tensor | None) -> Tensor:
    """Scores with j > i set to -inf in the systems marked ``causal`` (003 CSA: the mask keeps
    the diagonal), so that the softmax normalises over j <= i and e^{score} vanishes beyond."""
    if causal is None:
        return logits
    n = logits.shape[-1]
    future = torch.ones(n, n, dtype=torch.bool, device=logits.device).triu(1)
    return logits.masked_fill(causal[:, None, None] & future, -math.inf)


def attention(x: Tensor, beta: Tensor, qk: Tensor | None, normalisation: str, gram: Tensor | None = None,
              causal: Tensor | None = None) -> Tensor:
    """Weights A_ij: softmax over j for SA (Eq. 2.4, max-subtracted), e^{score}/n for USA; zero
    for j > i in ``causal`` systems. ``gram``, the Gram matrix of ``x`` when already at hand,
    spares a product when Q^T K = I."""
    logits = beta[:, None, None] * gram if gram is not None and qk is None else scores(x, beta, qk)
    logits = masked(logits, causal)
    if normalisation == "sa":
        return torch.softmax(logits, dim=-1)
    if normalisation == "usa":
        return torch.exp(logits - math.log(x.shape[-2]))
    raise ValueError(f"unknown normalisation {normalisation!r} (sa, usa)")


def tangent(x: Tensor, w: Tensor) -> Tensor:
    """P^perp_x w = w - <x, w> x, row by row."""
    return w - (w * x).sum(-1, keepdim=True) * x


def field(x: Tensor, beta: Tensor, qk: Tensor | None, v: Tensor | None, normalisation: str,
          project: bool = True, gram: Tensor | None = None, causal: Tensor | None = None) -> Tensor:
    """Velocity of Eq. 2.5 (003 CSA where ``causal``): P^perp_{x_i}(sum_j A_ij V x_j); without
    the projection if not ``project``."""
    values = x if v is None else x @ v.transpose(-1, -2)
    w = attention(x, beta, qk, normalisation, gram, causal) @ values
    return tangent(x, w) if project else w


def normalise(x: Tensor) -> Tensor:
    """Back onto the sphere: x_i / ||x_i||."""
    return x / torch.linalg.vector_norm(x, dim=-1, keepdim=True)


def euler(x: Tensor, f: Field, dt: float, gram: Tensor | None = None) -> Tensor:
    """x <- N(x + dt f(x)): explicit Euler, then renormalisation (the authors' scheme)."""
    return normalise(x + dt * f(x, gram))


def rk4(x: Tensor, f: Field, dt: float, gram: Tensor | None = None) -> Tensor:
    """Classical Runge-Kutta on the (projected) field, then renormalisation: O(dt^4) per unit time."""
    k1 = f(x, gram)
    k2 = f(x + dt / 2 * k1)
    k3 = f(x + dt / 2 * k2)
    k4 = f(x + dt * k3)
    return normalise(x + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4))


INTEGRATORS = {
    # name: (step, project the field)
    "euler": (euler, False),  # the authors' phase-diagrams.py: no P^perp before renormalising
    "euler_projected": (euler, True),  # Euler on Eq. 2.5 itself; differs from the above by O(dt^2) a step
    "rk4": (rk4, True),
}


def stepper(integrator: str, beta: Tensor, qk: Tensor | None, v: Tensor | None,
            normalisation: str, dt: float, causal: Tensor | None = None) -> Callable[..., Tensor]:
    """One step ``(x, gram=None) -> x(t + dt)`` of ``integrator`` for the systems of a batch;
    ``gram``, the Gram matrix of ``x`` if already computed (for recording), is reused."""
    try:
        step, project = INTEGRATORS[integrator]
    except KeyError:
        raise ValueError(f"unknown integrator {integrator!r} ({', '.join(INTEGRATORS)})") from None

    def f(x: Tensor, gram: Tensor | None = None) -> Tensor:
        return field(x, beta, qk, v, normalisation, project, gram, causal)

    return lambda x, gram=None: step(x, f, dt, gram)
