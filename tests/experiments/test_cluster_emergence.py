"""cluster_emergence (paper 004) and its engine (attnsweep.dynamics.rd, .attention) against
independent truth.

Truths: the identity P(x) = P(z) between Eq. 1.1 and Eq. 3.1 and the map between their fields;
the shrinking hull of V = I (Prop. 8.2) through support functions, and limit points at vertices
of the initial hull (Theorem 3.1); the exact range identity of Eq. 9.3 with left eigenvectors
from scipy; growing distances for V = I, Q^T K = I (Lemma 7.2); contraction to 0 and P -> 11^T/n
for V = -I (Theorem 8.5, Remark 8.6); fourth-order convergence of RK4; observables against
numpy and scipy brute force; hand-made point clouds for the theory module; job-cut and chunking
invariance of a whole simulate job; and the numbers of a real Snakemake run of the tiny config.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import scipy.linalg
import torch
from scipy.sparse.csgraph import connected_components
from scipy.spatial import ConvexHull
from scipy.spatial.distance import pdist

from attnsweep.dynamics import attention, rd
from attnsweep.errors import ConfigError
from attnsweep.experiments.cluster_emergence import theory

F64 = torch.float64


def uniform(*shape: int, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.rand(*shape, generator=gen, dtype=F64) * 2 - 1


def eye(batch: int, d: int, sign: float = 1.0) -> torch.Tensor:
    return sign * torch.eye(d, dtype=F64).expand(batch, d, d)


# Tiny tensors: a second intra-op thread only adds barriers (and stalls on a busy machine).
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def trajectory(y: torch.Tensor, equation: rd.Equation, qk: torch.Tensor | None, v: torch.Tensor, h: float,
               steps: int, integrator: rd.Integrator = "rk4") -> list[torch.Tensor]:
    step = rd.stepper(equation, integrator, qk, v, h)
    states = [y]
    for k in range(steps):
        states.append(step(k, states[-1]))
    return states


# ------------------------------------------------------------------ Eq. 1.1 against Eq. 3.1


def test_attention_and_fields_agree_between_x_and_z() -> None:
    """At one time: P(x) = P(z) with z = e^{-tV} x, and z' = e^{-tV}(x' - V x) (Eq. 3.1 from 1.1)."""
    x, m, qk, t = uniform(3, 7, 4, seed=1), uniform(3, 4, 4, seed=2), uniform(3, 4, 4, seed=3), 0.7
    v = (m + m.mT) / 2
    z = rd.to_rescaled(x, v, t)
    torch.testing.assert_close(rd.attention_at("rescaled", t, z, qk, v), rd.attention(x, qk), rtol=0, atol=1e-13)
    shrink = torch.linalg.matrix_exp(-t * v)
    expected = (rd.original_field(x, qk, v) - x @ v.mT) @ shrink.mT
    got = rd.rescaled_field(z, qk, v, torch.linalg.matrix_exp(t * v))
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-12)


def test_trajectories_of_x_and_z_give_the_same_p() -> None:
    """RK4 on Eq. 1.1 and on Eq. 3.1 (random Q^T K, symmetric V): the same P(t) up to O(h^4)."""
    x0, m, qk = uniform(2, 6, 3, seed=4), uniform(2, 3, 3, seed=5), uniform(2, 3, 3, seed=6)
    v = (m + m.mT) / 2
    x = trajectory(x0, "original", qk, v, 0.01, 100)[-1]
    z = trajectory(x0, "rescaled", qk, v, 0.01, 100)[-1]
    gap = (rd.attention_at("original", 1.0, x, qk, v) - rd.attention_at("rescaled", 1.0, z, qk, v)).abs().max()
    assert gap < 1e-9, gap


# ------------------------------------------------------------------ Remark 3.4 and Eq. 12.1


def test_discrete_map_is_the_rescaled_euler_map() -> None:
    """Remark 3.4: the map's z^[k] equals R^{-k} x^[k], x^[k] the Euler steps of Eq. 1.3 (Eq. 1.1
    with dt), R = I + V dt: random V and Q^T K, 30 steps."""
    x0, v, qk, h = 2 * uniform(3, 12, 3, seed=30), uniform(3, 3, 3, seed=31), uniform(3, 3, 3, seed=32), 0.1
    xs = trajectory(x0, "original", qk, v, h, 30, "euler")
    zs = trajectory(x0, "discrete", qk, v, h, 30, "euler")
    for k in (1, 10, 30):
        expected = torch.linalg.solve(rd.powers(v, h, k), xs[k].mT).mT
        torch.testing.assert_close(zs[k], expected, rtol=1e-9, atol=1e-9 * expected.abs().max().item())
        p = rd.attention_at("discrete", k * h, zs[k], qk, v, h)
        torch.testing.assert_close(p, rd.attention(xs[k], qk), rtol=0, atol=1e-9)


def test_discrete_map_for_v_identity_moves_into_the_hull() -> None:
    """Remark 3.4, V = I: z^[k+1] = (z^[k] + dt P z^[k]) / (1 + dt), inside conv{z^[k]}, so every
    support function max_i <u, z_i^[k]> is non-increasing."""
    z0, h = 2 * uniform(4, 10, 2, seed=33), 0.5
    v = eye(4, 2)
    zs = trajectory(z0, "discrete", None, v, h, 20, "euler")
    for k in (0, 7):
        p = rd.attention_at("discrete", k * h, zs[k], None, v, h)
        torch.testing.assert_close(zs[k + 1], (zs[k] + h * p @ zs[k]) / (1 + h), rtol=1e-12, atol=1e-12)
    u = torch.nn.functional.normalize(uniform(64, 2, seed=34), dim=-1)
    support = torch.stack([attention.support(z, u) for z in zs])
    assert (torch.diff(support, dim=0) <= 1e-12).all() and (support[-1] < support[0] - 1e-3).any()


def test_discrete_map_tends_to_eq_3_1_at_first_order() -> None:
    """Remark 3.4 as dt -> 0: z^[T/dt] approaches RK4 on Eq. 3.1 (h = 1e-3) with an error that
    halves with dt (Euler is first order), random symmetric V, Q = K = I, T = 1."""
    z0, m = uniform(2, 8, 2, seed=35), uniform(2, 2, 2, seed=36)
    v = (m + m.mT) / 2
    reference = trajectory(z0, "rescaled", None, v, 1e-3, 1000)[-1]
    errors = np.array([(trajectory(z0, "discrete", None, v, h, round(1 / h), "euler")[-1] - reference).abs().max()
                       for h in (0.1, 0.05, 0.025, 0.0125)])
    ratios = errors[:-1] / errors[1:]
    assert np.all((ratios > 1.7) & (ratios < 2.3)), ratios
    assert errors[-1] < 2 * 0.0125, errors  # O(dt) with a constant of order 1


def test_relu_with_identity_weight_only_moves_tokens_up() -> None:
    """Eq. 12.1, sigma = ReLU, W = I: z_i' >= 0 entrywise, so every coordinate of every token is
    non-decreasing along RK4 (positive stage weights), and some do increase."""
    z0, m = 5 * uniform(3, 20, 2, seed=37), uniform(3, 2, 2, seed=38)
    step = rd.stepper("nonlinear", "rk4", None, (m + m.mT) / 2, 0.1, "relu")
    states = [z0]
    for k in range(50):
        states.append(step(k, states[-1]))
    moves = torch.diff(torch.stack(states), dim=0)
    assert (moves >= 0).all() and (moves > 1e-3).any()


def test_relu_with_random_weight_moves_tokens_in_the_cone_of_w() -> None:
    """Eq. 12.1, sigma = ReLU, W random: every displacement z_i(T) - z_i(0) lies in the cone
    W R_+^d, i.e. W^{-1}(z_i(T) - z_i(0)) >= 0 (W outside sigma, not inside)."""
    z0, m, w = 5 * uniform(3, 20, 2, seed=39), uniform(3, 2, 2, seed=40), uniform(3, 2, 2, seed=41)
    step = rd.stepper("nonlinear", "rk4", None, (m + m.mT) / 2, 0.1, "relu", w)
    z = z0
    for k in range(50):
        z = step(k, z)
    coefficients = torch.linalg.solve(w[:, None], (z - z0)[..., None])[..., 0]
    assert (coefficients >= -1e-10).all() and (coefficients > 1e-3).any()


def test_tanh_bounds_the_speed_and_is_eq_3_1_for_small_tokens() -> None:
    """Eq. 12.1, sigma = tanh, W = I: |z_i(T) - z_i(0)|_inf <= T (|tanh| < 1); and for tokens of
    size eps it is Eq. 3.1 up to tanh(u) - u = O(u^3): the gap to Eq. 3.1, relative to eps, falls
    4-fold when eps halves (V > 0, so that z stays of size eps)."""
    z0, m = uniform(2, 10, 2, seed=42), uniform(2, 2, 2, seed=43)
    v = 3 * m @ m.mT + eye(2, 2)

    def run(equation: rd.Equation, scale: float, steps: int = 20) -> torch.Tensor:
        step = rd.stepper(equation, "rk4", None, v, 0.1, "tanh" if equation == "nonlinear" else None)
        z = scale * z0
        for k in range(steps):
            z = step(k, z)
        return z

    assert ((run("nonlinear", 20.0) - 20 * z0).abs().amax(-1) <= 2.0).all()
    gaps = np.array([((run("nonlinear", e) - run("rescaled", e)).abs().max() / e).item() for e in (0.1, 0.05, 0.025)])
    ratios = gaps[:-1] / gaps[1:]
    assert np.all((ratios > 3.3) & (ratios < 4.7)), (gaps, ratios)


# ------------------------------------------------------------------ invariants of the theorems


@pytest.mark.parametrize("positive_qk", [False, True])
def test_hull_shrinks_for_v_identity(positive_qk: bool) -> None:
    """Prop. 8.2: for V = I and Q^T K > 0, max_i <u, z_i(t)> is non-increasing for every u."""
    z0 = 2 * uniform(4, 10, 3, seed=7)
    g = uniform(4, 3, 3, seed=8)
    qk = g @ g.mT + 0.1 * eye(4, 3) if positive_qk else None
    u = torch.nn.functional.normalize(torch.randn(64, 3, generator=torch.Generator().manual_seed(9), dtype=F64), dim=-1)
    states = trajectory(z0, "rescaled", qk, eye(4, 3), 0.05, 100)
    support = torch.stack([attention.support(z, u) for z in states])
    assert (torch.diff(support, dim=0) <= 1e-12).all(), torch.diff(support, dim=0).max()
    assert (support[-1] < support[0] - 1e-3).any()  # it does shrink somewhere


def test_limit_points_are_vertices_of_a_polytope_inside_the_initial_hull() -> None:
    """Theorem 3.1 on a small case (V = I, Q = K = I, tokens U[-5, 5]^2): at T = 15 every token
    sits at its leader argmax_j P_ij, the leaders are the vertices of conv z(T), which lies in
    conv z(0). The leaders were vertices of conv z(0) and moved little (a leader drifts until
    the softmax saturates: up to 4% of the diameter here), so limit points are near those vertices."""
    z0 = 5 * uniform(3, 8, 2, seed=10)
    z = trajectory(z0, "rescaled", None, eye(3, 2), 0.1, 150)[-1]
    leaders = rd.attention_at("rescaled", 15.0, z, None, eye(3, 2)).argmax(-1)
    for b in range(3):
        start, end = z0[b].numpy(), z[b].numpy()
        diameter = pdist(start).max()
        np.testing.assert_allclose(end, end[leaders[b].numpy()], atol=1e-6 * diameter)
        corners = end[np.unique(leaders[b].numpy())]
        assert len(corners) < 3 or len(ConvexHull(corners).vertices) == len(corners)
        assert theory.vertex_fraction(end, 1e-6 * diameter) == 1.0
        assert theory.hull_excess(end, start) <= 1e-12
        initial = ConvexHull(start).vertices
        assert set(leaders[b].tolist()) <= set(initial.tolist())
        gap = np.linalg.norm(end[:, None] - start[initial][None], axis=-1).min(-1)
        assert gap.max() < 0.05 * diameter, gap / diameter


def left_dual(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Eigenvalues by decreasing real part and phi^* = psi^T / (psi^T phi), from scipy's left and
    right eigenvectors (real spectra)."""
    values, left, right = scipy.linalg.eig(v, left=True, right=True)
    order = np.argsort(-values.real)
    left, right = left[:, order].real, right[:, order].real
    right *= np.sign(right[np.abs(right).argmax(0), np.arange(len(v))])  # largest entry of phi_j > 0
    return values[order].real, (left / (left * right).sum(0)).T


def test_eq_9_3_range_of_each_eigen_coordinate() -> None:
    """Eq. 9.3: (1/lambda) d/dt phi^*(z_i) = sum_j P_ij (phi^*(z_j) - phi^*(z_i)) for any Q, K, so
    max_i phi^*(z_i) falls and min_i rises for lambda > 0; the range grows for lambda < 0."""
    s = uniform(1, 3, 3, seed=11)[0]
    v = (s @ torch.diag(torch.tensor([1.2, 0.3, -0.5], dtype=F64)) @ torch.linalg.inv(s))[None]
    qk = uniform(1, 3, 3, seed=12)
    values, dual = left_dual(v[0].numpy())
    basis = attention.eigenbasis(v)
    np.testing.assert_allclose(basis.values[0].real.numpy(), values, atol=1e-12)
    np.testing.assert_allclose(basis.dual[0].numpy(), dual, atol=1e-10)
    states = trajectory(2 * uniform(1, 9, 3, seed=13), "rescaled", qk, v, 0.05, 80)
    c = np.stack([(z[0].numpy() @ dual.T) for z in states])  # (time, token, mode)
    for j, lam in enumerate(values):
        top, bottom = np.diff(c[:, :, j].max(-1)), np.diff(c[:, :, j].min(-1))
        if lam > 0:
            assert (top <= 1e-12).all() and (bottom >= -1e-12).all(), (lam, top.max(), bottom.min())
        else:
            assert (top >= -1e-12).all() and (bottom <= 1e-12).all(), (lam, top.min(), bottom.max())
    z, t = states[20], 1.0
    p = rd.attention_at("rescaled", t, z, qk, v)[0].numpy()
    rate = rd.rescaled_field(z, qk, v, torch.linalg.matrix_exp(t * v))[0].numpy() @ dual.T
    np.testing.assert_allclose(rate, values * (p @ c[20] - c[20]), atol=1e-10)


def test_distances_grow_for_v_and_qk_identity() -> None:
    """Lemma 7.2: for V = I, Q^T K = I, ||x_i(t) - x_j(t)|| is non-decreasing (original tokens)."""
    states = trajectory(uniform(3, 8, 3, seed=14), "original", None, eye(3, 3), 0.01, 200)
    distances = torch.stack([torch.cdist(x, x) for x in states])
    assert (torch.diff(distances, dim=0) >= -1e-12).all()
    assert (distances[-1] > distances[0] + 0.1).any()


def test_minus_identity_contracts_to_the_origin() -> None:
    """Theorem 8.5 and Remark 8.6: V = -I, Q^T K = I: x_i -> 0 and P -> 11^T/n. The decay is slow
    (~ t^{-1/2}: near 0, x_i' ~ -C x_i with C the tokens' second moment); pairwise distances
    never grow (x_i' = -grad log sum_j e^{<x, x_j>} at x_i, a convex function)."""
    n = 6
    states = trajectory(uniform(2, n, 2, seed=15), "original", None, eye(2, 2, -1.0), 0.1, 600)
    norms = torch.stack([x.norm(dim=-1).amax(-1) for x in states])
    spread = torch.stack([(rd.attention(x, None) - 1 / n).abs().amax((-2, -1)) for x in states])
    distances = torch.stack([torch.cdist(x, x) for x in states])
    assert (torch.diff(norms, dim=0) <= 1e-12).all() and (torch.diff(spread, dim=0) <= 1e-12).all()
    assert (torch.diff(distances, dim=0) <= 1e-12).all()
    assert (norms[-1] < 0.2 * norms[0]).all() and (spread[-1] < 0.05 * spread[0]).all(), (norms[-1], spread[-1])


def test_rk4_is_fourth_order() -> None:
    """Errors at T = 2 for h = 0.1, 0.05, 0.025 against h = 0.1/32 shrink 16-fold per halving
    (Eq. 3.1, non-autonomous: e^{tV} at the stage times, V random non-symmetric)."""
    z0, v = uniform(2, 6, 3, seed=16), uniform(2, 3, 3, seed=17)

    def end(h: float) -> torch.Tensor:
        return trajectory(z0, "rescaled", None, v, h, round(2 / h))[-1]

    reference = end(0.1 / 32)
    errors = np.array([(end(h) - reference).abs().max().item() for h in (0.1, 0.05, 0.025)])
    ratios = errors[:-1] / errors[1:]
    assert np.all((ratios > 13) & (ratios < 19)), ratios


def test_centred_keys_keep_the_differences_of_a_huge_common_part() -> None:
    """Eq. 3.1 with V = diag(1, -3), Q = K = I and z_i = (1, e^{3t} delta_i): x_i = (e^t, delta_i),
    so <x_i, x_j> = e^{2t} + delta_i delta_j and P = softmax_j(delta_i delta_j) exactly; at t = 30
    e^{2t} ~ 1e26 holds no digit of delta_i delta_j, the centred keys hold all of them."""
    t, delta = 30.0, uniform(1, 6, seed=23)[0]
    v = torch.diag(torch.tensor([1.0, -3.0], dtype=F64)).expand(2, 2, 2)
    z = torch.stack([torch.ones(6, dtype=F64), np.exp(3 * t) * delta], -1).expand(2, 6, 2)
    expected = torch.softmax(delta[:, None] * delta[None, :], -1)
    torch.testing.assert_close(rd.attention_at("rescaled", t, z, None, v)[0], expected, rtol=1e-12, atol=0)
    uncentred = rd.attention(rd.to_original(z, torch.linalg.matrix_exp(t * v)), None)[0]
    assert (uncentred - expected).abs().max() > 0.01  # what the plain scores give


def test_resolution_of_the_scores() -> None:
    """resolved: the error is below 1, or every row's top score leads by more than error + 40."""
    logits = torch.tensor([[[0.0, 50.0], [60.0, 0.0]], [[0.0, 30.0], [60.0, 0.0]]], dtype=F64)
    assert attention.resolved(logits, torch.tensor([0.5, 0.5], dtype=F64)).tolist() == [1.0, 1.0]
    assert attention.resolved(logits, torch.tensor([5.0, 5.0], dtype=F64)).tolist() == [1.0, 0.0]
    y = torch.tensor([[[3.0, 4.0], [0.0, 1.0]]], dtype=F64)
    assert rd.score_error(y, None).item() == pytest.approx(25 * torch.finfo(F64).eps)


def test_scores_beyond_the_limit_are_flagged() -> None:
    """A system whose scores exceed LOGIT_LIMIT gets P = NaN (and so NaN tokens and observables);
    the other systems of the batch are untouched."""
    y = torch.stack([uniform(5, 2, seed=18), 1e151 * uniform(5, 2, seed=19)])
    p = rd.attention(y, None)
    assert torch.isnan(p[1]).all() and torch.isfinite(p[0]).all()
    torch.testing.assert_close(p[0], rd.attention(y[:1], None)[0], rtol=0, atol=0)
    states = trajectory(y, "rescaled", None, eye(2, 2, 3.0), 0.1, 3)
    assert torch.isnan(states[-1][1]).all() and torch.isfinite(states[-1][0]).all()
    for observable in (attention.numerical_rank(p), attention.boolean_defect(p), attention.leader_count(p)):
        assert torch.isnan(observable[1]) and torch.isfinite(observable[0])


# ------------------------------------------------------------------ observables


def planted_attention(batch: int, n: int, seed: int) -> np.ndarray:
    """Row-stochastic matrices: some softmax of random scores, some near-Boolean with few leaders."""
    gen = np.random.default_rng(seed)
    scores = gen.normal(size=(batch, n, n)) * gen.choice([0.5, 3.0, 40.0], size=(batch, 1, 1))
    leaders = gen.integers(0, 3, size=(batch, n))
    scores[::2] = -30.0
    np.put_along_axis(scores[::2], leaders[::2, :, None], 0.0, -1)
    p = np.exp(scores - scores.max(-1, keepdims=True))
    return p / p.sum(-1, keepdims=True)


def test_attention_observables_against_brute_force() -> None:
    p = planted_attention(24, 9, seed=20)
    tp = torch.tensor(p)
    rank, defect, leaders = attention.numerical_rank(tp), attention.boolean_defect(tp), attention.leader_count(tp)
    for b in range(len(p)):
        sigma = np.linalg.svd(p[b], compute_uv=False)
        assert rank[b] == np.linalg.matrix_rank(p[b], tol=1e-6 * sigma[0]) == (sigma > 1e-6 * sigma[0]).sum()
        assert defect[b] == pytest.approx(1 - p[b].max(1).min(), abs=1e-15)
        assert leaders[b] == len(np.unique(p[b].argmax(1)))
    assert set(rank[::2].tolist()) <= {1.0, 2.0, 3.0} and len(set(rank.tolist())) > 2


def test_defect_is_half_the_distance_to_the_nearest_boolean_pattern() -> None:
    """Against every one of the n^n row-stochastic Boolean matrices, in the max-row-sum norm."""
    n = 4
    p = planted_attention(12, n, seed=22)
    patterns = np.eye(n)[np.array(list(itertools.product(range(n), repeat=n)))]  # (n^n, n, n)
    distance = np.abs(p[:, None] - patterns[None]).sum(-1).max(-1).min(-1)
    np.testing.assert_allclose(2 * attention.boolean_defect(torch.tensor(p)).numpy(), distance, atol=1e-14)


def test_token_observables_against_brute_force() -> None:
    gen = np.random.default_rng(21)
    z = gen.uniform(-5, 5, size=(16, 12, 3))
    z[:, 4:8] = z[:, 4:5] + 1e-4 * gen.normal(size=(16, 4, 3))  # a planted cluster
    z[:, 9:] = z[:, :1] + 1e-6 * gen.normal(size=(16, 3, 3))  # another, around token 0
    radius = np.full(16, 1e-3)
    radius[::4] = 20.0  # one component
    counts = attention.cluster_count(torch.tensor(z), torch.tensor(radius))
    diameters = attention.diameter(torch.tensor(z))
    u = gen.normal(size=(5, 3))
    support = attention.support(torch.tensor(z), torch.tensor(u))
    for b in range(16):
        close = np.linalg.norm(z[b][:, None] - z[b][None], axis=-1) <= radius[b]
        assert counts[b] == connected_components(close, directed=False)[0]
        assert diameters[b] == pytest.approx(pdist(z[b]).max(), rel=1e-14)
        np.testing.assert_allclose(support[b].numpy(), (z[b] @ u.T).max(0), rtol=1e-14)
    assert counts[1] == 12 - 3 - 3 and counts[0] == 1
    c = gen.normal(size=(4, 10, 3))
    c[0, :, 1] = np.abs(c[0, :, 1])  # no token with a negative coordinate: an empty group
    mean, var = attention.moments(torch.tensor(c))
    for b, j in np.ndindex(4, 3):
        for g, tokens in enumerate((c[b, :, j] < 0, np.ones(10, bool), c[b, :, j] > 0)):
            values = c[b, tokens, j]
            expected = (values.mean(), values.var()) if len(values) else (np.nan, np.nan)
            np.testing.assert_allclose([mean[b, j, g], var[b, j, g]], expected, rtol=1e-13)


def test_eigenbasis_of_real_and_complex_spectra() -> None:
    """Real spectrum: the dual rows are the left eigenvectors over psi^T phi (scipy); a complex
    pair a +- ib: the real basis block-diagonalises V with [[a, b], [-b, a]]; V = I: the standard basis."""
    s = uniform(3, 3, seed=22)
    block = torch.tensor([[1.0, 0.0, 0.0], [0.0, 0.1, 0.08], [0.0, -0.08, 0.1]], dtype=F64)
    v = torch.stack([s @ block @ torch.linalg.inv(s), s @ torch.diag(torch.tensor([2.0, -1.0, 0.5], dtype=F64))
                     @ torch.linalg.inv(s), torch.eye(3, dtype=F64)])
    basis = attention.eigenbasis(v)
    np.testing.assert_allclose(basis.values[0].numpy(), [1.0, 0.1 + 0.08j, 0.1 - 0.08j], atol=1e-12)
    reduced = basis.dual[0] @ v[0] @ basis.vectors[0]
    np.testing.assert_allclose(reduced.numpy(), block.numpy(), atol=1e-12)
    u, w = basis.vectors[0, :, 1], basis.vectors[0, :, 2]
    assert abs(float(u @ w)) < 1e-12 and float(u @ u) >= float(w @ w)
    values, dual = left_dual(v[1].numpy())
    np.testing.assert_allclose(basis.values[1].real.numpy(), values, atol=1e-12)
    np.testing.assert_allclose(basis.dual[1].numpy(), dual, atol=1e-12)
    torch.testing.assert_close(basis.dual[2], torch.eye(3, dtype=F64))
    torch.testing.assert_close(torch.linalg.norm(basis.vectors[1], dim=0), torch.ones(3, dtype=F64))


# ------------------------------------------------------------------ theory module


def test_theory_on_hand_made_clouds() -> None:
    square = np.array([[0, 0], [1, 0], [0, 1], [1, 1], [0.5, 0.5], [0.5, 0.9]])
    assert theory.hull_vertices(square).tolist() == [0, 1, 2, 3]
    np.testing.assert_allclose(theory.boundary_distance(square), [0, 0, 0, 0, 0.5, 0.1], atol=1e-12)
    assert theory.vertex_fraction(square, 0.01) == pytest.approx(4 / 6)
    assert theory.limit_fraction(square, 0.2) == pytest.approx(5 / 6)  # the centre is 0.5 from all
    assert theory.limit_fraction(square - 0.5, 0.01) == pytest.approx(5 / 6)  # ... unless it is 0
    assert theory.hull_excess(np.array([[1.5, 0.5]]), square) == pytest.approx(0.5)
    assert theory.hull_excess(np.array([[0.5, 0.75]]), square) == pytest.approx(-0.25)
    line = np.array([[0.0, 0.0], [1.0, 1.0], [0.5, 0.5]])  # flat: all on the boundary
    assert theory.hull_vertices(line).tolist() == [0, 1] and theory.limit_fraction(line, 1e-9) == 1.0
    c = np.array([[-2.0], [-1.99], [0.001], [0.7], [3.0]])  # Theorem 4.2: {a, 0, b}
    assert theory.limit_fraction(c, 0.02) == pytest.approx(4 / 5)
    assert theory.levels(c[:, 0], 0.02) == 4 and theory.levels(c[:, 0], 1.0) == 3  # {-2, -1.99}, {0, 0.7}, {3}
    assert theory.orthant_fraction(square - [0.0, 0.5], 1e-12) == pytest.approx(4 / 6)
    assert theory.orthant_fraction(square - [0.0, 0.5], 0.5) == 1.0
    assert theory.contraction(square / 4, square) == pytest.approx(0.25)
    spectra = [[1, 1, -0.5], [1.35, -0.07], [1, 0.1 + 0.08j, 0.1 - 0.08j], [-1, -2], [1, -1], [1, 1, 1],
               [0.1 + 1j, 0.1 - 1j, 0.05]]
    assert [int(theory.dominant_multiplicity(s)) for s in spectra] == [2, 1, 1, 0, 0, 3, 0]


# ------------------------------------------------------------------ the experiment


def plan(section: dict, **top: object):
    from attnsweep.plan.config import load_sweep

    config = {"dtype": "float64", **top, "experiments": {"cluster_emergence": section}}
    return load_sweep(config).plans["cluster_emergence"]


@pytest.mark.parametrize(
    ("patch", "key"),
    [
        ({"value": "fixed"}, "v"),
        ({"v": [[1.0]]}, "v"),
        ({"value": "fixed", "v": [[1.0, 0.0], [0.0, 1.0]], "d": [2, 3]}, "d"),
        ({"value": "fixed", "v": [[1.0, 0.0]], "d": [2]}, "v"),
        ({"value": "spectrum", "spectrum": [1.0, [0.5, 0.2]], "d": [2]}, "spectrum"),
        ({"value": "spectrum", "spectrum": [1.0, [0.5, 0.0]], "d": [3]}, "spectrum"),
        ({"query_key": "fixed", "q": [[1.0, 0.0]], "k": [[1.0, 0.0], [0.0, 1.0]], "d": [2]}, "k"),
        ({"n": [8, 16]}, "snapshot_times"),
        ({"snapshot_times": [0, 20]}, "snapshot_times"),
        ({"dt": 20.0}, "dt"),
        ({"d": [0]}, "d"),
        ({"scale": [0.0]}, "scale"),
        ({"equation": "nonlinear", "basis": "standard"}, "activation"),
        ({"activation": "relu"}, "activation"),
        ({"weight": "uniform"}, "weight"),
        ({"equation": "nonlinear", "activation": "tanh"}, "basis"),
        ({"equation": "discrete"}, "integrator"),
        ({"equation": "implicit"}, "equation"),
    ],
)
def test_bad_options_are_refused_naming_the_key(patch: dict, key: str) -> None:
    with pytest.raises(ConfigError, match=rf"experiments\.cluster_emergence\.{key}\b"):
        plan({"n": [8], "d": [1], **patch})


def test_job_is_independent_of_job_cut_and_chunking(tmp_path: Path) -> None:
    """One job, one job per (n, d, scale, seed), and chunks of three and one systems give the same
    arrays bit for bit (random V and Q^T K keyed by (d, seed), tokens by (n, d, seed))."""
    from attnsweep.experiments.cluster_emergence.resources import system_bytes
    from attnsweep.reduce.aggregate import collect
    from attnsweep.run.job import run_job
    from attnsweep.stores.io import open_store

    section = {"n": [96], "d": [1, 3], "scale": [1.0, 5.0], "seeds": 2, "t_max": 1.0, "outputs": 3,
               "value": "symmetric", "query_key": "uniform", "snapshot_times": [0.0, 1.0]}
    assert all((1 << 20) // system_bytes(96, d, 8, "rk4") == 3 for d in (1, 3))  # 4 systems: chunks of 3 and 1
    sweeps = {}
    for name, block_mib, wildcards in (("single", 64, []), ("fanned", 64, ["n", "d", "scale", "seed"]),
                                       ("chunked", 1, ["n", "d"])):
        jobs = plan({**section, "wildcards": wildcards}, block_mib=block_mib).jobs()
        runs = [run_job(spec, tmp_path / name / f"{path}.zarr", device="cpu", progress=False)
                for path, spec in jobs.items()]
        sweeps[name] = open_store(collect(runs, tmp_path / name / "sweep.zarr")).load()
    ref = sweeps["single"]
    assert np.isfinite(ref["defect"].values).all() and np.isfinite(ref["attention_snapshot"].values).all()
    for other in ("fanned", "chunked"):
        for var in ref.data_vars:
            np.testing.assert_array_equal(sweeps[other][var].values, ref[var].values, err_msg=f"{other}: {var}")


def test_eigen_and_standard_bases_give_the_same_run() -> None:
    """Integrating in the real eigenbasis of V (basis: eigen) or in the tokens' coordinates gives
    the same numbers up to rounding while both resolve the digits (moderate spectrum, T = 3)."""
    from attnsweep.registry import get

    runs = {}
    for basis in ("eigen", "standard"):
        section = {"n": [10], "d": [3], "scale": [2.0], "seeds": 2, "t_max": 3.0, "outputs": 7, "basis": basis,
                   "value": "spectrum", "spectrum": [1.2, [-0.3, 0.5]], "query_key": "uniform",
                   "snapshot_times": [0.0, 3.0]}
        (spec,) = plan(section).jobs().values()
        runs[basis] = get("cluster_emergence").simulate(spec, torch.device("cpu"), F64, progress=False)
    for var in ("defect", "coordinate_mean", "coordinate_var", "snapshot", "attention_snapshot"):
        np.testing.assert_allclose(runs["eigen"][var].values, runs["standard"][var].values, rtol=1e-8, atol=1e-10,
                                   err_msg=var)
    assert (runs["eigen"]["resolved"] == 1).all()


def test_queries_and_keys_of_the_snapshots_give_p() -> None:
    """Fig. 4's clouds: softmax_j <Q x_i, K x_j> of the stored query and key snapshots (d = 2:
    every coordinate kept) is the stored P, for random Q = G G^T / d > 0, K = I and V > 0."""
    from attnsweep.registry import get

    section = {"n": [9], "d": [2], "scale": [2.0], "seeds": 2, "t_max": 2.0, "outputs": 3, "value": "gram",
               "query_key": "gram", "snapshot_times": [0.0, 1.0, 2.0]}
    (spec,) = plan(section).jobs().values()
    run = get("cluster_emergence").simulate(spec, torch.device("cpu"), F64, progress=False)
    q, k = (torch.from_numpy(run[var].values[..., :2]) for var in ("query_snapshot", "key_snapshot"))
    expected = torch.softmax(q @ k.mT, dim=-1).numpy()
    np.testing.assert_allclose(run["attention_snapshot"].values, expected, rtol=1e-10, atol=1e-12)
    assert not np.allclose(q, k)  # Q != K: the two clouds differ


@pytest.mark.parametrize("activation, weight", [("relu", None), ("tanh", "identity"), ("relu", "uniform")])
def test_eq_12_1_through_the_experiment(activation: str, weight: str | None) -> None:
    """equation: nonlinear in a simulate job: ReLU with W = I only moves tokens up (every stored
    coordinate non-decreasing between snapshots), tanh with W = I moves none faster than 1, a
    random W lets them move down; the theory records the observables of Fig. 18."""
    from attnsweep.registry import get

    section = {"n": [12], "d": [2], "scale": [5.0], "seeds": 2, "t_max": 3.0, "outputs": 4, "value": "symmetric",
               "equation": "nonlinear", "activation": activation, "weight": weight, "basis": "standard",
               "snapshot_times": [0.0, 1.0, 3.0]}
    (spec,) = plan(section).jobs().values()
    experiment = get("cluster_emergence")
    run = experiment.simulate(spec, torch.device("cpu"), F64, progress=False)
    z = run["snapshot"].values[..., :2]
    steps = np.diff(z, axis=-3)
    if weight == "uniform":
        assert (steps < -1e-6).any()
    elif activation == "relu":
        assert (steps >= 0).all() and (steps > 1e-3).any()
    else:
        assert (np.abs(z[..., -1, :, :] - z[..., 0, :, :]) <= 3.0).all()
    checks = experiment.part("reduction").theory(run)
    assert 0 <= float(checks["orthant_fraction"].squeeze()) <= 1 and float(checks["contraction"].squeeze()) > 0


@pytest.mark.slow
def test_tiny_run_reaches_the_theorems_limits(tiny_run) -> None:
    """The tiny config through Snakemake (the run test_experiments_e2e shares): a boundary per
    (n, d, a) whose numbers meet Theorems 2.1 and 3.1 and Prop. 8.2."""
    out = tiny_run("cluster_emergence") / "results" / "cluster_emergence"
    table = pd.read_csv(out / "boundary.csv")
    assert len(table) == 4 and set(table["d"]) == {1, 3} and set(table["scale"]) == {1.0, 5.0}
    assert table["t_star"].between(0, 10).all()
    # 4 seeds: no interval; a mean already Boolean at t = 0 crosses there, with nothing below it
    boolean = table["t_star"] == 0
    assert (table.loc[boolean, "t_star_flag"] == "reaches_grid_start").all()
    assert (table.loc[~boolean, "t_star_flag"] == "too_few_seeds").all()
    assert (table.loc[~boolean, "t_star_seeds"] == 4).all()
    small, large = (table[table["scale"] == a].set_index("d")["t_star"] for a in (1.0, 5.0))
    assert (large < small).all()  # a larger box is a lower temperature: P turns Boolean sooner
    assert (table["defect_final"] < 1e-6).all() and (table["rank_final"] == table["leaders_final"]).all()
    assert (table["limit_fraction"] == 1).all() and (table["vertex_fraction"] == 1).all()
    assert (table["hull_excess"] <= 1e-9).all()
    line = table[table["d"] == 1]
    assert (line["rank_bound"] == 2).all() and (line["rank_final"] <= 2).all()  # Theorem 2.1
