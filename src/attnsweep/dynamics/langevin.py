"""Noisy attention dynamics on the sphere S^{d-1}: projected Euler-Maruyama, batched over systems.

The SDE (Stratonovich), for the velocity field v_i of :func:`attnsweep.dynamics.sphere.field`:

    dx_i = v_i(x) dt + sigma P_{x_i} o dW_i,        P_x = I - x x^T,

with W_1..W_n independent Brownian motions in R^d (independent noise), or one W for every token
of a system (common noise). In Ito form the noise adds the drift -(d - 1) sigma^2 / 2 x_i dt.

The step: x <- N(x + dt v(x) + sigma sqrt(dt) P_x xi), xi ~ N(0, I_d) per token (per system for
common noise), N the projection onto the sphere. The renormalisation takes off
(d - 1) sigma^2 dt / 2 x_i in expectation, the Ito correction, so the scheme is weak order 1 for
the Stratonovich equation. With sigma = 0 it is :func:`~attnsweep.dynamics.sphere.euler` on the
projected field, bit for bit.

Increments come from one CPU generator per seed, drawn in float64 in blocks of :data:`~attnsweep.dynamics.NOISE_BLOCK`
steps and shared by every system of that seed (common random numbers across beta, K and the
start): a seed's stream does not depend on how systems are cut into chunks or jobs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
from torch import Tensor

from attnsweep.dynamics import NOISE_BLOCK as BLOCK
from attnsweep.dynamics import sphere


class Increments:
    """Standard normal increments xi_k, (B, m, d) at step k, m = n (independent) or 1 (common),
    for systems whose seeds are ``rows`` (B,) into ``generators``."""

    def __init__(self, generators: Sequence[torch.Generator], rows: Sequence[int], shape: tuple[int, int],
                 device: torch.device, dtype: torch.dtype) -> None:
        self.generators, self.shape, self.device, self.dtype = generators, shape, device, dtype
        self.rows = torch.as_tensor(rows, device=device)
        self.block, self.start = None, -BLOCK

    def __call__(self, k: int) -> Tensor:
        start = k - k % BLOCK
        if start != self.start:
            if start != self.start + BLOCK:  # a generator's stream runs forward only
                raise ValueError(f"increments are drawn in order: step {k} after block {self.start}")
            drawn = torch.stack([torch.randn(BLOCK, *self.shape, generator=g, dtype=torch.float64)
                                 for g in self.generators], 1)  # (BLOCK, seeds, m, d)
            self.block, self.start = drawn.to(self.device, self.dtype)[:, self.rows], start
        return self.block[k - start]


def stepper(beta: Tensor, normalisation: str, dt: float | Tensor, sigma: Tensor,
            increments: Callable[[int], Tensor]) -> Callable[..., Tensor]:
    """One step ``(k, x, gram=None) -> x(t + dt)`` for the systems of a batch: ``beta`` and
    ``sigma`` (B,), ``dt`` a float or (B,) (a clock per system); Q = K = V = I. ``gram``, the
    Gram matrix of ``x`` when recorded, is reused. Without noise (every sigma 0) nothing is drawn."""
    per_system = isinstance(dt, Tensor)
    dt_b = dt[:, None, None] if per_system else dt
    scale = (sigma * (dt.sqrt() if per_system else math.sqrt(dt)))[:, None, None]
    noisy = bool((sigma > 0).any())
    plan: tuple[bool, bool] | None = None

    def step(k: int, x: Tensor, gram: Tensor | None = None) -> Tensor:
        nonlocal plan
        plan = plan or (sphere.fused(beta, None, normalisation), sphere.needs_shift(beta, x.shape[-2], x.dtype))
        v = sphere.field(x, beta, None, None, normalisation, True, gram, None, plan)
        y = torch.addcmul(x, dt_b, v) if per_system else torch.add(x, v, alpha=dt_b)
        if noisy:
            y += sphere.tangent(x, increments(k).expand_as(x)) * scale
        return sphere.normalise(y)

    return step
