"""Tests of the paper-002 closed forms (mixture_training/theory.py).

Truth comes from outside the module: a small numpy forward of Eq. 1 on the exact L-token
population of Definition 2.1 (written here, independent of model.py), its explicit-Euler gradient
flow, finite differences of its loss, scipy ODE integration of the reduced stage-1 equations and
of the Gram system of docs/papers/002.md §3, SLSQP on the simplex, and hand-computed hull distances.
"""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest
from scipy.integrate import solve_ivp
from scipy.optimize import linprog, minimize
from scipy.special import softmax

from attnsweep.experiments.mixture_training import theory
from attnsweep.reduce.crossing import resampled_means

# ------------------------------------------------------------------ independent reference model


def population(K: int, L: int = 3) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every sequence of Definition 2.1 in one token order, equally likely: X (N, L, 2K) with tokens
    (c_k, y v_k, eps_i v_k'_i), labels y (N,), and the number of distractors with eps = -y (N,)."""
    eye = np.eye(2 * K)
    X, y, opposing = [], [], []
    for label in (1, -1):
        for k in range(K):
            others = [j for j in range(K) if j != k]
            for distractors in itertools.product(itertools.product(others, (1, -1)), repeat=L - 2):
                X.append([eye[k], label * eye[K + k]] + [eps * eye[K + j] for j, eps in distractors])
                y.append(label)
                opposing.append(sum(eps == -label for _, eps in distractors))
    return np.array(X, dtype=float), np.array(y, dtype=float), np.array(opposing)


def pooled(S: np.ndarray, X: np.ndarray) -> np.ndarray:
    """sum_l X softmax_h(x_h^T S x_l) (N, d): the attention average of every query, summed."""
    p = softmax(np.einsum("nhi,ij,nlj->nlh", X, S, X), axis=-1)
    return np.einsum("nlh,nhi->ni", p, X)


def heads(w: np.ndarray, S: np.ndarray, X: np.ndarray) -> np.ndarray:
    """H_+-(X) (2, N) for w (2, d), S (2, d, d)."""
    return np.stack([pooled(S[i], X) @ w[i] for i in range(2)])


def output(w: np.ndarray, S: np.ndarray, X: np.ndarray, b: float) -> np.ndarray:
    """f = ReLU(H_+ + b) - ReLU(H_- + b) (Eq. 1)."""
    H = heads(w, S, X) + b
    return np.maximum(H[0], 0.0) - np.maximum(H[1], 0.0)


def features(w: np.ndarray, S: np.ndarray, X: np.ndarray, b: float) -> np.ndarray:
    """F(X) = [s_+ sum X p^+ ; -s_- sum X p^- ; b (s_+ - s_-)] (Eq. 2), (N, 2d + 1)."""
    P = np.stack([pooled(S[i], X) for i in range(2)])
    on = (np.einsum("hni,hi->hn", P, w) + b > 0).astype(float)
    return np.concatenate([on[0, :, None] * P[0], -on[1, :, None] * P[1], (b * (on[0] - on[1]))[:, None]], 1)


def mean_loss(f: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean(np.logaddexp(0.0, -y * f)))


def stage1_weights(K: int, a: float, c: float) -> np.ndarray:
    """w_+ = c sum c_k + a sum v_k, w_- = c sum c_k - a sum v_k (the stage-1 symmetry, docs/papers/002.md §6)."""
    ones = np.ones(K)
    return np.stack([np.r_[c * ones, a * ones], np.r_[c * ones, -a * ones]])


# ------------------------------------------------------------------ stage 1


def reduced_stage1(K: int, b: float, times: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(a, c) of the reduced ODE of docs/papers/002.md §6, phase 1.1 until the event 2a = b, then phase 1.2."""
    opts = {"method": "DOP853", "rtol": 1e-12, "atol": 1e-14, "dense_output": True}

    def switch(t: float, z: np.ndarray) -> float:
        return 2.0 * z[0] - b

    switch.terminal = True
    first = solve_ivp(lambda t, z: [1.0 / (K * (1.0 + math.exp(4.0 * z[0])))], (0.0, times[-1]), [0.0],
                      events=switch, **opts)
    t_half = first.t_events[0][0]

    def phase2(t: float, z: np.ndarray) -> list[float]:
        g = 1.0 / (1.0 + math.exp(2.0 * z[0] + z[1] + b))
        return [g / (2.0 * K), g / (4.0 * K)]

    second = solve_ivp(phase2, (t_half, times[-1]), [first.y_events[0][0][0], 0.0], **opts)
    early = times <= t_half
    a = np.where(early, first.sol(np.minimum(times, t_half))[0], second.sol(np.maximum(times, t_half))[0])
    c = np.where(early, 0.0, second.sol(np.maximum(times, t_half))[1])
    return a, c


@pytest.mark.parametrize(("K", "b"), [(2, 0.5), (3, 0.5), (8, 0.5), (2, 0.25), (4, 1.0)])
def test_stage1_solves_its_reduced_ode(K: int, b: float) -> None:
    times = np.linspace(0.0, 12.0 * K, 97)
    a, c = reduced_stage1(K, b, times)
    closed = theory.stage1(times, K, b)
    np.testing.assert_allclose(closed["a"], a, rtol=0, atol=1e-10)
    np.testing.assert_allclose(closed["c"], c, rtol=0, atol=1e-10)


def euler_stage1(K: int, b: float, t_end: float, dt: float, times: np.ndarray) -> dict[str, np.ndarray]:
    """Explicit Euler of stage 1 on w_+- from 0 with the full population gradient of Eq. 1 at
    uniform attention (H = w^T sum_h x_h: the sum over L queries of the mean over L keys)."""
    X, y, opposing = population(K)
    s = X.sum(1)
    w = np.zeros((2, 2 * K))
    marks = set(np.rint(times / dt).astype(int).tolist())
    rows: dict[str, list] = {"w": [], "loss_pop": [], "loss_easy": [], "loss_hard": []}
    for step in range(round(t_end / dt) + 1):
        H = s @ w.T + b  # (N, 2)
        f = np.maximum(H[:, 0], 0.0) - np.maximum(H[:, 1], 0.0)
        if step in marks:
            rows["w"].append(w.copy())
            for name, mask in (("loss_pop", opposing >= 0), ("loss_easy", opposing == 0),
                               ("loss_hard", opposing > 0)):
                rows[name].append(mean_loss(f[mask], y[mask]))
        gy = y / (1.0 + np.exp(y * f)) / len(y)  # -dl(yf)/df, population mean
        w += dt * np.stack([(gy * (H[:, 0] > 0)) @ s, -(gy * (H[:, 1] > 0)) @ s])
    return {k: np.array(v) for k, v in rows.items()}


@pytest.mark.parametrize("K", [2, 3])
def test_stage1_matches_the_gradient_flow_of_the_model(K: int) -> None:
    """Euler (dt = 1e-3) of the population loss of Eq. 1 at S = 0, w_+- = 0: the symmetric
    reduction holds exactly and (a, c, losses) follow the closed form to O(dt), across T_0.5."""
    dt, b = 1e-3, 0.5
    times = np.array([0.5, 1.0, 2.0, 3.0, 4.0]) * K  # T_0.5 = 0.68 K
    sim = euler_stage1(K, b, times[-1], dt, times)
    w = sim["w"]  # (T, 2, d)
    np.testing.assert_allclose(w[:, 1, K:], -w[:, 0, K:], rtol=0, atol=1e-13)  # w_-^T v_k = -a
    np.testing.assert_allclose(w[:, 1, :K], w[:, 0, :K], rtol=0, atol=1e-13)  # w_-^T c_k = c
    np.testing.assert_allclose(w[:, 0], w[:, 0, [0] * K + [K] * K], rtol=0, atol=1e-13)  # same for every k
    closed = theory.stage1(times, K, b)
    np.testing.assert_allclose(w[:, 0, K], closed["a"], rtol=0, atol=1e-4)
    np.testing.assert_allclose(w[:, 0, 0], closed["c"], rtol=0, atol=1e-4)
    assert closed["c"][-1] > 0.1  # phase 1.2 reached
    for name in ("loss_pop", "loss_easy"):
        np.testing.assert_allclose(sim[name], closed[name], rtol=0, atol=1e-4)
    np.testing.assert_allclose(sim["loss_hard"], math.log(2.0), rtol=0, atol=1e-15)
    np.testing.assert_allclose(closed["loss_hard"], math.log(2.0), rtol=0, atol=0)


def test_stage1_phase_boundary_and_floor() -> None:
    assert theory.stage1_end(2, 0.5) == pytest.approx(math.e / 2, rel=1e-15)
    assert theory.stage1_end(8, 0.5) == pytest.approx(2 * math.e, rel=1e-15)
    for K, b in ((2, 0.5), (5, 0.25)):
        t_half = theory.stage1_end(K, b)
        at = theory.stage1(np.array([t_half * (1 - 1e-12), t_half, t_half * (1 + 1e-12)]), K, b)
        np.testing.assert_allclose(at["a"], b / 2, atol=1e-11)
        np.testing.assert_allclose(at["c"], 0.0, atol=1e-11)
        np.testing.assert_allclose(at["margin_easy"], 2 * b, atol=1e-11)  # 4a = u = 2b: continuous
    t = np.geomspace(1e-3, 1e12, 200)
    pop = theory.stage1(t, 3)["loss_pop"]
    assert np.all(np.diff(pop) < 0) and np.all(pop > theory.loss_floor())
    assert pop[-1] - theory.loss_floor() < 1e-9
    assert theory.loss_floor() == pytest.approx(0.34657359027997264, rel=1e-15)


def test_stage1_depends_on_t_over_K_and_keeps_the_shape_of_t() -> None:
    x = np.linspace(0, 20, 12).reshape(3, 4)
    two, eight = theory.stage1(2 * x, 2), theory.stage1(8 * x, 8)
    assert two["a"].shape == (3, 4)
    for name in two:
        np.testing.assert_allclose(two[name], eight[name], rtol=1e-13, atol=1e-15)
    with pytest.raises(ValueError):
        theory.stage1(-1.0, 2)


# ------------------------------------------------------------------ stage 2


def hard_loss(w: np.ndarray, S: np.ndarray, X: np.ndarray, y: np.ndarray, b: float) -> float:
    return mean_loss(output(w, S, X, b), y)


@pytest.mark.parametrize("K", [2, 3])
def test_stage2_drive_is_minus_the_hard_loss_gradient(K: int) -> None:
    """G_0 of docs/papers/002.md §6 equals -dL_hard/dS_+ at S = 0 (central differences of the numpy model, w
    from the stage-1 closed form at t = 5K); the - head's drive has its cross blocks negated."""
    b = 0.5
    one = theory.stage1(5.0 * K, K, b)
    a, W = float(one["a"]), float(one["c"])
    w = stage1_weights(K, a, W)
    X, y, opposing = population(K)
    X, y = X[opposing > 0], y[opposing > 0]
    d, h = 2 * K, 1e-5
    grad = np.zeros((2, d, d))
    for head, mu, nu in itertools.product(range(2), range(d), range(d)):
        step = np.zeros((2, d, d))
        step[head, mu, nu] = h
        grad[head, mu, nu] = (hard_loss(w, step, X, y, b) - hard_loss(w, -step, X, y, b)) / (2 * h)
    drive = theory.stage2_drive(K, W)
    in_V = np.arange(d) >= K
    flip = np.where(np.add.outer(in_V, in_V) == 1, -1.0, 1.0)  # (-1)^{[mu in V] + [nu in V]}
    np.testing.assert_allclose(-grad[0], drive, rtol=0, atol=1e-9)
    np.testing.assert_allclose(-grad[1], flip * drive, rtol=0, atol=1e-9)


@pytest.mark.parametrize("K", [2, 3, 8])
def test_stage2_linear_solves_the_gram_system(K: int) -> None:
    """dS = G Q~ + K~ G, dK~ = G S^T + S G^T, dQ~ = G^T S + S^T G (docs/papers/002.md §3) with G frozen at G_0,
    from S = 0, K~ = Q~ = omega^2 I, against the closed form, into sinh >> 1."""
    omega, W = 0.1, 0.19
    d = 2 * K
    G = theory.stage2_drive(K, W)
    alpha = W / (9 * (K - 1))

    def rhs(t: float, z: np.ndarray) -> np.ndarray:
        S, Kt, Qt = z.reshape(3, d, d)
        return np.concatenate([G @ Qt + Kt @ G, G @ S.T + S @ G.T, G.T @ S + S.T @ G]).ravel()

    z0 = np.concatenate([np.zeros(d * d), omega**2 * np.eye(d).ravel(), omega**2 * np.eye(d).ravel()])
    taus = np.linspace(0.0, 2.5 / alpha, 11)
    sol = solve_ivp(rhs, (0, taus[-1]), z0, t_eval=taus, method="DOP853", rtol=1e-12, atol=1e-16)
    S, Kt, Qt = sol.y.T.reshape(len(taus), 3, d, d).transpose(1, 0, 2, 3)
    closed = theory.stage2_linear(taus, K, omega, W)
    scale = omega**2 * math.cosh(5.0)
    for name, ref in (("S", S), ("K_tilde", Kt), ("Q_tilde", Qt)):
        assert closed[name].shape == (len(taus), d, d)
        np.testing.assert_allclose(closed[name], ref, rtol=0, atol=1e-9 * scale)
    same = np.einsum("tkk->t", S[:, :K, K:]) / K
    cross = (S[:, :K, K:].sum((1, 2)) - K * same) / (K * (K - 1))
    np.testing.assert_allclose(closed["s_same"], same, rtol=0, atol=1e-9 * scale)
    np.testing.assert_allclose(closed["s_cross"], cross, rtol=0, atol=1e-9 * scale)


def test_stage2_rate_and_time() -> None:
    K, omega, W = 3, 0.05, 0.2
    assert theory.stage2_rate(K, W) == pytest.approx(2 * W / 18, rel=1e-15)
    tau = theory.stage2_time(K, omega, W, s_star=1.0)
    assert float(theory.stage2_linear(tau, K, omega, W)["s_same"]) == pytest.approx(1.0, rel=1e-12)
    S = theory.stage2_linear(tau, K, omega, W)["S"]
    assert S.shape == (6, 6) and np.all(S[:K, :K] == 0) and np.all(S[K:, K:] == 0)


def test_stage_steps_match_the_defaults_and_grow_with_K_minus_1() -> None:
    n_1, n_2, n_3 = theory.stage_steps(2, 0.1, 0.1)
    assert (n_1, n_3) == (100, 2000) and 1900 < n_2 < 2200  # docs/papers/002.md §8: 100 / ~2000 / 2000
    omega = 0.1
    per_group = []
    for K in (2, 3, 4, 6, 8):
        n_1, n_2, _ = theory.stage_steps(K, omega, 0.1)
        assert n_1 == 50 * K
        per_group.append(n_2 / ((K - 1) * math.asinh(K / ((K - 1) * omega**2))))
    np.testing.assert_allclose(per_group, per_group[0], rtol=2e-3)  # W is K-free: t_1 / K = 5
    with pytest.raises(ValueError):
        theory.stage_steps(2, 0.1, 0.01)  # t_1 = 1 < T_0.5 = 1.36: W = 0


# ------------------------------------------------------------------ t* table and line fits


def test_reference_table_and_its_empirical_fit() -> None:
    table = theory.reference_tstar()
    assert table.shape == (4, 4) and table.loc[0.1, 2] == 109 and np.isnan(table.loc[0.01, 8])
    for omega, row in table.iterrows():
        row = row.dropna()
        Ks = row.index.to_numpy(dtype=float)
        np.testing.assert_allclose(theory.tstar_fit(Ks, omega), row.to_numpy(), rtol=0.06)
        B, K0 = theory.fit_linear_in_K(Ks, row.to_numpy())
        assert 0.7 < K0 < 0.82 and B == pytest.approx(29 + 12.6 * math.log(omega**-2), rel=0.05)


def test_line_fit_recovers_a_known_line() -> None:
    K = np.array([2.0, 3.0, 4.0, 8.0, 9.0])
    t = 30.0 * (K - 0.8)
    B, K0 = theory.fit_linear_in_K(K, t)
    assert B == pytest.approx(30.0, rel=1e-12) and K0 == pytest.approx(0.8, rel=1e-12)
    spoiled = t.copy()
    spoiled[-1] += 100.0
    assert theory.fit_linear_in_K(K, spoiled, weights=[1, 1, 1, 1, 0]) == pytest.approx((30.0, 0.8), rel=1e-12)
    spoiled[-1] = np.nan
    assert theory.fit_linear_in_K(K, spoiled) == pytest.approx((30.0, 0.8), rel=1e-12)
    assert all(math.isnan(x) for x in theory.fit_linear_in_K(K[:2], [1.0, np.nan]))


def test_bootstrap_interval_covers_the_truth() -> None:
    rng = np.random.default_rng(0)
    K = np.array([2.0, 3.0, 4.0, 8.0])
    B, K0, sigma, seeds = 90.0, 0.8, 15.0, 16
    hits = np.zeros(2)
    trials = 200
    for _ in range(trials):
        samples = B * (K[:, None] - K0) + sigma * rng.standard_normal((len(K), seeds))
        replicates = resampled_means(samples[..., None], 400, int(rng.integers(2**31)))[..., 0]  # (K, R)
        fit = theory.bootstrap_fit(K, samples.mean(1), replicates)
        assert fit.B_low <= fit.B <= fit.B_high and fit.K0_low <= fit.K0 <= fit.K0_high
        hits += [fit.B_low <= B <= fit.B_high, fit.K0_low <= K0 <= fit.K0_high]
    assert np.all(hits / trials > 0.85) and np.all(hits / trials < 0.995)
    replicates = resampled_means(samples[..., None], 50)[..., 0]
    never = np.r_[[np.full(50, np.nan)], replicates[1:]]
    unfinished = theory.bootstrap_fit(K, np.r_[np.nan, samples[1:].mean(1)], never)
    assert np.isfinite(np.array(unfinished)).all()  # a K that never crossed drops out of both fits


def test_a_flat_replicate_has_a_slope_but_no_k0() -> None:
    """A replicate that crossed at t = 0 at every K fits the line t* = 0: B = 0 and no K_0 (it was
    0/0, with numpy's warning). It counts in B's interval and not in K_0's."""
    K = np.array([2.0, 3.0])
    replicates = np.array([[10.0, 0.0, 10.0], [20.0, 0.0, 30.0]])  # lines (B, K_0): (10, 1), flat, (20, 1.5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fit = theory.bootstrap_fit(K, np.array([10.0, 20.0]), replicates)
    # a least-squares line through two points of small integers: a few ulp (1e-16 each) of roundoff
    assert (fit.B, fit.K0) == pytest.approx((10.0, 1.0), rel=1e-12)
    assert 0.0 <= fit.B_low < 10.0 < fit.B_high <= 20.0  # percentiles of {0, 10, 20}
    assert 1.0 <= fit.K0_low < fit.K0_high <= 1.5  # percentiles of {1, 1.5}


# ------------------------------------------------------------------ Lemma 6.1


@pytest.mark.parametrize("K", [2, 3, 8])
def test_lemma61_corrected_classifies_and_printed_does_not(K: int) -> None:
    X, y, opposing = population(K, 3)
    w, S, b = theory.lemma61(K, 50.0, corrected=True)
    assert w.shape == (2, 2 * K) and S.shape == (2, 2 * K, 2 * K)
    assert S[0, K, 0] == 100.0 and S[0, 0, K] == 0.0 and S[1, K, 0] == -100.0  # key v_1, query c_1
    margin = y * output(w, S, X, b)
    assert np.all(margin > 0)
    np.testing.assert_allclose(margin, np.where(opposing > 0, 1.0, 5.0), rtol=0, atol=1e-12)  # y f = 3 + 2 y eps
    assert np.mean(y * output(w, S.transpose(0, 2, 1), X, b) > 0) == 0.5  # key/query swapped: fails
    w, S, b = theory.lemma61(K, 50.0, corrected=False)
    f = output(w, S, X, b)
    np.testing.assert_allclose(f, 1.0, rtol=0, atol=1e-12)  # f = 1 on every sample (docs/papers/002.md §7 item 1)
    assert np.mean(y * f > 0) == 0.5


@pytest.mark.parametrize("corrected", [True, False])
def test_lemma61_bias_keeps_both_relus_on_and_fails_at_L4(corrected: bool) -> None:
    K, L = 3, 4
    X, y, opposing = population(K, L)
    w, S, b = theory.lemma61(K, 50.0, corrected, L=L)
    H = heads(w, S, X)
    assert b > np.abs(H).max() and b >= L + 1  # f = H_+ - H_- exactly
    np.testing.assert_allclose(output(w, S, X, b), H[0] - H[1], rtol=0, atol=1e-12)
    if corrected:  # y f = 3 + 2 y (eps_1 + eps_2) = -1 when both distractors oppose y
        margin = y * output(w, S, X, b)
        np.testing.assert_allclose(margin[opposing == 2], -1.0, atol=1e-12)
        assert np.mean(margin > 0) == 0.75


# ------------------------------------------------------------------ max margin


def test_max_margin_known_hulls() -> None:
    assert theory.max_margin([[1.0, 0.0], [0.0, 1.0]]) == pytest.approx(1 / math.sqrt(2), rel=1e-12)
    np.testing.assert_allclose(theory.min_norm_point([[1.0, 0.0], [0.0, 1.0]]), [0.5, 0.5], atol=1e-12)
    assert theory.max_margin([[3.0, 4.0]]) == pytest.approx(5.0, rel=1e-12)
    assert theory.max_margin([[1.0, 1.0], [1.0, -1.0], [-1.0, 0.0]]) == 0.0  # triangle around 0
    assert theory.max_margin([[-1.0, 0.0], [1.0, 0.0], [0.0, 1.0]]) == 0.0  # 0 on an edge
    assert theory.max_margin([[0.0, 0.0], [1.0, 2.0]]) == 0.0  # 0 a vertex
    for r in (1e-3, 0.3, 7.0):  # segment {x = r, |y| <= 1} with points inside it
        Z = np.array([[r, -1.0], [r, 1.0], [r, 0.25], [r + 1.0, 0.5]])
        assert theory.max_margin(Z) == pytest.approx(r, rel=1e-10)
        assert theory.max_margin(1e6 * Z) == pytest.approx(1e6 * r, rel=1e-10)
        assert theory.max_margin(1e-6 * Z) == pytest.approx(1e-6 * r, rel=1e-10)
    rng = np.random.default_rng(1)
    assert theory.max_margin(rng.standard_normal((50, 3)) - [0.1, 0, 0]) == 0.0  # cloud around 0


@pytest.mark.parametrize("seed", range(6))
def test_max_margin_matches_an_lp_and_slsqp(seed: int) -> None:
    """0 in the hull iff the LP {Z^T lam = 0, 1^T lam = 1, lam >= 0} is feasible (then gamma = 0);
    otherwise gamma is SLSQP's min-norm point on the simplex, attained by theta = p/|p| and by no
    random direction. The shift makes both cases occur (seed 1 has 0 inside)."""
    rng = np.random.default_rng(seed)
    Z = rng.standard_normal((12, 4)) + [1.5, 0.5, 0.0, 0.0]
    gamma = theory.max_margin(Z)
    inside = linprog(np.zeros(12), A_eq=np.vstack([Z.T, np.ones(12)]), b_eq=np.r_[np.zeros(4), 1.0],
                     bounds=[(0, None)] * 12).status == 0
    assert (gamma == 0.0) == inside
    if inside:
        return
    lam = minimize(lambda v: 0.5 * np.sum((Z.T @ v) ** 2), np.full(12, 1 / 12), jac=lambda v: Z @ (Z.T @ v),
                   bounds=[(0, 1)] * 12, constraints=[{"type": "eq", "fun": lambda v: v.sum() - 1}],
                   method="SLSQP", options={"ftol": 1e-15, "maxiter": 500}).x
    assert gamma == pytest.approx(np.linalg.norm(Z.T @ lam), rel=1e-6)
    p = theory.min_norm_point(Z)
    assert np.min(Z @ (p / np.linalg.norm(p))) == pytest.approx(gamma, rel=1e-10)  # margin of theta = p/|p|
    theta = rng.standard_normal((2000, 4))
    assert np.max(np.min(theta @ Z.T, 1) / np.linalg.norm(theta, axis=1)) <= gamma + 1e-12  # no better direction


@pytest.mark.parametrize("K", [2, 3])
def test_max_margin_of_attention_features(K: int) -> None:
    """Uniform attention: the hard features form an XOR, gamma = 0 (Lemma 5.4), at every stage-1
    w; the corrected Lemma 6.1 features are separated by theta = (w_+; w_-; 1) with y f >= 1."""
    X, y, _ = population(K)
    zero = np.zeros((2, 2 * K, 2 * K))
    for t in (0.0, 1.0, 5.0 * K):
        one = theory.stage1(t, K)
        w = stage1_weights(K, float(one["a"]), float(one["c"]))
        assert theory.max_margin(y[:, None] * features(w, zero, X, 0.5)) == 0.0
    w, S, b = theory.lemma61(K, 50.0, corrected=True)
    Z = y[:, None] * features(w, S, X, b)
    theta = np.r_[w[0], w[1], 1.0]
    np.testing.assert_allclose(Z @ theta, y * output(w, S, X, b), atol=1e-12)  # f = [w_+; w_-; 1]^T F
    assert theory.max_margin(Z) >= 1.0 / np.linalg.norm(theta) - 1e-12
