"""Tests of the attention layer and its observables (critical_scaling/kernel.py, paper 000).

Independent truths used here:

- the exact finite-n simplex closed forms of ``theory`` (themselves checked against a
  complex-step Jacobian in tests/experiments/test_critical_scaling_theory.py) on exact simplex tokens;
- a dense Jacobian from ``torch.func.jacrev`` and forward-mode ``torch.func.jvp`` of a
  plain reference layer written here (``torch.softmax``, no blocking, no hand-written JVP);
- identities: ``||J||_F^2`` is the sum of ``||J e_k||^2`` over the standard basis, uniform
  attention has participation ratio n, and float32 must agree with float64.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import numpy as np
import pytest
import torch

from attnsweep.experiments.critical_scaling import kernel, theory
from attnsweep.experiments.critical_scaling.simulate import draw_probes, draw_tokens

BIG = 1 << 30  # one block: no chunking
F64 = torch.float64


# ------------------------------------------------------------------ reference layer


def reference_layer(x: torch.Tensor, beta: float, alpha: float = 0.0) -> torch.Tensor:
    """``X' = ATT(N(X)) + alpha X`` (Eqs. 3-5), written plainly with ``torch.softmax``."""
    y = x / x.norm(dim=-1, keepdim=True)
    attn = torch.softmax(beta * (y @ y.T), dim=-1)
    return attn @ y + alpha * x


def dense_jacobian(x: torch.Tensor, beta: float, alpha: float = 0.0) -> torch.Tensor:
    """``d X' / d X`` as an (nd, nd) matrix from ``torch.func.jacrev``."""
    n, d = x.shape
    jac = torch.func.jacrev(lambda x_: reference_layer(x_, beta, alpha))(x)
    return jac.reshape(n * d, n * d)


def gaussian_tokens(n: int, d: int, rho: float, seed: int, dtype=F64) -> torch.Tensor:
    """Eq. 25 tokens with the experiment's own draws (z ~ N(0, I_d/d))."""
    z0, z = draw_tokens(n, d, seed, "scaled")
    return (math.sqrt(rho) * z0 + math.sqrt(1 - rho) * z).to(dtype)


def rademacher(m: int, n: int, d: int, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return (torch.randint(0, 2, (m, n, d), generator=gen) * 2 - 1).to(F64)


def observe(x, gammas, alphas, probes, budget=BIG, lambda_pairs=None):
    n = x.shape[0]
    beta = torch.tensor([g * math.log(n) for g in gammas], dtype=x.dtype)
    alpha = torch.tensor(alphas, dtype=x.dtype)
    probes = None if probes is None else probes.to(x.dtype)  # None: exact eta
    return kernel.observe(x, beta, alpha, probes, lambda_pairs, torch.arange(n), budget)


# ------------------------------------------------------------------ simplex closed forms


@pytest.mark.parametrize(
    "n, d, rho, q",
    [(8, 8, 0.0, 1.0), (8, 10, 0.3, 1.0), (12, 12, 0.6, 2.5), (10, 13, 0.9, 0.5)],
)
def test_lambda_on_simplex_matches_closed_form(n, d, rho, q):
    """Truth: theory.simplex_lambda (Lemmas A.3-A.4 extended by the residual) on exact simplex tokens.

    gamma spans both sides of gamma_c = 1/(1 - rho); alpha > 0 makes q matter.
    """
    gc = 1 / (1 - rho)
    gammas = [0.0, 0.5 * gc, gc, 1.5 * gc, 3.0 * gc]
    alphas = [0.0, 0.3, 1.0]
    x = torch.tensor(theory.simplex_tokens(n, d, rho, q))
    obs = observe(x, gammas, alphas, rademacher(2, n, d, 0))
    expected = theory.simplex_lambda(n, rho, np.array(gammas)[:, None], np.array(alphas)[None, :], q)
    np.testing.assert_allclose(obs.lam.numpy(), expected, rtol=1e-6, atol=1e-6)

    # the all-pairs helper on its own, with a batch axis of outputs
    y = kernel.normalize(x)
    y_out = kernel.normalize(reference_layer(x, gammas[3] * math.log(n), alphas[1]))
    lam = kernel.angle_ratio_all_pairs(y, y_out[None], BIG)
    np.testing.assert_allclose(lam.numpy(), [expected[3, 1]], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("n", [6, 9, 12])
@pytest.mark.parametrize("extra_d", [0, 2])
@pytest.mark.parametrize("rho, q", [(0.0, 1.0), (0.5, 1.0), (0.8, 2.0)])
def test_eta_standard_basis_is_exact_on_simplex(n, extra_d, rho, q):
    """Truth: theory.simplex_eta (corrected Eq. 86). The nd standard basis vectors as probes
    make sum_k ||J e_k||^2 = ||J||_F^2 exactly, so no Monte Carlo error is involved."""
    d = n + extra_d
    gc = 1 / (1 - rho)
    gammas = np.array([0.0, 0.5 * gc, gc, 2.0 * gc])
    x = torch.tensor(theory.simplex_tokens(n, d, rho, q))
    basis = torch.eye(n * d, dtype=F64).reshape(n * d, n, d)
    beta = torch.tensor(gammas * math.log(n))
    sq, dot = kernel.jacobian_probe_norms(x, beta, basis, BIG)
    eta = sq.sum(-1) / (n * d)
    expected = theory.simplex_eta(n, d, rho, gammas, q)
    np.testing.assert_allclose(eta.numpy(), expected, rtol=1e-6, atol=1e-12)
    frob = kernel.jacobian_frobenius(x, beta, BIG).frob
    np.testing.assert_allclose(frob.numpy() / (n * d), expected, rtol=1e-6, atol=1e-12)
    # <J e_k, e_k> summed is the trace of J: check it against the dense Jacobian.
    for b, g in enumerate(gammas):
        trace = torch.trace(dense_jacobian(x, float(g * math.log(n))))
        np.testing.assert_allclose(dot[b].sum().item(), trace.item(), rtol=1e-9, atol=1e-12)


# ------------------------------------------------------------------ exact eta vs dense


@pytest.mark.parametrize(
    "n, d, rho, budget",
    [
        (7, 3, 0.0, BIG),  # n <= d^2: sum_lm A_il A_im G_lm^2 through the squared Gram matrix
        (9, 5, 0.6, 600),  # the same, one row per block
        (10, 4, 0.3, 600),  # Gram matrix over budget: through y_l (x) y_l, chunked
        (6, 2, 0.9, BIG),  # n > d^2 on the circle: through y_l (x) y_l
        (5, 12, 0.2, BIG),  # d > n
    ],
)
def test_exact_frobenius_and_trace_match_dense_jacobian(n, d, rho, budget):
    """Truth: ||J||_F^2 and tr J of the dense jacrev Jacobian, float64, to 1e-10 relative,
    from uniform attention (gamma 0) to nearly one-hot attention (gamma 12)."""
    x = gaussian_tokens(n, d, rho, seed=1)
    gammas = [0.0, 0.7, 2.0, 5.0, 12.0]
    beta = torch.tensor([g * math.log(n) for g in gammas], dtype=F64)
    _, _, frob, trace = kernel.jacobian_frobenius(x, beta, budget)
    for b in range(len(gammas)):
        jac = dense_jacobian(x, beta[b].item())
        np.testing.assert_allclose(frob[b].item(), jac.square().sum().item(), rtol=1e-10)
        np.testing.assert_allclose(trace[b].item(), jac.trace().item(), rtol=1e-10, atol=1e-12)


def test_observe_exact_eta_with_residual_matches_dense_jacobian():
    """Truth: ||J + alpha I||_F^2 / (nd) from the dense Jacobian of ATT(N(X)) + alpha X."""
    n, d = 12, 5
    x = torch.randn(n, d, generator=torch.Generator().manual_seed(3), dtype=F64)
    gammas, alphas = [1.0, 4.0], [0.0, 0.5, 2.0]
    obs = observe(x, gammas, alphas, None)
    assert obs.eta_probe is None
    for b, g in enumerate(gammas):
        for a, al in enumerate(alphas):
            jac = dense_jacobian(x, g * math.log(n), al)
            np.testing.assert_allclose(obs.eta[b, a].item(), (jac.square().sum() / (n * d)).item(), rtol=1e-10)


def test_span_coordinates_change_no_observable():
    """Truth: the same observables in R^d. For d > n + 1 the exact path works in the (n + 1)-
    dimensional span of z_0, z_i (an isometry): every observable agrees to 1e-10, float64."""
    n, d = 20, 50
    z0, z = draw_tokens(n, d, 3, "scaled")
    z0_s, z_s = kernel.span_coordinates(z0, z)
    assert z_s.shape == (n, n + 1)
    gammas, alphas = [0.5, 2.0, 8.0], [0.0, 0.7]
    for rho in (0.0, 0.6):
        x = math.sqrt(rho) * z0 + math.sqrt(1 - rho) * z
        x_s = math.sqrt(rho) * z0_s + math.sqrt(1 - rho) * z_s
        beta = torch.tensor([g * math.log(n) for g in gammas], dtype=F64)
        alpha = torch.tensor(alphas, dtype=F64)
        full = kernel.observe(x, beta, alpha, None, None, torch.arange(n), BIG)
        span = kernel.observe(x_s, beta, alpha, None, None, torch.arange(n), BIG, dim=d)
        for key, value in _observables(full).items():
            np.testing.assert_allclose(_observables(span)[key], value, rtol=1e-10, atol=1e-12, err_msg=key)


def test_hutchinson_agrees_with_exact_beyond_dense_sizes():
    """The two estimators of Eq. 27 on n = 96, d = 12 (no dense Jacobian needed): the mean
    over 48 probes lies within 4 standard errors of the exact value, for every gamma."""
    n, d, m = 96, 12, 48
    x = gaussian_tokens(n, d, 0.5, seed=4)
    gammas = [0.5, 2.0, 4.0, 10.0]
    obs_exact = observe(x, gammas, [0.0], None)
    obs_hutch = observe(x, gammas, [0.0], draw_probes(n, d, 4, m))
    for b in range(len(gammas)):
        per_probe = obs_hutch.eta_probe[b, 0]
        se = per_probe.std().item() / math.sqrt(m)
        assert abs(per_probe.mean().item() - obs_exact.eta[b, 0].item()) < 4 * se


# ------------------------------------------------------------------ Hutchinson vs dense


@pytest.mark.parametrize("gamma", [0.5, 2.0, 6.0])
def test_hutchinson_eta_agrees_with_dense_jacobian(gamma):
    """Truth: ||J||_F^2 / (nd) from torch.func.jacrev of the reference layer.

    The Hutchinson mean over m = 64 Rademacher probes must lie within 4 standard errors
    (sample std of the per-probe values / sqrt(m)); fixed generator, so not flaky. Each
    per-probe value must also equal ||J v||^2 / (nd) from the dense J exactly (1e-10).
    """
    n, d, m = 12, 5, 64
    x = torch.randn(n, d, generator=torch.Generator().manual_seed(1), dtype=F64)
    beta = gamma * math.log(n)
    probes = rademacher(m, n, d, 2)
    sq, dot = kernel.jacobian_probe_norms(x, torch.tensor([beta], dtype=F64), probes, BIG)
    per_probe = sq[0] / (n * d)
    jac = dense_jacobian(x, beta)
    eta_dense = (jac.square().sum() / (n * d)).item()
    se = per_probe.std().item() / math.sqrt(m)
    assert abs(per_probe.mean().item() - eta_dense) < 4 * se

    jv = probes.reshape(m, n * d) @ jac.T
    np.testing.assert_allclose(sq[0].numpy(), jv.square().sum(-1).numpy(), rtol=1e-10)
    np.testing.assert_allclose(dot[0].numpy(), (jv * probes.reshape(m, n * d)).sum(-1).numpy(), rtol=1e-10, atol=1e-12)


def test_observe_eta_with_residual_agrees_with_dense_jacobian():
    """Truth: dense Jacobian of X -> ATT(N(X)) + alpha X (jacrev), so the <Jv, v> cross term
    and the alpha^2 ||v||^2 term of observe are checked, per probe exactly and in mean
    within 4 standard errors of ||J + alpha I||_F^2 / (nd)."""
    n, d, m = 12, 5, 64
    x = torch.randn(n, d, generator=torch.Generator().manual_seed(3), dtype=F64)
    gammas, alphas = [1.0, 4.0], [0.0, 0.5, 2.0]
    probes = rademacher(m, n, d, 4)
    obs = observe(x, gammas, alphas, probes)
    flat = probes.reshape(m, n * d)
    for b, g in enumerate(gammas):
        for a, al in enumerate(alphas):
            jac = dense_jacobian(x, g * math.log(n), al)
            exact = (flat @ jac.T).square().sum(-1) / (n * d)
            per_probe = obs.eta_probe[b, a]
            np.testing.assert_allclose(per_probe.numpy(), exact.numpy(), rtol=1e-10)
            eta_dense = (jac.square().sum() / (n * d)).item()
            se = per_probe.std().item() / math.sqrt(m)
            assert abs(per_probe.mean().item() - eta_dense) < 4 * se


def test_probe_norms_match_vmap_of_jvp():
    """Truth: torch.func.vmap(torch.func.jvp) of the reference layer, to 1e-10 in float64."""
    n, d, m = 10, 4, 8
    x = torch.randn(n, d, generator=torch.Generator().manual_seed(5), dtype=F64)
    probes = rademacher(m, n, d, 6)
    gammas = [0.0, 1.0, 3.0, 8.0]
    beta = torch.tensor([g * math.log(n) for g in gammas], dtype=F64)
    sq, dot = kernel.jacobian_probe_norms(x, beta, probes, BIG)

    def along_probes(layer: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
        return torch.func.vmap(lambda v: torch.func.jvp(layer, (x,), (v,))[1])(probes)

    for b, g in enumerate(gammas):
        jv = along_probes(functools.partial(reference_layer, beta=g * math.log(n)))
        np.testing.assert_allclose(sq[b].numpy(), jv.square().sum((-1, -2)).numpy(), rtol=1e-10, atol=1e-14)
        np.testing.assert_allclose(dot[b].numpy(), (jv * probes).sum((-1, -2)).numpy(), rtol=1e-10, atol=1e-12)
    # int8 probes (what draw_probes returns) give exactly the float64-probe values
    sq8, dot8 = kernel.jacobian_probe_norms(x, beta, probes.to(torch.int8), BIG)
    assert torch.equal(sq8, sq) and torch.equal(dot8, dot)


# ------------------------------------------------------------------ precision and chunking


def _observables(obs: kernel.LayerObservables) -> dict[str, np.ndarray]:
    values = {
        "lambda": obs.lam.double().numpy(),
        "eta": obs.eta.double().numpy(),
        "n_eff": obs.n_eff.double().numpy(),
        "cos_in": obs.cos_in.double().numpy(),
        "cos_out": obs.cos_out.double().numpy(),
        "eta_plateau": obs.eta_plateau.double().numpy(),
    }
    if obs.eta_probe is not None:
        values["eta_probe"] = obs.eta_probe.double().numpy()
    return values


def float32_layer_tolerance(n: int, d: int, beta: float) -> float:
    """float32's error in an observable of one layer, relative (absolute for a cosine): a score
    beta <y_i, y_j> is a d-term dot product of tokens normalised to within u, off by about
    beta (d + 2) u, which the softmax makes the relative error of a weight; the sums over n tokens
    add about n u; the observables (centred pair distances and their ratios, participation
    ratios, Jacobian norms from weights and Gram sums) are well-conditioned functions of these."""
    return (beta * (d + 2) + n) * 2.0**-24


@pytest.mark.parametrize("exact", [True, False], ids=["exact", "hutchinson"])
@pytest.mark.parametrize("rho", [0.0, 0.5, 0.9, 0.95])
@pytest.mark.parametrize("d", [3, 4, 16, 64])
def test_float32_agrees_with_float64(rho, d, exact):
    """Truth: the float64 run. Eq. 25 Gaussian tokens, n = 128, gamma up to 12, alpha 0 and 0.5:
    every observable within :func:`float32_layer_tolerance` at the largest beta, relatively
    (absolutely for the cosine quantiles, of scale 1 and near 0 for rho = 0)."""
    n = 128
    x = gaussian_tokens(n, d, rho, seed=0)
    probes = None if exact else draw_probes(n, d, 0, 8).to(F64)
    gammas, alphas = [0.5, 2.0, 5.0, 12.0], [0.0, 0.5]
    o64 = _observables(observe(x, gammas, alphas, probes))
    o32 = _observables(observe(x.float(), gammas, alphas, probes))
    tol = float32_layer_tolerance(n, d, max(gammas) * math.log(n))
    for key in o64:
        atol = tol if key.startswith("cos") else 0.0
        np.testing.assert_allclose(o32[key], o64[key], rtol=tol, atol=atol, err_msg=key)


def test_lambda_float32_stable_near_rho_one():
    """rho = 0.95, n = 64: every 1 - cos is ~0.05 in, and ~5e-7 out deep in the subcritical
    phase (lambda ~ 1e-5), where 1 - <y'_i, y'_j> formed directly in float32 is off by ~3e-3
    relative (measured on these tokens). The centred-Gram form must keep float32 lambda
    within :func:`float32_layer_tolerance` (3.4e-4 at beta = 40 log 64) of float64."""
    n, d = 64, 32
    x = gaussian_tokens(n, d, 0.95, seed=1)
    gammas = [0.25, 1.0, 5.0, 20.0, 40.0]
    lam64 = observe(x, gammas, [0.0], rademacher(1, n, d, 0)).lam.numpy()
    lam32 = observe(x.float(), gammas, [0.0], rademacher(1, n, d, 0)).lam.double().numpy()
    assert lam64.min() < 1e-3  # the subcritical point is really in the hard regime
    np.testing.assert_allclose(lam32, lam64, rtol=float32_layer_tolerance(n, d, max(gammas) * math.log(n)))


def test_chunked_equals_unchunked():
    """Truth: the one-block computation. A 4 KiB budget forces one row per block in every
    blocked loop (attention, all-pair sums, pair chunks, JVP); float64 agreement to 1e-12."""
    n, d = 40, 6
    x = gaussian_tokens(n, d, 0.4, seed=2)
    gammas, alphas = [0.5, 2.0, 7.0], [0.0, 1.0]
    gen = torch.Generator().manual_seed(0)
    pairs = kernel.pair_sample(n, 300, gen)
    for lambda_pairs, probes in ((None, draw_probes(n, d, 2, 5)), (pairs, None)):
        small = _observables(observe(x, gammas, alphas, probes, budget=4096, lambda_pairs=lambda_pairs))
        large = _observables(observe(x, gammas, alphas, probes, budget=BIG, lambda_pairs=lambda_pairs))
        for key in small:
            np.testing.assert_allclose(small[key], large[key], rtol=1e-12, atol=1e-15, err_msg=key)


def test_row_blocks_cover_range():
    """Blocks are contiguous, cover range(n) once and respect the budget (at least one row)."""
    for n, per_row, budget in [(10, 8, 24), (10, 100, 1), (7, 1, 1 << 20), (1, 5, 5)]:
        blocks = kernel.row_blocks(n, per_row, budget)
        assert [i for s in blocks for i in range(s.start, s.stop)] == list(range(n))
        assert all(s.stop - s.start <= max(1, budget // per_row) for s in blocks)


def test_cosine_quantiles_match_numpy():
    """Truth: numpy.quantile (linear interpolation) of <y_i, y_j> over all i < j of the token
    subset, for all tokens and for a subset, with a batch axis."""
    n, d = 30, 5
    y = kernel.normalize(torch.randn(2, n, d, generator=torch.Generator().manual_seed(9), dtype=F64))
    levels = torch.tensor(kernel.QUANTILES, dtype=F64)
    for tokens in (torch.arange(n), torch.tensor([0, 3, 4, 10, 17, 29])):
        got = kernel.cosine_quantiles(y, tokens, levels).numpy()
        sub = y[:, tokens].numpy()
        i, j = np.triu_indices(len(tokens), k=1)
        cos = (sub[:, i] * sub[:, j]).sum(-1)
        np.testing.assert_allclose(got, np.quantile(cos, kernel.QUANTILES, axis=-1).T, rtol=1e-12, atol=1e-15)


# ------------------------------------------------------------------ n_eff


def test_n_eff_limits():
    """Truth: participation ratio of uniform attention (beta = 0) is n; of one-hot
    self-attention (beta huge, distinct tokens) is 1."""
    n, d = 20, 5
    x = torch.randn(n, d, generator=torch.Generator().manual_seed(7), dtype=F64)
    _, n_eff = kernel.attention_layer(x, torch.tensor([0.0, 1e5], dtype=F64), BIG)
    np.testing.assert_allclose(n_eff[0].item(), n, rtol=1e-12)
    np.testing.assert_allclose(n_eff[1].item(), 1.0, rtol=1e-12)


# ------------------------------------------------------------------ sampled pairs


def test_sampled_pairs_lambda_approximates_all_pairs():
    """Truth: the exact per-pair ratios over all ordered pairs, computed directly here.

    K pairs drawn uniformly with replacement give a mean with standard error sigma / sqrt(K),
    sigma the population std of the per-pair ratios; the sample mean must lie within 5 SE
    (fixed generator, so deterministic; 5 SE has two-sided probability 6e-7 anyway).
    """
    n, d, count = 60, 8, 4000
    x = gaussian_tokens(n, d, 0.5, seed=3)
    beta = torch.tensor([g * math.log(n) for g in (1.0, 2.0, 4.0)], dtype=F64)
    att, _ = kernel.attention_layer(x, beta, BIG)
    y, y_out = kernel.normalize(x), kernel.normalize(att)
    i, j = torch.triu_indices(n, n, offset=1)
    ratios = (y_out[:, i] - y_out[:, j]).square().sum(-1) / (y[i] - y[j]).square().sum(-1)  # (B, pairs)
    exact = kernel.angle_ratio_all_pairs(y, y_out, BIG)
    np.testing.assert_allclose(exact.numpy(), ratios.mean(-1).numpy(), rtol=1e-12)

    pi, pj = kernel.pair_sample(n, count, torch.Generator().manual_seed(11))
    assert bool(((pi != pj) & (pi >= 0) & (pi < n) & (pj >= 0) & (pj < n)).all())
    sampled = kernel.angle_ratio_pairs(y, y_out, pi, pj, BIG)
    se = ratios.std(-1, unbiased=False) / math.sqrt(count)
    assert bool(((sampled - exact).abs() < 5 * se).all()), (sampled, exact, se)


def test_pair_sample_is_uniform_over_ordered_pairs():
    """Truth: uniform over the n(n-1) ordered pairs; chi-square-free check of counts within
    6 binomial standard deviations of their mean (n = 5, 200000 draws)."""
    n, count = 5, 200_000
    i, j = kernel.pair_sample(n, count, torch.Generator().manual_seed(0))
    counts = torch.zeros(n, n)
    counts.index_put_((i, j), torch.ones(count), accumulate=True)
    assert counts.diagonal().sum() == 0
    p = 1 / (n * (n - 1))
    off = counts[~torch.eye(n, dtype=torch.bool)]
    assert ((off - count * p).abs() < 6 * math.sqrt(count * p * (1 - p))).all()


# ------------------------------------------------------------------ overflow


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_huge_beta_is_finite(dtype):
    """beta = 5000 overflows exp in both dtypes (gamma = 50 at n = 4096 gives beta ~ 416,
    already past float32's exp range); the log-space softmax must stay finite. In this deep
    supercritical limit ATT(y_i) = y_i, so lambda = 1 and n_eff = 1."""
    n, d = 16, 6
    x = gaussian_tokens(n, d, 0.5, seed=4, dtype=dtype)
    beta = torch.tensor([5000.0, 50 * math.log(4096)], dtype=dtype)
    alpha = torch.tensor([0.0, 1.0], dtype=dtype)
    probes = draw_probes(n, d, 4, 4).to(dtype)
    obs = kernel.observe(x, beta, alpha, probes, None, torch.arange(n), BIG)
    for name, value in vars(obs).items():
        assert torch.isfinite(value).all(), name
    np.testing.assert_allclose(obs.lam[0].double().numpy(), 1.0, rtol=1e-5)
    np.testing.assert_allclose(obs.n_eff[0].item(), 1.0, rtol=1e-5)


def test_observe_without_eta_is_the_layer_alone():
    """eta_method none: every other observable is the exact path's (float64; rtol 1e-12 covers
    the exact path forming the layer inside its Gram-matrix pass, a different order of the same
    sums), and eta is NaN."""
    n, d = 24, 6
    x = gaussian_tokens(n, d, 0.4, seed=5)
    beta = torch.tensor([0.5 * math.log(n), 3.0 * math.log(n)], dtype=F64)
    alpha = torch.tensor([0.0, 0.5], dtype=F64)
    exact = kernel.observe(x, beta, alpha, None, None, torch.arange(n), BIG)
    lean = kernel.observe(x, beta, alpha, None, None, torch.arange(n), BIG, eta=False)
    for key, value in _observables(exact).items():
        if key == "eta":
            assert torch.isnan(lean.eta).all()
        else:
            np.testing.assert_allclose(_observables(lean)[key], value, rtol=1e-12, atol=1e-14, err_msg=key)


# ------------------------------------------------------------------ query tokens


def test_query_tokens_are_the_whole_layer_at_those_rows():
    """query_tokens: the layer at m sampled rows with every token a key. Truth: the plain layer
    (``reference_layer``, torch.softmax over all n keys) at those rows, with lambda, n_eff and
    the cosine quantiles formed here over the pairs and rows among them, and eta_plateau over
    every token. float64; rtol 1e-12: the same sums in another order (about n eps)."""
    n, d, m = 40, 6, 12
    x = gaussian_tokens(n, d, 0.4, seed=6)
    queries = torch.randperm(n, generator=torch.Generator().manual_seed(2))[:m].sort().values
    gammas, alphas = (0.5, 2.0), (0.0, 0.5)
    beta = torch.tensor([g * math.log(n) for g in gammas], dtype=F64)
    lean = kernel.observe(x, beta, torch.tensor(alphas, dtype=F64), None, None, torch.arange(m), BIG, eta=False,
                          queries=queries)
    y = kernel.normalize(x)
    yq = y[queries]
    i, j = torch.triu_indices(m, m, offset=1)
    levels = torch.tensor(kernel.QUANTILES, dtype=F64)
    cos_in = torch.quantile((yq[i] * yq[j]).sum(-1), levels)
    np.testing.assert_allclose(lean.cos_in.numpy(), cos_in.numpy(), rtol=1e-12)
    for b, g in enumerate(beta.tolist()):
        attn = torch.softmax(g * (y @ y.T), dim=-1)[queries]
        np.testing.assert_allclose(lean.n_eff[b].item(), (1 / attn.square().sum(-1)).mean().item(), rtol=1e-12)
        for a, alpha in enumerate(alphas):
            out = kernel.normalize(reference_layer(x, g, alpha)[queries])
            ratios = (out[i] - out[j]).square().sum(-1) / (yq[i] - yq[j]).square().sum(-1)
            np.testing.assert_allclose(lean.lam[b, a].item(), ratios.mean().item(), rtol=1e-12)
            cos_out = torch.quantile((out[i] * out[j]).sum(-1), levels)
            # atol: a cosine near 0 is a sum of d = 6 products of unit-vector entries, each rounded
            # to about 1e-16
            np.testing.assert_allclose(lean.cos_out[b, a].numpy(), cos_out.numpy(), rtol=1e-12, atol=1e-15)
    plateau = (1 - 1 / d) * (1 / x.square().sum(-1)).mean()
    np.testing.assert_allclose(lean.eta_plateau.item(), plateau.item(), rtol=1e-12)
    with pytest.raises(ValueError, match="queries"):
        kernel.observe(x, beta, torch.tensor(alphas, dtype=F64), None, None, torch.arange(m), BIG, queries=queries)
