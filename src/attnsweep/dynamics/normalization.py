"""Normalisation schemes of a transformer layer as speed regulation on the sphere (Karagodin, Ge,
Polyanskiy, Rigollet, *Normalization in Attention Dynamics*, arXiv:2510.22026;
docs/papers/normalization.md).

A token is x_i = r_i theta_i with theta_i on S^{d-1} and r_i > 0, and attention reads the
directions only: A_i = A_i(theta) (:func:`attnsweep.dynamics.heads.attention_vector`). Every
scheme moves theta_i along A_i at the speed 1/s_i and the radius at the rate rho_i:

    theta_i' = P_{theta_i} A_i / s_i,     r_i' = rho_i,

    scheme       s_i                rho_i                     the layer, one Euler step of size dt
    post_ln      1                  0                         theta <- N(theta + dt A)
    pre_ln       r_i                <theta_i, A_i>            x <- x + dt A(N(x))
    mix_ln       1, then r_i        0, then <theta_i, A_i>    post_ln while t < tau, then pre_ln
    peri_ln      r_i |A_i|          <theta_i, A_i> / |A_i|    x <- x + dt N(A(N(x)))
    ngpt         |A_i| / alpha      0                         theta <- N(theta + dt alpha N(A))
    ln_scaling   sqrt(1 + t)        0                         theta <- N(theta + dt A / sqrt(1 + t))

N is the projection x / |x| onto the sphere; radii start at 1. Integrators: ``euler``, the layer
map (the discrete-time transformer whose step -> 0 limit the flow is); ``rk4``, classical
Runge-Kutta on the flow, then N; ``euler_anchor``, the public simuformer code's step
(``simuxform.py``), for comparisons at equal settings: its radius moves by r sum_c A_ic, not
by <theta_i, A_i> (docs/papers/normalization.md says why the project follows the flow).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import Tensor

from attnsweep.dynamics import sphere

SCHEMES = ("post_ln", "pre_ln", "mix_ln", "peri_ln", "ngpt", "ln_scaling")
#: The schemes whose tokens carry a radius (the others keep r = 1).
RADIAL = ("pre_ln", "mix_ln", "peri_ln")
#: The schemes simuformer implements (``--norm postln|preln|periln|ngpt``).
ANCHOR_SCHEMES = ("post_ln", "pre_ln", "peri_ln", "ngpt")
#: simuformer's guard added to a radius or |A| it divides by.
ANCHOR_EPS = 1e-9

#: ``field(theta, gram)``: the attention vectors A (B, n, d) of directions theta (B, n, d).
Field = Callable[[Tensor, Tensor | None], Tensor]


class State(NamedTuple):
    """Directions theta (B, n, d) on the sphere and radii r (B, n)."""

    theta: Tensor
    r: Tensor


@dataclass(frozen=True)
class Scheme:
    """A normalisation scheme: its ``name`` (:data:`SCHEMES`), nGPT's step ``alpha`` and the
    time ``tau`` where Mix-LN turns from Post-LN to Pre-LN."""

    name: str
    alpha: float = 0.2
    tau: float = 0.0

    def __post_init__(self) -> None:
        if self.name not in SCHEMES:
            raise ValueError(f"unknown scheme {self.name!r} ({', '.join(SCHEMES)})")

    def at(self, t: float) -> str:
        """The scheme in force at time t (Mix-LN's phase)."""
        if self.name == "mix_ln":
            return "post_ln" if t < self.tau else "pre_ln"
        return self.name

    def regulated(self, a: Tensor, theta: Tensor, r: Tensor, t: float) -> tuple[Tensor, Tensor | None]:
        """(A / s, rho) at time t: the directions' velocity before the tangent projection, and
        the radii's rate (None where the radii do not move)."""
        name = self.at(t)
        if name == "post_ln":
            return a, None
        if name == "pre_ln":
            return a / r[..., None], (theta * a).sum(-1)
        if name == "ln_scaling":
            return a / math.sqrt(1 + t), None
        norm = torch.linalg.vector_norm(a, dim=-1)
        if name == "peri_ln":
            return a / (r * norm)[..., None], (theta * a).sum(-1) / norm
        return a * (self.alpha / norm)[..., None], None  # ngpt


def euler(state: State, field: Field, scheme: Scheme, t: float, dt: float, gram: Tensor | None) -> State:
    """The layer map: u = theta + dt A / s, theta <- u / |u|, r <- r |u| where the radii move
    (x + dt A for Pre-LN, x + dt N(A) for Peri-LN, exactly). For Post-LN, the numbers of
    :func:`attnsweep.dynamics.sphere.euler` without projection, bit for bit."""
    w, rho = scheme.regulated(field(state.theta, gram), state.theta, state.r, t)
    u = torch.add(state.theta, w, alpha=dt)
    norm = torch.linalg.vector_norm(u, dim=-1, keepdim=True)
    return State(u / norm, state.r if rho is None else state.r * norm[..., 0])


def rk4(state: State, field: Field, scheme: Scheme, t: float, dt: float, gram: Tensor | None) -> State:
    """Classical Runge-Kutta on (theta, r) with the projected velocity, then N: O(dt^4) per unit
    time where the scheme is smooth in t (Mix-LN's switch costs O(dt) once)."""
    radial = scheme.name in RADIAL

    def f(theta: Tensor, r: Tensor, time: float, g: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
        w, rho = scheme.regulated(field(theta, g), theta, r, time)
        return sphere.tangent(theta, w), (torch.zeros_like(r) if rho is None and radial else rho)

    theta, r = state
    k1, l1 = f(theta, r, t, gram)
    k2, l2 = f(theta + dt / 2 * k1, r + dt / 2 * l1 if radial else r, t + dt / 2)
    k3, l3 = f(theta + dt / 2 * k2, r + dt / 2 * l2 if radial else r, t + dt / 2)
    k4, l4 = f(theta + dt * k3, r + dt * l3 if radial else r, t + dt)
    theta = sphere.normalise(theta + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4))
    return State(theta, r + dt / 6 * (l1 + 2 * l2 + 2 * l3 + l4) if radial else r)


def euler_anchor(state: State, field: Field, scheme: Scheme, t: float, dt: float, gram: Tensor | None) -> State:
    """simuformer's step (``SimuXForm.step``): Post-LN theta <- N(theta + dt A); Pre-LN
    r <- r + dt r sum_c A_c, then theta <- N(theta + dt P_theta A / r); Peri-LN the same with
    A / |A|, unprojected; nGPT theta <- N(theta + dt alpha A / |A|)."""
    theta, r = state
    a = field(theta, gram)
    name = scheme.at(t)
    if name == "post_ln":
        return State(sphere.normalise(theta + dt * a), r)
    if name == "pre_ln":
        r = r + dt * r * a.sum(-1)
        return State(sphere.normalise(theta + dt * sphere.tangent(theta, a) / (r[..., None] + ANCHOR_EPS)), r)
    unit = a / (torch.linalg.vector_norm(a, dim=-1, keepdim=True) + ANCHOR_EPS)
    if name == "ngpt":
        return State(sphere.normalise(theta + dt * scheme.alpha * unit), r)
    r = r + dt * r * unit.sum(-1)  # peri_ln
    return State(sphere.normalise(theta + dt * unit / (r[..., None] + ANCHOR_EPS)), r)


INTEGRATORS = {"euler": euler, "rk4": rk4, "euler_anchor": euler_anchor}


def stepper(scheme: Scheme, integrator: str, dt: float, field: Field) -> Callable[[int, State, Tensor | None], State]:
    """One step ``(k, state, gram) -> state(t_{k+1})`` from t_k = k dt; ``gram``, the Gram matrix
    of the directions if already computed (for recording), is reused by the first evaluation."""
    try:
        step = INTEGRATORS[integrator]
    except KeyError:
        raise ValueError(f"unknown integrator {integrator!r} ({', '.join(INTEGRATORS)})") from None
    if integrator == "euler_anchor" and scheme.name not in ANCHOR_SCHEMES:
        raise ValueError(f"euler_anchor has no {scheme.name} (simuformer's schemes: {', '.join(ANCHOR_SCHEMES)})")
    return lambda k, state, gram=None: step(state, field, scheme, k * dt, dt, gram)
