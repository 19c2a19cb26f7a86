"""The noisy sphere engine (attnsweep.dynamics.langevin) against exact laws.

One token with no other to attend to is Brownian motion on the sphere, whose mean cosine with
its start is exp(-(d - 1) sigma^2 t / 2); the projected Euler-Maruyama scheme has its own exact
mean, g(s)^k with s = sigma sqrt(dt) (below), to which the simulation is compared within its Monte
Carlo error, and which is weak order 1 away from the exact one.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import integrate, stats

from attnsweep.dynamics import langevin, sphere
from attnsweep.run import rng


def _increments(seeds: list[int], rows: list[int], shape: tuple[int, int]) -> langevin.Increments:
    gens = [rng.generator("test_langevin", {"n": shape[0]}, seed, "noise") for seed in seeds]
    return langevin.Increments(gens, rows, shape, torch.device("cpu"), torch.float64)


def _scheme_mean_factor(s: float, d: int) -> float:
    """E[(1 + s^2 chi^2_{d-1})^{-1/2}]: the factor by which one step of the scheme multiplies
    E<x, x_0> (x + s xi_perp has norm sqrt(1 + s^2 |xi_perp|^2), and the xi_perp term averages out)."""
    chi2 = stats.chi2(d - 1)
    value, _ = integrate.quad(lambda q: chi2.pdf(q) / math.sqrt(1 + s * s * q), 0, math.inf)
    return value


@pytest.mark.parametrize("normalisation", ["usa", "sa"])
def test_without_noise_it_is_the_projected_euler_step_bit_for_bit(normalisation):
    gen = torch.Generator().manual_seed(1)
    x = sphere.normalise(torch.randn(3, 9, 4, generator=gen, dtype=torch.float64))
    beta = torch.tensor([0.5, 2.0, 6.0], dtype=torch.float64)
    reference = sphere.stepper("euler_projected", beta, None, None, normalisation, 0.05)
    noisy = langevin.stepper(beta, normalisation, 0.05, torch.zeros(3, dtype=torch.float64),
                             lambda k: pytest.fail("no noise, no draw"))
    y, z = x, x
    for k in range(20):
        y, z = reference(y), noisy(k, z)
    assert torch.equal(y, z)


def test_one_token_is_brownian_motion_on_the_sphere():
    d, sigma, dt, steps, systems = 3, 1.0, 0.01, 100, 4000
    t = dt * steps
    x0 = torch.zeros(systems, 1, d, dtype=torch.float64)
    x0[..., 0] = 1
    sig = torch.full((systems,), sigma, dtype=torch.float64)
    step = langevin.stepper(torch.ones(systems, dtype=torch.float64), "usa", dt, sig,
                            _increments(list(range(systems)), list(range(systems)), (1, d)))
    x = x0
    for k in range(steps):
        x = step(k, x)
    cosine = x[:, 0, 0].numpy()
    mean, se = cosine.mean(), cosine.std(ddof=1) / math.sqrt(systems)
    scheme = _scheme_mean_factor(sigma * math.sqrt(dt), d) ** steps
    # The simulation has the scheme's exact mean within 4 standard errors (a false alarm 6e-5); the
    # standard error, ~0.48/sqrt(4000) = 0.008, is far below the 0.15 a wrong rate (d for d - 1) moves it.
    assert abs(mean - scheme) < 4 * se
    # The scheme is weak order 1: log g(s) = -(d-1) s^2/2 + (d-1)(d+2) s^4/4 + O(s^6) per step, so its
    # mean sits within t (d-1)(d+2) sigma^4 dt / 4 (relative, to first order; doubled for the rest)
    # of exp(-(d-1) sigma^2 t / 2), the Brownian motion's (generator sigma^2 Delta / 2, Y_1's
    # eigenvalue -(d - 1)).
    exact = math.exp(-(d - 1) * sigma ** 2 * t / 2)
    bias = 2 * t * (d - 1) * (d + 2) * sigma ** 4 * dt / 4 * exact
    assert abs(scheme - exact) < bias
    assert abs(mean - exact) < 4 * se + bias


def test_common_noise_moves_every_token_with_one_increment():
    # Common noise: every token of a system gets the same xi; tokens at one point stay together
    # (the tangent projection is the same for all), whatever the noise.
    x = torch.zeros(2, 5, 3, dtype=torch.float64)
    x[..., 2] = 1
    step = langevin.stepper(torch.tensor([1.0, 4.0], dtype=torch.float64), "usa", 0.01,
                            torch.tensor([3.0, 3.0], dtype=torch.float64), _increments([0], [0, 0], (1, 3)))
    for k in range(50):
        x = step(k, x)
    assert torch.equal(x, x[:, :1].expand_as(x))
    assert (x[:, 0, 2] < 1 - 1e-3).all()  # and they moved


def test_increments_do_not_depend_on_the_systems_beside_them():
    both = _increments([7, 8], [0, 1, 1], (4, 2))
    alone = _increments([8], [0], (4, 2))
    for k in range(2 * langevin.BLOCK + 3):
        assert torch.equal(both(k)[2], alone(k)[0])
        assert torch.equal(both(k)[1], both(k)[2])
    with pytest.raises(ValueError, match="in order"):
        alone(5)


def test_noise_is_tangent_and_its_strength_scales_as_sigma():
    # One step from x with no drift (n = 1): the displacement before renormalisation is
    # sigma sqrt(dt) P_x xi, so the angle moved is atan(sigma sqrt(dt) |P_x xi|), xi the same draws.
    x = sphere.normalise(torch.tensor([[[1.0, 2.0, 2.0]]] * 2, dtype=torch.float64))
    sigma = torch.tensor([0.1, 0.4], dtype=torch.float64)
    step = langevin.stepper(torch.ones(2, dtype=torch.float64), "usa", 0.01, sigma, _increments([3], [0, 0], (1, 3)))
    xi = _increments([3], [0], (1, 3))(0)[0, 0]
    tangent = xi - (xi @ x[0, 0]) * x[0, 0]
    y = step(0, x)
    angle = torch.arccos((y * x).sum(-1).clamp(-1, 1))[:, 0]
    expected = torch.atan(sigma * 0.1 * torch.linalg.vector_norm(tangent))
    np.testing.assert_allclose(angle.numpy(), expected.numpy(), rtol=1e-6)  # arccos near 1: ~1e-8 absolute


def test_common_noise_contracts_nearby_tokens_at_rate_d_minus_1_over_2():
    # Two tokens at a small angle theta under common noise: the tangent vector u between them obeys
    # d log|u| = -sigma <x, o dW> (Stratonovich; docs/papers/noise.md, "Common noise"), whose Ito
    # form is -sigma <x, dW> - (d - 1) sigma^2 dt / 2, and USA with n = 2 closes the angle at
    # rate e^{beta cos theta} -> e^beta. So E log(theta_t / theta_0) = -((d - 1) sigma^2 / 2 + e^beta) t
    # to O(theta^2), with variance sigma^2 t (the martingale's quadratic variation).
    d, sigma, beta, dt, steps, systems = 3, 1.0, 0.0, 2e-3, 500, 1000
    t = dt * steps
    theta0 = 1e-4
    x = torch.zeros(systems, 2, d, dtype=torch.float64)
    x[:, 0, 0] = 1
    x[:, 1, 0], x[:, 1, 1] = math.cos(theta0), math.sin(theta0)
    step = langevin.stepper(torch.full((systems,), beta, dtype=torch.float64), "usa", dt,
                            torch.full((systems,), sigma, dtype=torch.float64),
                            _increments(list(range(systems)), list(range(systems)), (1, d)))
    for k in range(steps):
        x = step(k, x)
    theta = 2 * torch.asin(torch.linalg.vector_norm(x[:, 0] - x[:, 1], dim=-1) / 2)  # the chord, not arccos
    rate = np.log(theta.numpy() / theta0) / t
    exact = -((d - 1) * sigma ** 2 / 2 + math.exp(beta))
    se = rate.std(ddof=1) / math.sqrt(systems)  # ~ sigma / sqrt(t systems) = 0.032
    # Within 4 standard errors (a false alarm 6e-5) and the scheme's weak error: per step
    # O(dt^2) times the squared rates, the one-token bound (d - 1)(d + 2) sigma^4 / 4 plus
    # e^{2 beta} for the drift, doubled, over t. A rate off by sigma^2 / 2 (d for d - 1) is 0.5 away.
    bias = 2 * dt * ((d - 1) * (d + 2) * sigma ** 4 / 4 + math.exp(2 * beta))
    assert abs(rate.mean() - exact) < 4 * se + bias
    assert 4 * se + bias < sigma ** 2 / 4
