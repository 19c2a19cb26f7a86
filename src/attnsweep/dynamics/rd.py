"""Self-attention dynamics in R^d without normalisation (paper 004), batched over systems.

Original tokens, Eq. 1.1 with the attention matrix of Eq. 1.2::

    x_i' = sum_j P_ij V x_j,    P_ij = e^{<Q x_i, K x_j>} / sum_l e^{<Q x_i, K x_l>}.

Rescaled tokens z_i = e^{-tV} x_i, Eq. 3.1 (the paper's surrogate for layer norm)::

    z_i' = sum_j P_ij V (z_j - z_i),    P_ij(t) = softmax_j <Q e^{tV} z_i, K e^{tV} z_j>,

the same P(t) as for x, and a non-autonomous field: e^{tV} is evaluated at every stage time
(``torch.linalg.matrix_exp``, batched over systems).

Discrete rescaling, Remark 3.4: with R = I + V dt, z^[k] = R^{-k} x^[k] of the Euler map of
Eq. 1.3 satisfies::

    z_i^[k+1] = z_i^[k] + dt sum_j P_ij^[k] R^{-1} V (z_j^[k] - z_i^[k]),   scores <Q R^k z_i, K R^k z_j>,

the Transformer's own residual steps in the rescaled variable (-> Eq. 3.1 as dt -> 0).

Nonlinear extension, Eq. 12.1 (Section 12.2, Fig. 18): a 2-layer network on the attention term,

    z_i' = W sigma( V sum_j P_ij (z_j - z_i) ),   P as in Eq. 3.1,

with sigma in {ReLU, tanh} acting on the tokens' coordinates and W (d, d) (None: I).

Row convention as in :mod:`.sphere`: tokens (B, n, d) with token i in row i; ``qk`` (B, d, d)
holds Q^T K (None: Q = K = I), so that <Q y_i, K y_j> = y_i^T Q^T K y_j; ``v`` (B, d, d) holds
V. Time is in the flow's own units (the layer index in the continuous-depth limit); tokens and
scores are dimensionless.

The dynamics is not scale invariant (Remark 3.3): scores grow like e^{2 Re(lambda_1) t} |z|^2,
so float64 is the dtype to use (docs/papers/004.md §6). Scores are formed from the rescaled-back tokens
y = z e^{tV}^T as (y Q^T K) y_c^T, with keys y_c = (z - mean z) e^{tV}^T centred before the
growth (:func:`attention`), and the softmax is max-subtracted, so nothing overflows below
``LOGIT_LIMIT``; a system whose scores exceed it (or are not finite) is flagged: its P, and from
there its tokens and observables, become NaN. Below that, score differences smaller than the
scores' rounding error (:func:`score_error`) are noise: within a cluster along a mode with
lambda_1 > 0 this happens once e^{lambda_1 t} ~ 1/eps (t ~ 37/lambda_1 in float64), and
:func:`attnsweep.dynamics.attention.resolved` tells whether the scores still fix P.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Literal

import torch
from torch import Tensor

#: Largest |score| a system may reach before it is flagged (NaN); float64 overflows near 1.8e308.
LOGIT_LIMIT = 1e300

Equation = Literal["rescaled", "original", "discrete", "nonlinear"]
Integrator = Literal["rk4", "euler"]
#: A field y' = f(t, y) of a batch of systems.
Field = Callable[[float, Tensor], Tensor]


def scores(y: Tensor, qk: Tensor | None, keys: Tensor | None = None) -> Tensor:
    """<Q y_i, K k_j> = y_i^T (Q^T K) k_j, shape (B, n, n): the exponent of Eq. 1.2, with keys
    k = y unless given."""
    keys = y if keys is None else keys
    return (y if qk is None else y @ qk) @ keys.transpose(-1, -2)


def centred(y: Tensor) -> Tensor:
    """y_j - mean_l y_l, row by row."""
    return y - y.mean(-2, keepdim=True)


def probabilities(logits: Tensor) -> Tensor:
    """Row-wise softmax of scores (B, n, n), max-subtracted; NaN for a system whose scores
    exceed ``LOGIT_LIMIT`` in modulus or are not finite (flagged)."""
    flagged = ~(logits.abs().amax((-2, -1)) <= LOGIT_LIMIT)
    return torch.where(flagged[:, None, None], math.nan, torch.softmax(logits, dim=-1))


def attention(y: Tensor, qk: Tensor | None, keys: Tensor | None = None) -> Tensor:
    """P_ij = softmax_j <Q y_i, K y_j> (Eq. 1.2); row-stochastic, (B, n, n), flagged systems NaN.

    ``keys`` may replace y_j by y_j - c for one vector c: the softmax ignores <Q y_i, K c>,
    constant along a row. Centred keys (c the mean token, formed before any e^{tV}) drop the
    rounding error of the tokens' common part, which would otherwise swamp the differences
    between the scores of one row once that part is large.
    """
    return probabilities(scores(y, qk, keys))


def score_error(y: Tensor, qk: Tensor | None) -> Tensor:
    """Rounding error of the scores of each system, (B,): eps max_i |y_i|^2 ||Q^T K||_F, the
    last digit of the uncentred scores, which the tokens' own rounding carries into the centred
    ones. Differences of scores below it are noise (see :func:`attnsweep.dynamics.attention.resolved`)."""
    norm = 1.0 if qk is None else torch.linalg.matrix_norm(qk)
    return torch.finfo(y.dtype).eps * torch.linalg.vector_norm(y, dim=-1).amax(-1) ** 2 * norm


class Growth:
    """e^{tV} of a batch of V (B, d, d), evaluated by ``matrix_exp`` and cached at the last
    three times asked for (RK4 asks for t, t + h/2 and t + h, and t + h again next step)."""

    def __init__(self, v: Tensor) -> None:
        self.v = v
        self._cache: dict[float, Tensor] = {}

    def __call__(self, t: float) -> Tensor:
        if t not in self._cache:
            if len(self._cache) == 3:
                del self._cache[min(self._cache)]
            self._cache[t] = torch.linalg.matrix_exp(t * self.v)
        return self._cache[t]


def to_original(z: Tensor, growth: Tensor) -> Tensor:
    """x = e^{tV} z, row by row, with ``growth`` = e^{tV} (B, d, d)."""
    return z @ growth.transpose(-1, -2)


def to_rescaled(x: Tensor, v: Tensor, t: float) -> Tensor:
    """z = e^{-tV} x (the change of variables of Eq. 3.1)."""
    return x @ torch.linalg.matrix_exp(-t * v).transpose(-1, -2)


def original_field(x: Tensor, qk: Tensor | None, v: Tensor) -> Tensor:
    """Velocity of Eq. 1.1: x_i' = sum_j P_ij V x_j, (B, n, d)."""
    return attention(x, qk, centred(x)) @ x @ v.transpose(-1, -2)


def rescaled_queries_keys(z: Tensor, growth: Tensor) -> tuple[Tensor, Tensor]:
    """The tokens x = e^{tV} z behind P(t) of Eq. 3.1, and their keys e^{tV} (z_j - mean z),
    centred before the growth; ``growth`` = e^{tV} (B, d, d)."""
    return to_original(z, growth), to_original(centred(z), growth)


def rescaled_field(z: Tensor, qk: Tensor | None, v: Tensor, growth: Tensor) -> Tensor:
    """Velocity of Eq. 3.1: z_i' = V (sum_j P_ij z_j - z_i) (rows of P sum to 1)."""
    x, keys = rescaled_queries_keys(z, growth)
    return (attention(x, qk, keys) @ z - z) @ v.transpose(-1, -2)


def euler(f: Field, t: float, y: Tensor, h: float) -> Tensor:
    """Explicit Euler, y + h f(t, y): the Transformer's residual update (Eq. 1.3 for x)."""
    return y + h * f(t, y)


def rk4(f: Field, t: float, y: Tensor, h: float) -> Tensor:
    """Classical Runge-Kutta, re-evaluating P at every stage: O(h^4) per unit time."""
    k1 = f(t, y)
    k2 = f(t + h / 2, y + h / 2 * k1)
    k3 = f(t + h / 2, y + h / 2 * k2)
    k4 = f(t + h, y + h * k3)
    return y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)


ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {"relu": torch.relu, "tanh": torch.tanh}


def nonlinear_field(z: Tensor, qk: Tensor | None, v: Tensor, growth: Tensor, sigma: Callable[[Tensor], Tensor],
                    w: Tensor | None) -> Tensor:
    """Velocity of Eq. 12.1: z_i' = W sigma(V sum_j P_ij (z_j - z_i)), sigma entrywise; ``w`` None: W = I."""
    x, keys = rescaled_queries_keys(z, growth)
    u = sigma((attention(x, qk, keys) @ z - z) @ v.transpose(-1, -2))
    return u if w is None else u @ w.transpose(-1, -2)


def powers(v: Tensor, h: float, k: int) -> Tensor:
    """R^k with R = I + h V (Remark 3.4), (B, d, d)."""
    return torch.linalg.matrix_power(torch.eye(v.shape[-1], dtype=v.dtype, device=v.device) + h * v, k)


def discrete_map(qk: Tensor | None, v: Tensor, h: float) -> Callable[[int, Tensor], Tensor]:
    """z^[k] -> z^[k+1] of Remark 3.4: z_i + h sum_j P_ij R^{-1} V (z_j - z_i), P from the scores
    <Q R^k z_i, K R^k z_j> (keys centred before R^k, as in :func:`rescaled_queries_keys`)."""
    drift = torch.linalg.solve(torch.eye(v.shape[-1], dtype=v.dtype, device=v.device) + h * v, v)  # R^{-1} V

    def step(k: int, z: Tensor) -> Tensor:
        x, keys = rescaled_queries_keys(z, powers(v, h, k))
        return z + h * (attention(x, qk, keys) @ z - z) @ drift.transpose(-1, -2)

    return step


INTEGRATORS: dict[str, Callable[[Field, float, Tensor, float], Tensor]] = {"euler": euler, "rk4": rk4}


def field(equation: Equation, qk: Tensor | None, v: Tensor, activation: str | None = None,
          w: Tensor | None = None) -> Field:
    """The right-hand side f(t, y) of Eq. 1.1 (``original``, y = x), Eq. 3.1 (``rescaled``, y = z)
    or Eq. 12.1 (``nonlinear``, y = z, with ``activation`` and W = ``w``)."""
    if equation == "original":
        return lambda t, x: original_field(x, qk, v)
    growth = Growth(v)
    if equation == "rescaled":
        return lambda t, z: rescaled_field(z, qk, v, growth(t))
    if equation == "nonlinear":
        sigma = ACTIVATIONS[activation]
        return lambda t, z: nonlinear_field(z, qk, v, growth(t), sigma, w)
    raise ValueError(f"unknown equation {equation!r} (original, rescaled, nonlinear; discrete is a map)")


def stepper(equation: Equation, integrator: Integrator, qk: Tensor | None, v: Tensor, h: float,
            activation: str | None = None, w: Tensor | None = None) -> Callable[[int, Tensor], Tensor]:
    """One step y(k h) -> y((k + 1) h) of ``integrator`` on ``equation``, for step index k;
    ``discrete`` is its own map (Remark 3.4, the Euler steps of Eq. 1.3 rescaled)."""
    if equation == "discrete":
        if integrator != "euler":
            raise ValueError("equation discrete (Remark 3.4) is the Euler map: integrator euler")
        return discrete_map(qk, v, h)
    try:
        step = INTEGRATORS[integrator]
    except KeyError:
        raise ValueError(f"unknown integrator {integrator!r} ({', '.join(INTEGRATORS)})") from None
    f = field(equation, qk, v, activation, w)
    return lambda k, y: step(f, k * h, y, h)


def queries_keys(equation: Equation, t: float, y: Tensor, v: Tensor, h: float | None = None) -> tuple[Tensor, Tensor]:
    """The tokens x(t) and the centred keys x_j - mean x of P(t) from the state y of ``equation``
    at time t: x itself, or z through e^{tV} (``discrete``: R^k, k = t/h; centred before the growth)."""
    if equation == "original":
        return y, centred(y)
    if equation == "discrete":
        return rescaled_queries_keys(y, powers(v, h, round(t / h)))
    return rescaled_queries_keys(y, torch.linalg.matrix_exp(t * v))


def attention_at(equation: Equation, t: float, y: Tensor, qk: Tensor | None, v: Tensor,
                 h: float | None = None) -> Tensor:
    """P(t) (Eq. 1.2) from the state y of ``equation`` at time t (``discrete``: step t/h)."""
    x, keys = queries_keys(equation, t, y, v, h)
    return attention(x, qk, keys)
