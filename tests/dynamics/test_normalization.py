"""Multi-head attention and the normalisation schemes (attnsweep.dynamics.heads, .normalization)
against their equations written out here, element by element in float64, against the sphere
engine the papers' experiments use, and against exact properties of the flows.

Roundoff: the quantities are O(1) and each is a sum of a few dozen products, so an engine and a
loop written another way agree to a few hundred ulps of float64 (1e-13); the tests allow 1e-12.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.integrate import solve_ivp

from attnsweep.dynamics import heads, sphere
from attnsweep.dynamics.normalization import SCHEMES, Scheme, State, stepper

ROUNDOFF = 1e-12
N, D, H = 5, 3, 2


def draw(b: int = 2, n: int = N, d: int = D, h: int = H, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    theta = sphere.normalise(torch.randn(b, n, d, generator=g, dtype=torch.float64))
    qk = torch.randn(b, h, d, d, generator=g, dtype=torch.float64) / math.sqrt(d)
    v = torch.randn(b, h, d, d, generator=g, dtype=torch.float64) / math.sqrt(d)
    beta = torch.linspace(0.5, 3.0, b, dtype=torch.float64)
    return theta, beta, qk, v


def visible(i: int, j: int, mask: str, window: int | None) -> bool:
    lag = i - j
    if mask == "causal" and lag < 0:
        return False
    return window is None or abs(lag) < window


def attention_loops(theta, beta, qk, v, weights, reduction, mask="full", window=None):
    """A_i = c sum_h sum_j W^h_ij V_h theta_j (001 Eq. 2.7), one system, every sum a loop."""
    n, d = theta.shape
    count = qk.shape[0]
    a = np.zeros((n, d))
    for h in range(count):
        for i in range(n):
            keys = [j for j in range(n) if visible(i, j, mask, window)]
            scores = np.array([beta * theta[i] @ qk[h] @ theta[j] for j in keys])
            w = np.exp(scores - scores.max()) / np.exp(scores - scores.max()).sum() if weights == "sa" \
                else np.exp(scores) / n
            for wj, j in zip(w, keys):
                a[i] += wj * (v[h] @ theta[j])
    return a / count if reduction == "mean" else a


def field_of(beta, qk, v, weights="sa", reduction="sum", mask="full", window=None, n=N):
    hidden = heads.hidden_keys(n, mask, window, torch.device("cpu"))
    count = (qk if qk is not None else v).shape[1]  # one of them given
    return lambda theta, gram=None: heads.attention_vector(theta, beta, qk, v, count, weights, reduction, hidden,
                                                           gram)


@pytest.mark.parametrize("weights", ["sa", "usa"])
@pytest.mark.parametrize("reduction", ["sum", "mean"])
@pytest.mark.parametrize(("mask", "window"), [("full", None), ("causal", None), ("full", 2), ("causal", 3)])
@pytest.mark.parametrize("values", ["random", "identity"])
def test_the_attention_vector_is_eq_2_7_written_out(weights, reduction, mask, window, values):
    theta, beta, qk, v = draw()
    if values == "identity":  # the engine's own path: the heads' weights summed, then one product
        v = None
    a = field_of(beta, qk, v, weights, reduction, mask, window)(theta)
    eye = np.broadcast_to(np.eye(D), (H, D, D))
    for k in range(theta.shape[0]):
        expected = attention_loops(theta[k].numpy(), float(beta[k]), qk[k].numpy(),
                                   eye if v is None else v[k].numpy(), weights, reduction, mask, window)
        np.testing.assert_allclose(a[k].numpy(), expected, rtol=0, atol=ROUNDOFF)


def layer(name: str, theta, r, a, dt, t, alpha=0.2, tau=0.0):
    """One layer of each scheme as its definition states it, x = r theta (docs/papers/normalization.md)."""
    if name == "mix_ln":
        name = "post_ln" if t < tau else "pre_ln"
    unit = a / np.linalg.norm(a, axis=-1, keepdims=True)
    if name in ("pre_ln", "peri_ln"):
        x = r[:, None] * theta + dt * (a if name == "pre_ln" else unit)
        radius = np.linalg.norm(x, axis=-1)
        return x / radius[:, None], radius
    u = theta + dt * {"post_ln": a, "ngpt": alpha * unit, "ln_scaling": a / math.sqrt(1 + t)}[name]
    return u / np.linalg.norm(u, axis=-1, keepdims=True), r


@pytest.mark.parametrize("name", SCHEMES)
@pytest.mark.parametrize("t", [0.0, 2.5])
def test_each_scheme_s_layer_is_its_equation(name, t):
    """Mix-LN at t = 0 and 2.5 with tau = 1: both phases."""
    theta, beta, qk, v = draw()
    r = torch.tensor([[1.0, 1.5, 0.7, 2.0, 1.1]] * 2, dtype=torch.float64)
    dt, k = 0.1, round(t / 0.1)
    step = stepper(Scheme(name, alpha=0.3, tau=1.0), "euler", dt, field_of(beta, qk, v))
    out = step(k, State(theta, r), None)
    for b in range(2):
        a = attention_loops(theta[b].numpy(), float(beta[b]), qk[b].numpy(), v[b].numpy(), "sa", "sum")
        expected, radius = layer(name, theta[b].numpy(), r[b].numpy(), a, dt, k * dt, alpha=0.3, tau=1.0)
        np.testing.assert_allclose(out.theta[b].numpy(), expected, rtol=0, atol=ROUNDOFF)
        np.testing.assert_allclose(out.r[b].numpy(), radius, rtol=0, atol=ROUNDOFF)


@pytest.mark.parametrize("name", ["pre_ln", "peri_ln", "ngpt"])
def test_the_anchor_s_update_of_a_given_a_is_simuformer_s(name):
    """simuformer's SimuXForm.step from a given attention vector A: r <- r + dt r sum_c A_c first,
    then the direction with the new r. The A it is given here is Eq. 2.7's; the value convention
    simuformer's A has (token j contributing V^T x_j) is the experiment's, tested end to end in
    tests/experiments/test_normalized_attention.py against simuformer's whole step written out."""
    theta, beta, qk, v = draw()
    r = torch.tensor([[1.0, 1.5, 0.7, 2.0, 1.1]] * 2, dtype=torch.float64)
    out = stepper(Scheme(name), "euler_anchor", 0.1, field_of(beta, qk, v))(0, State(theta, r), None)
    for b in range(2):
        th, rb = theta[b].numpy(), r[b].numpy()
        a = attention_loops(th, float(beta[b]), qk[b].numpy(), v[b].numpy(), "sa", "sum")
        unit = a / (np.linalg.norm(a, axis=-1, keepdims=True) + 1e-9)
        if name == "ngpt":
            u, radius = th + 0.1 * 0.2 * unit, rb
        elif name == "pre_ln":
            radius = rb + 0.1 * rb * a.sum(-1)
            u = th + 0.1 * (a - (th * a).sum(-1, keepdims=True) * th) / (radius[:, None] + 1e-9)
        else:
            radius = rb + 0.1 * rb * unit.sum(-1)
            u = th + 0.1 * unit / (radius[:, None] + 1e-9)
        np.testing.assert_allclose(out.theta[b].numpy(), u / np.linalg.norm(u, axis=-1, keepdims=True), rtol=0,
                                   atol=ROUNDOFF)
        np.testing.assert_allclose(out.r[b].numpy(), radius, rtol=0, atol=ROUNDOFF)


def flow(name: str, beta, qk, v, n: int, d: int, alpha=0.2, tau=0.5):
    """theta' = P A / s, r' = rho of every scheme, on a flat (theta, r) vector, from the loops."""
    def rhs(t, y):
        theta, r = y[: n * d].reshape(n, d), y[n * d:]
        a = attention_loops(theta, beta, qk, v, "sa", "sum")
        norm = np.linalg.norm(a, axis=-1)
        radial = (theta * a).sum(-1)
        phase = ("post_ln" if t < tau else "pre_ln") if name == "mix_ln" else name
        s, rho = {"post_ln": (1.0, 0 * r), "pre_ln": (r, radial), "peri_ln": (r * norm, radial / norm),
                  "ngpt": (norm / alpha, 0 * r), "ln_scaling": (math.sqrt(1 + t), 0 * r)}[phase]
        tangent = a - radial[:, None] * theta
        return np.concatenate([(tangent / np.reshape(s, (-1, 1)) if np.ndim(s) else tangent / s).ravel(), rho])
    return rhs


@pytest.mark.parametrize("name", [s for s in SCHEMES if s != "mix_ln"])
def test_rk4_follows_each_scheme_s_flow(name):
    """RK4 at dt = 0.005 to t = 1 against scipy's DOP853 at rtol 1e-12 on the flow written out. RK4's
    global error is C dt^4 (6e-10 C), C of the order of the field's fourth derivatives: (beta |QK|)^4
    ~ 10 for most schemes, up to ~1e3 for Peri-LN, whose speed 1/(r |A|) changes fast where |A|
    dips (its error falls 80x from dt = 0.02 to 0.01, 23x from 0.01 to 0.005: not yet 16x, the
    asymptotic rate). So at most ~1e-7; allowed 1e-6. (Mix-LN's switch is a kink RK4 crosses at
    O(dt): not in this test.)"""
    theta, beta, qk, v = draw(b=1, n=3, seed=3)
    n, d = 3, D
    dt, steps = 0.005, 200
    step = stepper(Scheme(name), "rk4", dt, field_of(beta, qk, v, n=n))
    state = State(theta, torch.ones(1, n, dtype=torch.float64))
    for k in range(steps):
        state = step(k, state, None)
    y0 = np.concatenate([theta[0].numpy().ravel(), np.ones(n)])
    exact = solve_ivp(flow(name, float(beta[0]), qk[0].numpy(), v[0].numpy(), n, d), (0, 1), y0, method="DOP853",
                      rtol=1e-12, atol=1e-12).y[:, -1]
    np.testing.assert_allclose(state.theta[0].numpy().ravel(), exact[: n * d], rtol=0, atol=1e-6)
    np.testing.assert_allclose(state.r[0].numpy(), exact[n * d:], rtol=0, atol=1e-6)


@pytest.mark.parametrize("name", ["pre_ln", "peri_ln", "mix_ln", "ngpt"])
def test_the_layer_map_converges_to_the_flow_at_first_order(name):
    """Euler's error at t = 1 against the flow halves with the step: the layers are a consistent
    first-order scheme of it. The ratio of the errors at dt and dt/2 is 2 + O(dt) (0.05 and 0.025):
    allowed [1.7, 2.3]. Mix-LN's tau = 0.5 is a multiple of both steps, so its switch is exact."""
    theta, beta, qk, v = draw(b=1, n=3, seed=5)
    n = 3
    y0 = np.concatenate([theta[0].numpy().ravel(), np.ones(n)])
    exact = solve_ivp(flow(name, float(beta[0]), qk[0].numpy(), v[0].numpy(), n, D), (0, 1), y0, method="DOP853",
                      rtol=1e-12, atol=1e-12).y[:, -1]
    errors = []
    for dt in (0.05, 0.025):
        step = stepper(Scheme(name, tau=0.5), "euler", dt, field_of(beta, qk, v, n=n))
        state = State(theta, torch.ones(1, n, dtype=torch.float64))
        for k in range(round(1 / dt)):
            state = step(k, state, None)
        errors.append(np.abs(np.concatenate([state.theta[0].numpy().ravel(), state.r[0].numpy()]) - exact).max())
    assert 1.7 < errors[0] / errors[1] < 2.3, errors


def test_ln_scaling_is_post_ln_on_the_clock_2_sqrt_1_plus_t():
    """s = sqrt(1 + t) for every token is a change of clock: theta_LNS(t) = theta_post(tau(t)) with
    tau = int_0^t ds / sqrt(1 + s) = 2 (sqrt(1 + t) - 1). At t = 3 (tau = 2), RK4 on both at
    dt = 0.01: each within ~1e-7 of its flow (as above), allowed 1e-6."""
    theta, beta, qk, v = draw(b=1, n=4, seed=7)
    dt = 0.01

    def run(name: str, t: float) -> torch.Tensor:
        step = stepper(Scheme(name), "rk4", dt, field_of(beta, qk, v, n=4))
        state = State(theta, torch.ones(1, 4, dtype=torch.float64))
        for k in range(round(t / dt)):
            state = step(k, state, None)
        return state.theta

    np.testing.assert_allclose(run("ln_scaling", 3.0).numpy(), run("post_ln", 2.0).numpy(), rtol=0, atol=1e-6)


def test_mix_ln_is_post_ln_before_tau_and_pre_ln_from_tau_0_bit_for_bit():
    theta, beta, qk, v = draw()
    start = State(theta, torch.ones(theta.shape[:-1], dtype=torch.float64))

    def run(scheme: Scheme) -> State:
        step, state = stepper(scheme, "euler", 0.1, field_of(beta, qk, v)), start
        for k in range(30):
            state = step(k, state, None)
        return state

    for mix, other in ((Scheme("mix_ln", tau=10.0), Scheme("post_ln")), (Scheme("mix_ln", tau=0.0), Scheme("pre_ln"))):
        got, expected = run(mix), run(other)
        assert torch.equal(got.theta, expected.theta) and torch.equal(got.r, expected.r)


def test_a_peri_ln_layer_moves_a_radius_by_at_most_dt():
    """x <- x + dt A/|A|: |r' - r| <= dt by the triangle inequality, so |r_k - 1| <= k dt (plus roundoff)."""
    theta, beta, qk, v = draw(b=3)
    step = stepper(Scheme("peri_ln"), "euler", 0.2, field_of(beta, qk, v))
    state = State(theta, torch.ones(theta.shape[:-1], dtype=torch.float64))
    for k in range(40):
        previous = state.r
        state = step(k, state, None)
        assert ((state.r - previous).abs() <= 0.2 + ROUNDOFF).all()
    assert state.r.max() > 1 + 0.5 * 40 * 0.2  # and they do move: not a test that cannot fail


@pytest.mark.parametrize("integrator", ["euler", "rk4"])
@pytest.mark.parametrize("causal", [None, True])
@pytest.mark.parametrize("matrices", ["identity", "random"])
def test_one_head_post_ln_is_the_sphere_engine_bit_for_bit(integrator, causal, matrices):
    """The engine of papers 001 and 003 (sphere.stepper, with 003's causal mask), the Gram matrix
    reused every third step as the recorders do."""
    theta, beta, qk, v = draw(b=3, n=8, d=4, h=1)
    if matrices == "identity":
        qk = v = None
    ref = sphere.stepper(integrator, beta, None if qk is None else qk[:, 0], None if v is None else v[:, 0], "sa", 0.1,
                         causal)
    plan = (sphere.fused(beta, qk, "sa"), sphere.needs_shift(beta, 8, theta.dtype))
    field = (lambda th, g: heads.attention_vector(th, beta, qk, v, 1, "sa", "sum", causal, g, plan))
    step = stepper(Scheme("post_ln"), integrator, 0.1, field)
    x, state = theta, State(theta, torch.ones(3, 8, dtype=torch.float64))
    for k in range(40):
        gram = sphere.bmm(x, x.transpose(-1, -2)) if k % 3 == 0 else None
        x, state = ref(x, gram), step(k, state, None if gram is None else gram.clone())
    assert torch.equal(x, state.theta)


@pytest.mark.parametrize("reduction", ["sum", "mean"])
@pytest.mark.parametrize("matrices", ["identity", "qk", "qk_and_v"])
def test_identical_heads_are_one_head_averaged_or_h_times_one_summed(reduction, matrices):
    """H copies of one head: their mean is that head, their sum H times it. Summing H equal numbers
    rounds at most H - 1 times, each by half an ulp of a sum at most H |a|: within H^2 eps |a|.
    (With V = I the heads' weights are summed before the product with x: the same bound.)"""
    theta, beta, qk, v = draw(h=1)
    count = 4
    qk = None if matrices == "identity" else qk
    v = v if matrices == "qk_and_v" else None
    copies = [None if m is None else m.expand(-1, count, -1, -1) for m in (qk, v)]
    many = heads.attention_vector(theta, beta, *copies, count, "sa", reduction)
    one = heads.attention_vector(theta, beta, qk, v, 1, "sa", reduction)
    scale = count if reduction == "sum" else 1
    bound = count ** 2 * torch.finfo(torch.float64).eps * one.abs().max() * scale
    assert (many - scale * one).abs().max() <= bound
    other = draw(h=count, seed=1)[2:]
    distinct = heads.attention_vector(theta, beta, other[0], other[1] if v is not None else None, count, "sa",
                                      reduction)
    assert (distinct - scale * one).abs().max() > 1e-3  # different heads do differ


@pytest.mark.parametrize("mask", ["full", "causal"])
@pytest.mark.parametrize("matrices", ["identity", "random"])
def test_a_window_of_width_n_is_no_window_bit_for_bit(mask, matrices):
    theta, beta, qk, v = draw(n=6)
    if matrices == "identity":
        qk = v = None
    count = 1 if qk is None else H
    def vector(window: int | None) -> torch.Tensor:
        hidden = heads.hidden_keys(6, mask, window, theta.device)
        return heads.attention_vector(theta, beta, qk, v, count, "sa", "sum", hidden)

    assert torch.equal(vector(None), vector(6))
    assert not torch.equal(vector(None), vector(5))  # a window of n - 1 hides the corners


@pytest.mark.parametrize("name", ["post_ln", "pre_ln", "ngpt"])
def test_the_euler_layer_turns_by_atan_of_the_tangent_over_one_plus_the_radial_part(name):
    """docs/papers/normalization.md, the Euler layer's clock: a layer turns theta toward P w by
    phi = atan(dt |P w| / (1 + dt <theta, w>)), w = A / s (Post-LN A, Pre-LN A / r, nGPT alpha A / |A|),
    exactly; float64 angles of O(0.1) from acos near 1 lose about sqrt(eps)/phi, so 1e-7."""
    theta, beta, qk, v = draw()
    r = torch.tensor([[1.0, 1.5, 0.7, 2.0, 1.1]] * 2, dtype=torch.float64)
    dt = 0.1
    out = stepper(Scheme(name, alpha=0.3), "euler", dt, field_of(beta, qk, v))(0, State(theta, r), None)
    for b in range(2):
        th = theta[b].numpy()
        a = attention_loops(th, float(beta[b]), qk[b].numpy(), v[b].numpy(), "sa", "sum")
        w = {"post_ln": a, "pre_ln": a / r[b].numpy()[:, None],
             "ngpt": 0.3 * a / np.linalg.norm(a, axis=-1, keepdims=True)}[name]
        radial = (th * w).sum(-1)
        tangent = np.linalg.norm(w - radial[:, None] * th, axis=-1)
        turned = np.arccos(np.clip((th * out.theta[b].numpy()).sum(-1), -1, 1))
        np.testing.assert_allclose(turned, np.arctan2(dt * tangent, 1 + dt * radial), rtol=0, atol=1e-7)
        assert np.abs(radial).max() > 0.1  # the radial part is there to count: the test can fail
