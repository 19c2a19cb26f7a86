"""The gradient flow on the circle, batched over systems (torch: CUDA when present).

Systems (B, n) of angles at their own beta (B,). With c = cos theta, s = sin theta and weights
W_ij = e^{beta cos(theta_i - theta_j)} / n (USA) or the row softmax of beta cos(theta_i - theta_j)
(SA, in log space), Eq. 7.1 reads

    theta_i' = c_i (W s)_i - s_i (W c)_i,

the cosines c_i c_j + s_i s_j element-wise, one exponential per pair and one product W [c, s] a
step (:func:`attnsweep.dynamics.ops.bmm`: one product per system, so a system's bits do not depend
on what else shares its batch, nor a store on the job cut). Explicit Euler with the step
dt = courant / min(G(theta), rate(beta)) taken afresh each step: G the Gershgorin bound of the
Jacobian at the current angles (:func:`field_and_bound`), rate the bound over all angles
(:func:`.resources.rate`). A system stops at its own t_max, or where max |theta'| < tol.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from attnsweep.dynamics.ops import bmm
from attnsweep.experiments.circle_synchronization.resources import rate


def field_and_bound(theta: Tensor, beta: Tensor, normalisation: str) -> tuple[Tensor, Tensor]:
    """theta' (B, n) of Eq. 7.1 (USA) or its softmax form (SA), and G (B,), the largest absolute row
    sum of its Jacobian J at theta bounded from above (Gershgorin: every eigenvalue of J within G of
    0). With C = cos(theta_k - theta_i) and W the weights, off the diagonal
    J_ik = W_ik (C - beta (1 - C^2)) (USA) and W_ik (C - beta s^2 + beta s theta_i'), s = sin(theta_k -
    theta_i) (SA); every row of J sums to 0 (a rotation leaves theta' alone), so a row's absolute sum
    is at most twice its off-diagonal part, and G = 2 max_i [sum_k W_ik |C - beta (1 - C^2)| (+ |beta|
    |theta_i'| for SA, whose rows of W sum to 1)], the k = i term an over-count."""
    c, s = torch.cos(theta), torch.sin(theta)
    cos = c[:, :, None] * c[:, None, :] + s[:, :, None] * s[:, None, :]
    logits = beta[:, None, None] * cos
    w = torch.softmax(logits, -1) if normalisation == "sa" else torch.exp(logits) / theta.shape[-1]
    wx = bmm(w, torch.stack([c, s], -1))
    velocity = c * wx[..., 1] - s * wx[..., 0]
    rows = (logits + 1).mul_(cos).sub_(beta[:, None, None]).abs_().mul_(w).sum(-1)  # |C - beta (1 - C^2)| W
    if normalisation == "sa":
        rows = rows + beta.abs()[:, None] * velocity.abs()
    return velocity, 2 * rows.amax(-1)


def integrate(theta: Tensor, beta: Tensor, normalisation: str, courant: float, t_max: float, tol: float,
              check_every: int = 16) -> tuple[Tensor, Tensor]:
    """Euler steps of every system to its t_max or until max |theta'| < tol: the final angles (B, n)
    and the time each ran (B,). Each step is courant / min(G, rate) for its system (the last one
    shortened to land on t_max): below 2 the step linearised at its starting angles is stable. A
    system at rest takes steps of 0 until the batch is thinned, every ``check_every`` steps."""
    theta = theta.clone()
    bound = torch.as_tensor(rate(beta.cpu().numpy(), normalisation), dtype=theta.dtype, device=theta.device)
    time = torch.zeros_like(bound)
    running = torch.ones_like(bound, dtype=torch.bool)
    while bool(running.any()):
        idx = torch.nonzero(running)[:, 0]
        x, b, r, t = theta[idx], beta[idx], bound[idx], time[idx]
        resting = torch.zeros_like(t, dtype=torch.bool)
        for _ in range(check_every):
            velocity, local = field_and_bound(x, b, normalisation)
            resting |= velocity.abs().amax(-1) < tol
            step = torch.where(resting, 0.0, torch.minimum(courant / torch.minimum(local, r), t_max - t))
            x = x + step[:, None] * velocity
            t = t + step
        theta[idx], time[idx] = x, t
        running[idx] = (t < t_max) & ~resting
    return theta, time


def uniform_angles(n: int, generator: torch.Generator) -> Tensor:
    """n i.i.d. uniform angles in [0, 2 pi), float64 on the CPU."""
    return 2 * math.pi * torch.rand(n, generator=generator, dtype=torch.float64)
