"""The attention-dynamics engine on the sphere (attnsweep.dynamics) against independent truth.

Truths: the sphere constraint; the energy identity of 001 Eq. 3.6 (E_beta non-decreasing for
V = I, non-increasing for V = -I); first-order convergence of Euler to RK4 as dt -> 0; the
two-token angle ODE on the circle (Eq. 7.1) and the orthogonal-start curve gamma_beta(t)
(Theorem 6.8) from the numpy/scipy theory module; observables against brute force and
scipy's connected components; and job-cut invariance of a whole simulate job.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.sparse.csgraph import connected_components

from attnsweep.dynamics import ensembles, observables, sphere
from attnsweep.dynamics.times import output_steps
from attnsweep.experiments.sphere_clustering import theory

F64 = torch.float64


def uniform(batch: int, n: int, d: int, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return sphere.normalise(torch.randn(batch, n, d, generator=gen, dtype=F64))


def run(x: torch.Tensor, beta: float, steps: int, dt: float, integrator: str = "rk4", normalisation: str = "sa",
        v: torch.Tensor | None = None) -> list[torch.Tensor]:
    b = torch.full((x.shape[0],), beta, dtype=x.dtype)
    step = sphere.stepper(integrator, b, None, v, normalisation, dt)
    states = [x]
    for _ in range(steps):
        states.append(step(states[-1]))
    return states


@pytest.mark.parametrize("integrator", ["euler", "euler_projected", "rk4"])
def test_tokens_stay_on_the_sphere(integrator: str) -> None:
    for x in run(uniform(4, 12, 5), beta=3.0, steps=50, dt=0.1, integrator=integrator):
        np.testing.assert_allclose(torch.linalg.vector_norm(x, dim=-1).numpy(), 1.0, atol=1e-12)


@pytest.mark.parametrize("normalisation", ["sa", "usa"])
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_energy_is_monotone_along_the_flow(normalisation: str, sign: float) -> None:
    """Eq. 3.6: dE/dt = (1/n^2) sum_i Z_i ||x_i'||^2 >= 0 (SA), (1/n) sum_i ||x_i'||^2 (USA) for
    V = I; V = -I reverses the field, so E decreases. RK4 with a small step keeps the sign."""
    beta, d = 2.0, 4
    v = None if sign > 0 else -torch.eye(d, dtype=F64).expand(3, d, d)
    states = run(uniform(3, 10, d, seed=1), beta=beta, steps=200, dt=0.01, normalisation=normalisation, v=v)
    b = torch.full((3,), beta, dtype=F64)
    energy = torch.stack([observables.energy(observables.gram(x), b) for x in states])
    steps = sign * torch.diff(energy, dim=0)
    assert (steps > 0).all(), steps.min()
    # the identity itself, at t = 0: (E(dt) - E(0))/dt against (1/n^2) sum_i Z_i ||x_i'||^2 (SA)
    if normalisation == "sa" and sign > 0:
        x = states[0]
        velocity = sphere.field(x, b, None, None, "sa")
        z = torch.exp(beta * observables.gram(x)).sum(-1)
        rate = (z * (velocity ** 2).sum(-1)).sum(-1) / 10 ** 2
        fine = run(x, beta=beta, steps=1, dt=1e-6)[-1]
        slope = (observables.energy(observables.gram(fine), b) - energy[0]) / 1e-6
        np.testing.assert_allclose(slope.numpy(), rate.numpy(), rtol=1e-4)


def test_euler_converges_to_rk4_at_first_order() -> None:
    x0, beta, horizon = uniform(2, 8, 3, seed=2), 4.0, 2.0
    reference = run(x0, beta, steps=400, dt=horizon / 400)[-1]
    errors = []
    for steps in (50, 100, 200):
        for integrator in ("euler", "euler_projected"):
            end = run(x0, beta, steps=steps, dt=horizon / steps, integrator=integrator)[-1]
            errors.append(torch.linalg.vector_norm(end - reference).item())
    euler, projected = np.array(errors[0::2]), np.array(errors[1::2])
    for err in (euler, projected):
        ratios = err[:-1] / err[1:]
        assert np.all((ratios > 1.7) & (ratios < 2.3)), ratios  # halving dt halves the error


@pytest.mark.parametrize("normalisation", ["sa", "usa"])
def test_two_tokens_on_the_circle_follow_the_angle_ode(normalisation: str) -> None:
    """n = 2, d = 2: the angle between the tokens solves the scalar ODE from Eq. 7.1."""
    phi0, beta, dt, steps = 2.5, 1.5, 0.005, 400
    x0 = torch.tensor([[[1.0, 0.0], [math.cos(phi0), math.sin(phi0)]]], dtype=F64)
    states = run(x0, beta, steps=steps, dt=dt, normalisation=normalisation)
    times = np.arange(0, steps + 1, 50) * dt
    angle = [math.acos(min(1.0, float(states[k][0, 0] @ states[k][0, 1]))) for k in range(0, steps + 1, 50)]
    np.testing.assert_allclose(angle, theory.two_token_angle(times, phi0, beta, normalisation), atol=1e-8)


@pytest.mark.parametrize("normalisation", ["sa", "usa"])
def test_orthogonal_start_follows_gamma_beta(normalisation: str) -> None:
    """Theorem 6.8: from x_i(0) = e_i (d >= n) every pairwise cosine equals gamma_beta(t)."""
    n, beta, dt, steps = 5, 3.0, 0.002, 1000
    x0 = torch.eye(n, 7, dtype=F64)[None]
    states = run(x0, beta, steps=steps, dt=dt, normalisation=normalisation)
    times = np.arange(0, steps + 1, 100) * dt
    curve = theory.gamma_curve(times, beta, n, normalisation)
    for k, t in zip(range(0, steps + 1, 100), times):
        g = observables.gram(states[k])[0].numpy()
        off = g[~np.eye(n, dtype=bool)]
        np.testing.assert_allclose(off, curve[list(times).index(t)], atol=1e-9)


@pytest.mark.parametrize("beta", [0.0, 3.0, 708.0])
@pytest.mark.parametrize("causal", [False, True])
def test_fused_kernel_is_the_softmax_weighted_sum(beta: float, causal: bool) -> None:
    """SA with Q = K = I: sum_j A_ij x_j through e^{beta(<x_i, x_j> - 1)} and row sums equals the
    max-subtracted softmax path, with and without the shift (beta = 708: n e^beta overflows
    float64, so the shift is taken), under the causal mask too, from the tokens or their Gram."""
    x = uniform(3, 9, 4, seed=3)
    b = torch.full((3,), beta, dtype=F64)
    mask = torch.tensor([True, False, True]) if causal else None
    expected = sphere.attention(x, b, None, "sa", causal=mask) @ x
    assert sphere.needs_shift(b, 9, F64) == (beta > 700)  # log(9 e^708) + 1 > log(max float64) = 709.8
    for shift in (True, sphere.needs_shift(b, 9, F64)):
        for gram in (None, observables.gram(x)):
            got = sphere.weighted_sum(x, b, None, x, "sa", gram, mask, plan=(True, shift))
            torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-13)
    if causal:  # every system causal: the stepper passes True, one lower triangle for all
        every = torch.ones(3, dtype=torch.bool)
        torch.testing.assert_close(sphere.kernel(x, b, causal=True), sphere.kernel(x, b, causal=every), rtol=0, atol=0)
        assert (sphere.kernel(x, b, causal=True).triu(1) == 0).all()


@pytest.fixture(params=["numpy", "torch"])
def cpu_path(request, monkeypatch) -> str:
    """Every primitive of attnsweep.dynamics.ops forced through one implementation, whatever this
    host's timing chose (attnsweep.dynamics.cpu_paths)."""
    from attnsweep.dynamics import cpu_paths

    monkeypatch.setenv(cpu_paths.FORCE, request.param)
    cpu_paths.forget()
    yield request.param
    cpu_paths.forget()


def test_primitives_match_torch_on_either_path(cpu_path: str) -> None:
    """ops.bmm and ops.exp_ give torch's numbers to rounding and ops.count_at_least its count
    exactly, for float32 and float64, transposed operands and a broadcast right factor, on the
    numpy path and the torch path alike."""
    from attnsweep.dynamics import cpu_paths, ops

    assert all(cpu_paths.path(p, F64) == cpu_path for p in cpu_paths.PRIMITIVES)

    k = 5  # the products' inner dimension
    for dtype in (torch.float32, F64):
        u = torch.finfo(dtype).eps / 2
        a, b = uniform(4, 6, 5).to(dtype), uniform(4, 7, 5, seed=1).to(dtype)
        # a k-term dot product of vectors of norm 1 (to within u): each product within gamma_k (1 + u)^2,
        # about (k + 1) u, of the exact one whatever the order of its sum (Higham, Thm 3.5), so within
        # 2 (k + 1) u of each other
        tol = 2 * (k + 1) * u
        torch.testing.assert_close(ops.bmm(a, b.transpose(-1, -2)), a @ b.transpose(-1, -2), rtol=0, atol=tol)
        torch.testing.assert_close(ops.bmm(a, b[0].T), a @ b[0].T, rtol=0, atol=tol)
        e = a.clone()
        assert ops.exp_(e) is e
        # numpy's SIMD exponential and torch's are each within 4 ulp (at most 8 u relative) of e^a
        torch.testing.assert_close(e, a.exp(), rtol=16 * u, atol=0)
        level = float(a.median())
        assert ops.count_at_least(a, level).tolist() == (a >= level).sum((-1, -2)).tolist()


@pytest.mark.parametrize("dtype", [torch.float32, F64])
def test_a_step_is_the_plain_formula_on_either_path(cpu_path: str, dtype: torch.dtype) -> None:
    """The engine's attention (the fused kernel through ops: Gram product, exponential, row sums,
    weighted sum) and one Euler step against Eq. 2.5's softmax written out in float64 from the same
    tokens: sum_j softmax_j(beta <x_i, x_j>) x_j, and x_i + dt times it, renormalised; 32 tokens in
    32 dimensions, beta up to 9, as the default config. Bound: ten rounded operations of u on
    numbers of size 1 (Gram product, exponential, row sum, weighted sum, division, update, norm;
    a sum in blocked order counts as one), times 1 + beta for the exponent's argument."""
    u = torch.finfo(dtype).eps / 2
    x = uniform(6, 32, 32, seed=7).to(dtype)
    beta = torch.tensor([0.0, 0.5, 1.0, 2.0, 4.0, 9.0], dtype=dtype)
    dt, bound = 0.1, 10 * (1 + float(beta.max())) * u
    x64, b64 = x.to(F64), beta.to(F64)
    attended = torch.softmax(b64[:, None, None] * x64 @ x64.transpose(-1, -2), dim=-1) @ x64
    plan = (True, sphere.needs_shift(beta, 32, dtype))
    got = sphere.weighted_sum(x, beta, None, x, "sa", None, None, plan=plan)
    torch.testing.assert_close(got.to(F64), attended, rtol=0, atol=bound)
    step = sphere.stepper("euler", beta, None, None, "sa", dt)(x)
    torch.testing.assert_close(step.to(F64), sphere.normalise(x64 + dt * attended), rtol=0, atol=bound)


@pytest.mark.parametrize("integrator", ["euler", "rk4"])
def test_span_coordinates_carry_the_same_flow(integrator: str) -> None:
    """n = 6 tokens in d = 20: the flow of their coordinates in an orthonormal basis of their span
    (V = I, Q = K = I) has the Gram matrices of the flow in R^20, and r U^T is the token cloud."""
    x = uniform(3, 6, 20, seed=4)
    r, u = sphere.span_coordinates(x)
    assert r.shape == (3, 6, 6)
    torch.testing.assert_close(r @ u.transpose(-1, -2), x, rtol=0, atol=1e-14)
    b = torch.tensor([0.5, 2.0, 8.0], dtype=F64)
    step = sphere.stepper(integrator, b, None, None, "sa", 0.1)
    for _ in range(100):
        x, r = step(x), step(r)
    torch.testing.assert_close(observables.gram(r), observables.gram(x), rtol=0, atol=1e-12)
    torch.testing.assert_close(r @ u.transpose(-1, -2), x, rtol=0, atol=1e-12)


def test_observables_against_brute_force() -> None:
    gen = np.random.default_rng(3)
    # clouds with planted clusters: tokens copied with tiny jitter, some far apart
    x = gen.normal(size=(20, 9, 3))
    x[:, 3:6] = x[:, 3:4] + 1e-4 * gen.normal(size=(20, 3, 3))
    x[:, 6:] = x[:, :1] + 1e-5 * gen.normal(size=(20, 3, 3))
    x /= np.linalg.norm(x, axis=-1, keepdims=True)
    g = torch.tensor(x @ x.transpose(0, 2, 1))
    delta, beta = 1e-3, torch.full((20,), 2.5, dtype=F64)
    for b in range(20):
        gb = g[b].numpy()
        off = ~np.eye(9, dtype=bool)
        assert observables.clustered_pairs(g, delta)[b] == pytest.approx((gb[off] >= 1 - delta).mean())
        assert observables.cluster_count(g, delta)[b] == connected_components(gb >= 1 - delta, directed=False)[0]
        assert observables.boolean_rank(g)[b] == np.linalg.matrix_rank((gb > 0.9999).astype(float))
        assert observables.min_cosine(g)[b] == pytest.approx(gb[off].min())
        assert observables.energy(g, beta)[b] == pytest.approx(theory.energy(gb, 2.5))


def test_cluster_count_chain_needs_several_rounds() -> None:
    """A path graph 0-1-2-...-7 (each neighbour within delta, the ends far apart) is one component."""
    angles = np.arange(8) * 0.03
    x = np.stack([np.cos(angles), np.sin(angles)], -1)
    g = torch.tensor(x @ x.T)[None]
    assert observables.cluster_count(g, 1 - math.cos(0.031)).item() == 1
    assert observables.cluster_count(g, 1 - math.cos(0.029)).item() == 8


def test_components_match_scipy_on_random_and_adversarial_graphs() -> None:
    """Components against scipy's on graphs that stress the hooking: paths and combs whose nodes
    are numbered at random (a label must cross the whole path), random geometric graphs on S^2
    near their percolation threshold, and Erdos-Renyi graphs from empty to full."""
    gen = np.random.default_rng(11)
    n, graphs = 60, []
    for _ in range(8):  # random paths of random lengths, cut into pieces: several long chains
        order = gen.permutation(n)
        a = np.zeros((n, n), bool)
        cuts = set(gen.choice(n - 1, 3, replace=False))
        for k in range(n - 1):
            if k not in cuts:
                a[order[k], order[k + 1]] = True
        graphs.append(a | a.T)
    for delta in (0.01, 0.03, 0.06, 0.12):
        x = gen.normal(size=(n, 3))
        x /= np.linalg.norm(x, axis=-1, keepdims=True)
        graphs.append(x @ x.T >= 1 - delta)
    for p in (0.0, 0.01, 0.03, 0.1, 1.0):
        a = np.triu(gen.random((n, n)) < p, 1)
        graphs.append(a | a.T)
    adjacent = torch.tensor(np.stack(graphs))
    want = [connected_components(a, directed=False)[0] for a in graphs]
    assert observables.components(adjacent).tolist() == want


def test_output_steps_sit_on_the_step_grid() -> None:
    assert output_steps(0.1, 30, 61).tolist() == list(range(0, 301, 5))
    log = output_steps(0.1, 30, 10, "log")
    assert log[0] == 0 and log[-1] == 300 and np.all(np.diff(log) > 0)


def test_random_ensembles_have_their_structure() -> None:
    gen = torch.Generator().manual_seed(0)
    for name in ("ginibre", "wigner_psd", "ginibre_shared", "wigner_shared"):
        qk, v = ensembles.draw(name, 6, gen)
        if name.startswith("wigner"):
            torch.testing.assert_close(qk, qk.T)
        if name.endswith("_shared"):
            torch.testing.assert_close(v, qk / math.sqrt(6))
        else:
            assert torch.linalg.eigvalsh(v).min() > -1e-12  # V = G G^T / sqrt(d) is PSD


@pytest.mark.parametrize("matrices", ["identity", "ginibre"])
def test_sphere_job_is_independent_of_job_cut_and_chunking(tmp_path, monkeypatch, matrices: str) -> None:
    """One job for everything, one per (n, d, seed, beta), chunks of one system side by side on
    two threads, and the same on one thread give the same arrays bit for bit: draws are keyed by
    (n, d, seed) and (d, seed) only, and a chunk runs single-threaded wherever it runs (d = 9 > n:
    the identity case integrates in the span of the tokens)."""
    from attnsweep.plan.config import load_sweep
    from attnsweep.reduce.aggregate import collect
    from attnsweep.run.job import run_job
    from attnsweep.stores.io import open_store

    section = {"n": [5, 7], "d": [2, 9], "rho": [0.0, 0.5], "beta": [0.5, 4.0], "gamma": [0.0, 1.0], "seeds": 2,
               "t_max": 2.0, "outputs": 5, "matrices": matrices, "integrator": "rk4"}
    sweeps, before = {}, torch.get_num_threads()  # run_job sets the process's threads
    for name, top, wildcards in (("single", {"block_mib": 8}, []),
                                 ("fanned", {"block_mib": 8}, ["n", "d", "seed", "beta"]),
                                 ("chunked", {"block_mib": 1}, ["n", "d"]),
                                 ("one thread", {"block_mib": 1}, ["n", "d"])):
        if name.startswith(("chunked", "one")):  # every system claims the whole 1 MiB budget: one a chunk
            monkeypatch.setattr("attnsweep.experiments.sphere_clustering.simulate.system_bytes",
                                lambda *args: 1 << 20)
        config = {"dtype": "float64", **top, "experiments": {"sphere_clustering": {**section, "wildcards": wildcards}}}
        plan = load_sweep(config).plans["sphere_clustering"]
        folder = tmp_path / name
        threads = 1 if name == "one thread" else 2
        runs = [run_job(spec, folder / "runs" / f"{path}.zarr", device="cpu", threads=threads, progress=False)
                for path, spec in plan.jobs().items()]
        sweeps[name] = open_store(collect(runs, folder / "sweep.zarr")).load()
    torch.set_num_threads(before)
    ref = sweeps["single"]
    assert not np.isnan(ref["clustered"].values).any()
    for other in ("fanned", "chunked", "one thread"):
        for var in ref.data_vars:
            np.testing.assert_array_equal(sweeps[other][var].values, ref[var].values, err_msg=f"{other}: {var}")


def test_summary_theory_is_gamma_inf_delta_for_identity_only() -> None:
    """t_star_theory on the summary's coordinates: the reference value 6.95350 of docs/papers/001.md §4
    (n = 32, delta = 1e-3, beta_eff = 4 from beta = 0, gamma = 4/log 32), NaN past beta = 700 and for
    random matrices."""
    import xarray as xr

    from attnsweep.experiments.sphere_clustering.reduction import theory

    coords = {"n": [32], "d": [8], "rho": [0.0], "beta": [0.0, 800.0], "gamma": [4 / math.log(32)],
              "t": np.linspace(0, 30, 7)}
    summary = xr.Dataset(coords=coords)
    out = theory(summary, {"normalisation": "sa", "delta": 1e-3, "matrices": "identity"})
    star = out["t_star_theory"].sel(beta=0.0).item()
    assert star == pytest.approx(6.95350, abs=1e-5)
    assert np.isnan(out["t_star_theory"].sel(beta=800.0).item())
    assert out["gamma_curve"].sel(beta=0.0, t=0.0).item() == 0.0
    random = theory(summary, {"normalisation": "sa", "delta": 1e-3, "matrices": "ginibre"})
    assert np.isnan(random["t_star_theory"].values).all()
