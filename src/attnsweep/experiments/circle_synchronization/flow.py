"""The gradient flow on the circle, batched over systems (torch: CUDA when present).

Systems (B, n) of angles at their own beta (B,). With c = cos theta, s = sin theta and weights
W_ij = e^{beta cos(theta_i - theta_j)} / n (USA) or the row softmax of beta cos(theta_i - theta_j)
(SA, in log space), Eq. 7.1 reads

    theta_i' = c_i (W s)_i - s_i (W c)_i,

the cosines c_i c_j + s_i s_j element-wise, one exponential per pair and one product W [c, s] a
step (:func:`attnsweep.dynamics.ops.bmm`: one product per system, so a system's bits do not depend
on what else shares its batch, nor a store on the job cut). Explicit Euler with
dt = courant / rate(beta), rate a bound of the Jacobian's spectral radius
(:func:`.resources.rate`). A system stops at its own t_max, or where max |theta'| < tol.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from attnsweep.dynamics.ops import bmm
from attnsweep.experiments.circle_synchronization.resources import rate


def field(theta: Tensor, beta: Tensor, normalisation: str) -> Tensor:
    """theta' (B, n) of Eq. 7.1 (USA) or its softmax form (SA)."""
    c, s = torch.cos(theta), torch.sin(theta)
    logits = beta[:, None, None] * (c[:, :, None] * c[:, None, :] + s[:, :, None] * s[:, None, :])
    w = torch.softmax(logits, -1) if normalisation == "sa" else torch.exp(logits) / theta.shape[-1]
    wx = bmm(w, torch.stack([c, s], -1))
    return c * wx[..., 1] - s * wx[..., 0]


def integrate(theta: Tensor, beta: Tensor, normalisation: str, courant: float, t_max: float, tol: float,
              check_every: int = 50) -> tuple[Tensor, Tensor]:
    """Euler steps of every system to its t_max or until max |theta'| < tol (checked every
    ``check_every`` steps): the final angles (B, n) and the time each ran (B,)."""
    theta = theta.clone()
    dt = torch.as_tensor(courant / rate(beta.cpu().numpy(), normalisation), dtype=theta.dtype, device=theta.device)
    steps = torch.ceil(t_max / dt).to(torch.int64)
    time = torch.zeros_like(dt)
    running = torch.ones_like(dt, dtype=torch.bool)
    k = 0
    last = int(steps.max()) if len(steps) else 0
    while k < last and bool(running.any()):
        idx = torch.nonzero(running)[:, 0]
        x, b, h = theta[idx], beta[idx], dt[idx]
        left = steps[idx] - k
        block = min(check_every, int(left.max()))
        for j in range(block):
            f = field(x, b, normalisation)
            x = x + torch.where(left > j, h, 0.0)[:, None] * f
        theta[idx] = x
        time[idx] += torch.clamp(left, max=block) * h
        k += block
        still = (left > block) & (field(x, b, normalisation).abs().amax(-1) >= tol)
        running[idx] = still
    return theta, time


def uniform_angles(n: int, generator: torch.Generator) -> Tensor:
    """n i.i.d. uniform angles in [0, 2 pi), float64 on the CPU."""
    return 2 * math.pi * torch.rand(n, generator=generator, dtype=torch.float64)
