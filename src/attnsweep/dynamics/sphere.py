"""Self-attention dynamics on the sphere S^{d-1} (paper 001), batched over systems.

Row convention: ``x`` is (B, n, d) with token x_i in row i, ``qk`` is (B, d, d) holding
Q^T K, ``v`` is (B, d, d) holding V (None means the identity). ``causal`` (B,) bool marks the
systems under the causal mask of paper 003 (CSA, Section 2): token i attends to j <= i only,
itself included; None means full attention for every system, True causal for every system, and
an (n, n) bool tensor hides key j from query i where True in every system (a sliding window,
:func:`attnsweep.dynamics.heads.hidden_keys`; the diagonal stays visible).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor

from attnsweep.dynamics.ops import bmm, exp_

Field = Callable[..., Tensor]


def scores(x: Tensor, beta: Tensor, qk: Tensor | None) -> Tensor:
    """beta <Q x_i, K x_j> = beta x_i^T (Q^T K) x_j, shape (B, n, n) (Eq. 2.3)."""
    left = beta[:, None, None] * (x if qk is None else bmm(x, qk))  # scale n x d, not n x n
    return bmm(left, x.transpose(-1, -2))


#: Which systems of a batch attend causally: None (none), a (B,) bool tensor, or True (all); or
#: an (n, n) bool tensor of the keys hidden from each query in every system.
Causal = Tensor | bool | None


def future_mask(causal: Causal, n: int, device: torch.device) -> Tensor | None:
    """True where j > i in the systems marked ``causal``: (n, n) when all are, (B, n, n) when some;
    an (n, n) mask as given."""
    if causal is None or causal is False:
        return None
    if isinstance(causal, Tensor) and causal.ndim == 2:
        return causal
    future = torch.ones(n, n, dtype=torch.bool, device=device).triu(1)
    return future if causal is True else causal[:, None, None] & future


def masked(logits: Tensor, causal: Causal) -> Tensor:
    """Scores with j > i set to -inf in the systems marked ``causal`` (003 CSA: the mask keeps
    the diagonal), so that the softmax normalises over j <= i and e^{score} vanishes beyond."""
    mask = future_mask(causal, logits.shape[-1], logits.device)
    return logits if mask is None else logits.masked_fill(mask, -math.inf)


def attention(x: Tensor, beta: Tensor, qk: Tensor | None, normalisation: str, gram: Tensor | None = None,
              causal: Causal = None) -> Tensor:
    """Weights A_ij: softmax over j for SA (Eq. 2.4, max-subtracted), e^{score}/n for USA; zero
    for j > i in ``causal`` systems. ``gram``, the Gram matrix of ``x`` when already at hand,
    spares a product when Q^T K = I."""
    logits = beta[:, None, None] * gram if gram is not None and qk is None else scores(x, beta, qk)
    logits = masked(logits, causal)
    if normalisation == "sa":
        return torch.softmax(logits, dim=-1)
    if normalisation == "usa":  # in place: logits is this call's own tensor (n x n, not allocated twice)
        return logits.sub_(math.log(x.shape[-2])).exp_()
    raise ValueError(f"unknown normalisation {normalisation!r} (sa, usa)")


def kernel(x: Tensor, beta: Tensor, gram: Tensor | None = None, causal: Causal = None,
           shift: bool = True) -> Tensor:
    """e^{beta (<x_i, x_j> - 1)}, (B, n, n): the numerators of SA with Q = K = I (Eq. 2.4) for
    tokens on the sphere and beta >= 0, whose row maximum beta <x_i, x_i> = beta is taken out
    exactly as softmax's max-subtraction would (every entry <= 1, the diagonal 1, so a row sum
    is >= 1); without ``shift``, e^{beta <x_i, x_j>}, the same weights once divided by the row
    sums, for beta small enough that n e^beta is finite (:func:`needs_shift`). Zero for j > i in
    ``causal`` systems. The product with beta folded into the n x d factor (or the ``gram``
    given, scaled), then the exponential in place."""
    b = beta[:, None, None]
    e = bmm(b * x, x.transpose(-1, -2)) if gram is None else gram * b
    if shift:
        e -= b
    e = exp_(e)
    if causal is True:
        return e.tril_()
    mask = future_mask(causal, e.shape[-1], e.device)
    return e if mask is None else e.masked_fill_(mask, 0.0)


def needs_shift(beta: Tensor, n: int, dtype: torch.dtype) -> bool:
    """Whether e^{beta <x_i, x_j>} summed over a row could overflow ``dtype`` (n e^{beta_max}
    within a factor e of the largest float): then :func:`kernel` takes the shift."""
    return float(beta.max()) + math.log(n) + 1 >= math.log(torch.finfo(dtype).max)


def fused(beta: Tensor, qk: Tensor | None, normalisation: str) -> bool:
    """Whether :func:`weighted_sum` may use :func:`kernel`: SA, Q = K = I, every beta >= 0."""
    return normalisation == "sa" and qk is None and bool((beta >= 0).all())


def weighted_sum(x: Tensor, beta: Tensor, qk: Tensor | None, values: Tensor, normalisation: str,
                 gram: Tensor | None = None, causal: Causal = None,
                 plan: tuple[bool, bool] | None = None) -> Tensor:
    """sum_j A_ij values_j, (B, n, d): for SA with Q = K = I and beta >= 0 by :func:`kernel`,
    dividing the n x d product by the row sums instead of the n x n weights (no softmax
    tensor), else through :func:`attention`. ``plan``, (:func:`fused`, :func:`needs_shift`),
    decided once per batch by :func:`stepper` (each is a device synchronisation)."""
    use, shift = plan or (fused(beta, qk, normalisation), needs_shift(beta, x.shape[-2], x.dtype))
    if use:
        e = kernel(x, beta, gram, causal, shift)
        return bmm(e, values).div_(e.sum(-1, keepdim=True))
    return bmm(attention(x, beta, qk, normalisation, gram, causal), values)


def tangent(x: Tensor, w: Tensor) -> Tensor:
    """P^perp_x w = w - <x, w> x, row by row."""
    return w - (w * x).sum(-1, keepdim=True) * x


def field(x: Tensor, beta: Tensor, qk: Tensor | None, v: Tensor | None, normalisation: str,
          project: bool = True, gram: Tensor | None = None, causal: Causal = None,
          plan: tuple[bool, bool] | None = None) -> Tensor:
    """Velocity of Eq. 2.5 (003 CSA where ``causal``): P^perp_{x_i}(sum_j A_ij V x_j); without
    the projection if not ``project``. ``plan``: see :func:`weighted_sum`."""
    values = x if v is None else bmm(x, v.transpose(-1, -2))
    w = weighted_sum(x, beta, qk, values, normalisation, gram, causal, plan)
    return tangent(x, w) if project else w


def span_coordinates(x: Tensor) -> tuple[Tensor, Tensor]:
    """Tokens x (B, n, d), n < d, as coordinates r (B, n, n) in an orthonormal basis U (B, d, n)
    of a subspace holding them: x = r U^T, so <x_i, x_j> = <r_i, r_j> and |r_i| = |x_i|. With
    V = I and Q = K = I every step keeps each token in the span of the tokens (x_i' and every
    integrator stage are combinations of the x_j), so the flow of r in R^n is the flow of x:
    exact up to rounding, with d/n times fewer flops in the n x d products."""
    u, upper = torch.linalg.qr(x.transpose(-1, -2))  # x^T = U R: r = R^T
    return upper.transpose(-1, -2), u


def normalise(x: Tensor) -> Tensor:
    """Back onto the sphere: x_i / ||x_i||."""
    return x / torch.linalg.vector_norm(x, dim=-1, keepdim=True)


def euler(x: Tensor, f: Field, dt: float, gram: Tensor | None = None) -> Tensor:
    """x <- N(x + dt f(x)): explicit Euler, then renormalisation (the authors' scheme)."""
    return normalise(torch.add(x, f(x, gram), alpha=dt))


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
            normalisation: str, dt: float, causal: Causal = None) -> Callable[..., Tensor]:
    """One step ``(x, gram=None) -> x(t + dt)`` of ``integrator`` for the systems of a batch;
    ``gram``, the Gram matrix of ``x`` if already computed (for recording), is reused."""
    try:
        step, project = INTEGRATORS[integrator]
    except KeyError:
        raise ValueError(f"unknown integrator {integrator!r} ({', '.join(INTEGRATORS)})") from None

    plan: tuple[bool, bool] | None = None
    if isinstance(causal, Tensor) and causal.ndim == 1 and bool(causal.all()):
        causal = True  # every system causal: one lower triangle, no per-system mask

    def f(x: Tensor, gram: Tensor | None = None) -> Tensor:
        nonlocal plan
        plan = plan or (fused(beta, qk, normalisation), needs_shift(beta, x.shape[-2], x.dtype))
        return field(x, beta, qk, v, normalisation, project, gram, causal, plan)

    return lambda x, gram=None: step(x, f, dt, gram)
