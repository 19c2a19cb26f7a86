"""mixture_training (paper 002): the model, the two engines and the training modes against
independent truth: the gradient of App. B.1, autograd of the parameters themselves, the
stage-1 closed form, the infinite-width limit, symmetries (Lemma C.4, d-independence), the
corrected Lemma 6.1 construction, and the config checks."""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np
import pytest
import torch
from scipy.stats import ortho_group

from attnsweep.errors import ConfigError
from attnsweep.experiments.mixture_training import data, engines, model, theory
from attnsweep.plan.config import experiment_defaults, plan_experiment

NAME = "mixture_training"


@pytest.fixture(autouse=True, scope="module")
def float64_default() -> Iterator[None]:
    """Every tensor made here without a dtype is float64 (the tolerances below are float64's):
    torch's default dtype is set for this module's tests only and restored after them, so
    tests in later modules of the same process still start from float32."""
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(before)


def tensors(K: int, L: int, basis: np.ndarray | None = None) -> tuple[data.Population, torch.Tensor, torch.Tensor]:
    pop = data.population(K, L)
    X = torch.tensor(pop.sequences(data.signals(K) if basis is None else basis))
    return pop, X, torch.tensor(pop.label)


def weights(B: int, m: int, d: int, omega: float, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    W = torch.randn(2, B, 2, m, d, generator=gen) * omega / math.sqrt(m)
    return W[0], W[1]


def train(engine, X, y, steps: int, lr: float = 0.1, b: float = 0.5, lr_w: float | None = None) -> list:
    """``steps`` joint GD steps on the population mean; the (w, S) after each."""
    B = engine.w.shape[0]
    full = lambda v: torch.full((B,), v)
    weight = torch.full((B, len(y)), 1 / len(y))
    seq, path = model.Sequences.of(X), []
    for _ in range(steps):
        engine.step(seq, y, full(b), weight, full(lr if lr_w is None else lr_w), full(lr))
        path.append((engine.w.clone(), engine.scores.clone()))
    return path


def config(**section) -> dict:
    return {**experiment_defaults(NAME), **section}


# ---------------------------------------------------------------- data and model
@pytest.mark.parametrize(("K", "L"), [(2, 3), (3, 3), (4, 4), (3, 5)])
def test_population_is_definition_2_1(K: int, L: int) -> None:
    pop = data.population(K, L)
    assert len(pop.label) == 2 * K * (2 * (K - 1)) ** (L - 2)  # docs/papers/002.md §1
    coefficients, rows = pop.tokens, np.arange(len(pop.label))
    assert np.all(np.abs(coefficients).sum(-1) == 1)  # every token is one signal, +-
    assert np.all(coefficients[rows, 0, pop.group] == 1)
    assert np.array_equal(coefficients[rows, 1, K + pop.group], pop.label)
    distractor_groups = np.abs(coefficients[:, 2:, K:]).argmax(-1)
    assert np.all(distractor_groups != pop.group[:, None])
    if L == 3:
        assert data.exact(K, L).hard.mean() == 0.5  # P(conflicting) = 1/2 for L = 3, every K
    assert data.sample_types(pop).size == 2 ** (L - 1)


def test_score_gradient_is_app_b1() -> None:
    """dH/dS = sum_{l,h} p_lh (u_h - u_bar_l) x_h x_l^T (App. B.1) against autograd."""
    K, L = 3, 4
    _, X, _ = tensors(K, L)
    gen = torch.Generator().manual_seed(1)
    w = torch.randn(2 * K, generator=gen)
    S = (0.7 * torch.randn(2 * K, 2 * K, generator=gen)).requires_grad_(True)
    H = model.heads(w[None].expand(2, -1), S[None].expand(2, -1, -1), model.Sequences.of(X))[0]  # (N,)
    grads = torch.stack([torch.autograd.grad(h, S, retain_graph=True)[0] for h in H[:5]])
    p = model.attention(S.detach(), model.Sequences.of(X[:5]))  # (5, L, L)
    u = X[:5] @ w  # (5, L)
    ubar = (p * u[:, None, :]).sum(-1)  # (5, L)
    closed = torch.einsum("nlh,nlh,nhi,nlj->nij", p, u[:, None, :] - ubar[:, :, None], X[:5], X[:5])
    torch.testing.assert_close(grads, closed, rtol=1e-12, atol=1e-12)


def test_features_reproduce_the_output() -> None:
    """f = [w_+; w_-; 1]^T F(X) (Eq. 2)."""
    K, L, B = 2, 4, 3
    _, X, _ = tensors(K, L)
    gen = torch.Generator().manual_seed(2)
    w, S = torch.randn(B, 2, 2 * K, generator=gen), torch.randn(B, 2, 2 * K, 2 * K, generator=gen)
    b = torch.tensor([0.5, 0.1, 2.0])
    seq = model.Sequences.of(X)
    F = model.features(w, S, seq, b)
    theta = torch.cat([w[:, 0], w[:, 1], torch.ones(B, 1)], -1)
    torch.testing.assert_close(torch.einsum("bnp,bp->bn", F, theta), model.output(w, S, seq, b), rtol=0, atol=1e-12)


# ---------------------------------------------------------------- engines
def test_gram_engine_is_exact_gd_of_the_weights() -> None:
    """At any width, the Gram update equals autograd GD on W_K, W_Q (docs/papers/002.md §3), w included."""
    K, m, B = 2, 5, 4
    _, X, y = tensors(K, 3)
    W_K, W_Q = weights(B, m, 2 * K, 0.5)
    w = torch.zeros(B, 2, 2 * K)
    direct, gram = engines.Direct(w, W_K, W_Q), engines.Gram.from_weights(w, W_K, W_Q)
    for (wd, Sd), (wg, Sg) in zip(train(direct, X, y, 300, lr=0.5), train(gram, X, y, 300, lr=0.5)):
        torch.testing.assert_close(Sg, Sd, rtol=0, atol=1e-12)
        torch.testing.assert_close(wg, wd, rtol=0, atol=1e-12)
    assert Sd.abs().max() > 10 * 0.25  # the scores moved well past their initial size
    torch.testing.assert_close(gram.K, direct.W_K.transpose(-1, -2) @ direct.W_K, rtol=0, atol=1e-11)
    torch.testing.assert_close(gram.Q, direct.W_Q.transpose(-1, -2) @ direct.W_Q, rtol=0, atol=1e-11)


def test_batched_systems_get_exactly_their_own_gradients() -> None:
    """One backward over a batch of seeds gives each seed's gradient: the batch equals the loop."""
    K, m, B = 3, 7, 5
    _, X, y = tensors(K, 3)
    W_K, W_Q = weights(B, m, 2 * K, 0.3)
    w = torch.zeros(B, 2, 2 * K)
    batched = train(engines.Direct(w, W_K, W_Q), X, y, 50)[-1]
    for s in range(B):
        alone = train(engines.Direct(w[s:s + 1], W_K[s:s + 1], W_Q[s:s + 1]), X, y, 50)[-1]
        torch.testing.assert_close(batched[0][s], alone[0][0], rtol=0, atol=1e-13)
        torch.testing.assert_close(batched[1][s], alone[1][0], rtol=0, atol=1e-13)


def test_finite_width_converges_to_the_infinite_width_model() -> None:
    """Direct GD at width m approaches the Gram engine at S = 0, K~ = Q~ = omega^2 I (Lemma C.1),
    with an error that shrinks like m^{-1/2}."""
    K, omega, B, steps = 2, 0.5, 4, 200
    _, X, y = tensors(K, 3)
    w = torch.zeros(1, 2, 2 * K)
    eye = omega**2 * torch.eye(2 * K).expand(1, 2, -1, -1)
    limit = train(engines.Gram(w, torch.zeros(1, 2, 2 * K, 2 * K), eye, eye), X, y, steps, lr=0.5)[-1]
    errors = []
    for m in (400, 6400):
        W_K, W_Q = weights(B, m, 2 * K, omega, seed=m)
        finite = train(engines.Direct(w.expand(B, -1, -1), W_K, W_Q), X, y, steps, lr=0.5)[-1]
        errors.append(float(max((finite[0] - limit[0]).abs().max(), (finite[1] - limit[1]).abs().max())))
    scale = float(max(limit[0].abs().max(), limit[1].abs().max()))
    assert errors[1] < errors[0] / 2.5  # sqrt(16) = 4 expected; 2.5 leaves room for seed noise
    assert errors[1] < 0.05 * scale  # 2.8% measured at m = 6400


def test_trajectories_do_not_depend_on_d() -> None:
    """Signals and initial weights turned by one orthogonal matrix in d = 2K + 3 give the
    trajectories of d = 2K in signal coordinates (docs/papers/002.md §2)."""
    K, m, B, d = 2, 6, 2, 7
    R = torch.tensor(ortho_group.rvs(d, random_state=3))
    _, X, y = tensors(K, 3)
    _, X_rot, _ = tensors(K, 3, data.signals(K, d, R.numpy()))
    W_K, W_Q = weights(B, m, 2 * K, 0.4)
    pad = lambda W: torch.cat([W, torch.zeros(*W.shape[:-1], d - 2 * K)], -1) @ R.T
    E = torch.tensor(data.signals(K, d, R.numpy()))
    plain = train(engines.Direct(torch.zeros(B, 2, 2 * K), W_K, W_Q), X, y, 100)
    turned = train(engines.Direct(torch.zeros(B, 2, d), pad(W_K), pad(W_Q)), X_rot, y, 100)
    for (w, S), (w_r, S_r) in zip(plain, turned):
        torch.testing.assert_close(w_r @ E.T, w, rtol=0, atol=1e-12)
        torch.testing.assert_close(E @ S_r @ E.T, S, rtol=0, atol=1e-12)


# ---------------------------------------------------------------- theory against simulation
def job(**section):
    plan = plan_experiment(NAME, config(**section), "float64")
    (spec,) = plan.blocks().values()
    return plan.experiment, spec


@pytest.mark.parametrize("K", [2, 3])
def test_stage_1_matches_its_closed_form(K: int) -> None:
    """Infinite width, stage 1 of Algorithm 1 at lr = 0.01: w^T v_k, w^T c_k and the population
    loss follow docs/papers/002.md §6; the hard loss is log 2 exactly (f = 0 on hard samples, Lemma 5.4)."""
    lr, n_1 = 0.01, 300 * K  # t = 3K: past T_0.5 = 0.68 K, into the second phase
    experiment, spec = job(K=[K], m=["inf"], lr=[lr], seeds=1, modes=["three_stage"], steps=n_1 + 2,
                           stage_1_steps=n_1, stage_2_steps=1, record_every=n_1 // 30, wildcards=[])
    ds = experiment.simulate(spec, torch.device("cpu"), torch.float64, progress=False).squeeze()
    stage1 = ds.sel(step=ds["step"] <= n_1)
    t = stage1["step"].values * lr
    closed = theory.stage1(t, K, 0.5)
    np.testing.assert_allclose(stage1["align"].sel(head=0, kind=1).values, np.repeat(closed["a"][:, None], K, 1),
                               atol=2e-3)
    np.testing.assert_allclose(stage1["align"].sel(head=0, kind=0).values, np.repeat(closed["c"][:, None], K, 1),
                               atol=2e-3)
    np.testing.assert_allclose(stage1["loss_pop"].values, closed["loss_pop"], atol=2e-3)
    np.testing.assert_allclose(stage1["loss_hard"].values, math.log(2), rtol=0, atol=1e-14)
    assert np.all(stage1["gamma"].values == 0)  # uniform attention: no separating direction (Lemma 5.4)
    assert stage1["align"].sel(head=0, kind=0).values[-1, 0] > 0.01  # the second phase was reached


def test_infinite_width_keeps_the_head_symmetry_and_learns() -> None:
    """Lemma C.4 holds exactly at infinite width; joint GD (K = 2, omega = 0.1, lr = 0.1) gets past
    the plateau near the reference t* = 109 (docs/papers/002.md §6), and the attention features become separable."""
    experiment, spec = job(K=[2], m=["inf"], seeds=1, steps=3000, record_every=50, wildcards=[])
    ds = experiment.simulate(spec, torch.device("cpu"), torch.float64, progress=False).squeeze()
    assert float(ds["sym_score"].max()) < 1e-12 and float(ds["sym_align"].max()) < 1e-12
    t = ds["step"].values * 0.1
    below = t[ds["loss_hard"].values < math.log(2) / 2]
    assert 95 < below[0] < 125
    assert float(ds["gamma"].isel(step=-1)) > 0.3
    assert float(ds["acc_hard"].isel(step=-1)) == 1.0 and float(ds["margin_hard"].isel(step=-1)) > 0
    same = ds["score"].sel(head=0, key_kind=0, query_kind=1)  # c_k^T S v_j
    assert float(same.sel(key_k=1, query_k=1).isel(step=-1)) > 1  # c_1^T S v_1 -> + large
    assert float(same.sel(key_k=1, query_k=2).isel(step=-1)) < 0  # c_1^T S v_2 -> - large


@pytest.mark.parametrize("K", [2, 3, 8])
def test_corrected_lemma_6_1_classifies_and_the_printed_one_does_not(K: int) -> None:
    _, X, y = tensors(K, 3)
    for corrected, accuracy in ((True, 1.0), (False, 0.5)):
        w, S, b = (torch.as_tensor(v) for v in theory.lemma61(K, 50.0, corrected))
        f = model.output(w, S, model.Sequences.of(X), b.reshape(()))
        assert float(((y * f) > 0).double().mean()) == accuracy


def test_minibatches_are_seeded_and_train() -> None:
    experiment, spec = job(K=[2], m=[16], seeds=2, steps=1500, data="minibatch", batch=8, record_every=500,
                           wildcards=[])
    first = experiment.simulate(spec, torch.device("cpu"), torch.float64, progress=False)
    again = experiment.simulate(spec, torch.device("cpu"), torch.float64, progress=False)
    assert first.identical(again)
    loss = first["loss_pop"].squeeze()
    assert np.all(loss.isel(step=-1) < 0.5 * loss.isel(step=0))
    assert not np.allclose(loss.isel(seed=0), loss.isel(seed=1))


# ---------------------------------------------------------------- config
@pytest.mark.parametrize(
    ("section", "key", "words"),
    [
        ({"m": [16, "inf"], "engines": ["direct"]}, "engines", "finite width"),
        ({"modes": ["three_stage"], "K": [2, 8], "steps": 2500}, "steps", "K = 8"),
        ({"map_steps": [5000]}, "map_steps", "past steps"),
        ({"m": [0]}, "m", "outside"),
        ({"omega": ["inf"]}, "omega", "not finite"),
        ({"source": "digits", "K": [2, 3]}, "K", "K = len(classes)"),
        ({"source": "digits", "classes": [1, 12]}, "classes", "no images of class [12]"),
    ],
)
def test_bad_sections_name_their_key(section: dict, key: str, words: str) -> None:
    with pytest.raises(ConfigError) as err:
        plan_experiment(NAME, config(**section), "float64")
    assert str(err.value).startswith(f"experiments.{NAME}.{key}") and words in str(err.value)


def test_infinite_width_is_a_grid_value() -> None:
    plan = plan_experiment(NAME, config(m=[64, "inf", 16]), "float64")
    assert plan.grid["m"] == [16, 64, math.inf]
    assert sorted(plan.blocks()) == ["K~2/L~3/m~16", "K~2/L~3/m~64", "K~2/L~3/m~inf"]


# ---------------------------------------------------------------- real images (App. A.5, Fig. 8)
def test_image_draws_follow_definition_2_1() -> None:
    """With one image per class, the unit vector v_k, the draws are i.i.d. draws of the population
    of Definition 2.1: every one is a population sequence (group signal aside), and each of the
    2K (2(K - 1))^{L-2} sequences is equally frequent (chi-square, K = 3, L = 4)."""
    K, L, n = 3, 4, 24000
    v = np.eye(2 * K)[K:]
    drawn = data.of_images([v[k][None] for k in range(K)], L, n, np.random.default_rng(0))
    c = drawn.basis[:K]
    assert np.allclose(np.linalg.norm(c, axis=1), 1) and np.allclose(drawn.basis[K:], v)
    group = np.abs(drawn.X[:, 0] @ c.T - 1).argmin(1)
    assert np.allclose(drawn.X[:, 0], c[group])
    pop = data.population(K, L)
    signal_part = drawn.X.copy()
    signal_part[:, 0] = np.eye(2 * K)[group]  # c_k -> e_k: the population's coordinates (+ 0.0 below: no -0.0)
    index = {tokens.tobytes(): i for i, tokens in enumerate(pop.tokens)}
    which = np.array([index[(s + 0.0).tobytes()] for s in signal_part])  # KeyError: not a population sequence
    assert np.array_equal(drawn.label, pop.label[which]) and np.array_equal(drawn.opposing, pop.opposing[which])
    counts = np.bincount(which, minlength=len(pop.label))
    expected = n / len(pop.label)
    chi2 = ((counts - expected) ** 2 / expected).sum()
    assert chi2 < len(pop.label) + 5 * math.sqrt(2 * len(pop.label))  # mean dof, sd sqrt(2 dof)
    assert np.array_equal(drawn.types, pop.sequences(drawn.basis)[data.sample_types(pop)])


def test_digit_images_train_by_stage() -> None:
    """Fig. 8 at small scale (scikit-learn digits 1 and 2, lr = 2): Algorithm 1 freezes what it
    must (attention in stage 1, neurons in stage 2, exactly); stage 1 fits the easy samples and
    leaves the hard ones near log 2; joint GD fits the hard samples within 300 steps."""
    experiment, spec = job(source="digits", samples=256, K=[2], m=[64], lr=[2.0], seeds=1,
                           modes=["joint", "three_stage"], steps=300, stage_1_steps=100, stage_2_steps=100,
                           record_every=50, map_steps=[], wildcards=[])
    ds = experiment.simulate(spec, torch.device("cpu"), torch.float64, progress=False).squeeze()
    assert ds.attrs["source"] == "digits" and ds.attrs["classes"] == [1, 2]
    joint, staged = ds.isel(mode=0), ds.isel(mode=1)
    at = lambda da, step: da.sel(step=step).values
    assert np.array_equal(at(staged["score"], 100), at(staged["score"], 0))  # stage 1: attention frozen
    assert not np.array_equal(at(staged["align"], 100), at(staged["align"], 0))
    assert np.array_equal(at(staged["align"], 200), at(staged["align"], 100))  # stage 2: neurons frozen
    assert not np.array_equal(at(staged["score"], 200), at(staged["score"], 100))
    assert at(staged["loss_easy"], 100) < 0.1 and at(staged["loss_hard"], 100) > 0.6
    assert at(staged["loss_hard"], 300) < at(staged["loss_hard"], 200)
    assert at(joint["loss_hard"], 300) < 0.2 and at(joint["acc_hard"], 300) > 0.9


def test_an_mnist_file_is_checked_and_fingerprinted(tmp_path) -> None:
    rng = np.random.default_rng(0)
    good = tmp_path / "mnist.npz"
    np.savez(good, x_train=rng.integers(0, 256, (40, 28, 28)), y_train=np.arange(40) % 10)
    plan = plan_experiment(NAME, config(source="digits", image_file=str(good), samples=16), "float64")
    (spec,) = plan.blocks().values()
    assert len(spec.options["image_sha256"]) == 64
    bad = tmp_path / "bad.npz"
    np.savez(bad, x_train=np.zeros((4, 28, 28)))
    for path, words in ((bad, "no y_train"), (tmp_path / "absent.npz", "is not a file")):
        with pytest.raises(ConfigError) as err:
            plan_experiment(NAME, config(source="digits", image_file=str(path)), "float64")
        assert str(err.value).startswith(f"experiments.{NAME}.image_file") and words in str(err.value)


def test_sequences_factor_the_tokens_and_both_logit_paths_agree() -> None:
    """X = U[index] exactly, with the 3K distinct tokens of the population (c_k, +-v_k); the
    gathered logits (few tokens) and the per-sample products (one token per position) both equal
    x_h^T S x_l."""
    K, L = 3, 4
    _, X, _ = tensors(K, L)
    seq = model.Sequences.of(X)
    assert seq.tokens.shape == (3 * K, 2 * K) and torch.equal(seq.X, X)
    every = model.Sequences(X.transpose(0, 1).reshape(-1, 2 * K), torch.arange(X.shape[0] * L).reshape(L, -1))
    assert torch.equal(every.X, X) and every.tokens.shape[0] ** 2 > L * L * X.shape[0]
    S = torch.randn(5, 2, 2 * K, 2 * K, generator=torch.Generator().manual_seed(1))
    direct = torch.einsum("nhi,bcij,nlj->bclhn", X, S, X)
    for factored in (seq, every):
        torch.testing.assert_close(model.logits(S, factored), direct, rtol=0, atol=1e-13)
