"""causal_clustering (paper 003) and the causal mask of the sphere engine against independent truth.

Truths: the masked softmax against a numpy softmax over each prefix; the hierarchy of CSA
(tokens 1..k never see later tokens); Lemma 3.1 (the first token in closed form, fixed for
V = I to machine precision); Theorem 4.1 (every token goes to x_1(0) for V = I); the two-token
ODE in closed form (docs/papers/003.md §4); the capture fraction against brute force; the recorded centre
counts against Monte Carlo of the definitions; bad options refused by key; job-cut, chunking and
mask-set invariance of whole simulate jobs.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from attnsweep.dynamics import sphere
from attnsweep.errors import ConfigError
from attnsweep.experiments.causal_clustering import simulate as sim
from attnsweep.experiments.causal_clustering import theory
from attnsweep.experiments.causal_clustering.cases import value_matrix

F64 = torch.float64


def tokens(batch: int, n: int, d: int, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return sphere.normalise(torch.randn(batch, n, d, generator=gen, dtype=F64))


def run(x: torch.Tensor, beta: float, v: torch.Tensor | None, t: float, dt: float, causal: bool = True,
        integrator: str = "rk4") -> torch.Tensor:
    b = torch.full((x.shape[0],), beta, dtype=F64)
    mask = torch.full((x.shape[0],), causal)
    step = sphere.stepper(integrator, b, None, v, "sa", dt, mask)
    for _ in range(round(t / dt)):
        x = step(x)
    return x


# ------------------------------------------------------------------ engine


def test_causal_attention_is_the_softmax_over_each_prefix() -> None:
    x = tokens(3, 7, 4, seed=1)
    beta = torch.tensor([0.5, 9.0, 400.0], dtype=F64)  # 400: scores far beyond exp's range unshifted
    causal = torch.tensor([True, True, False])
    a = sphere.attention(x, beta, None, "sa", causal=causal).numpy()
    g = (x @ x.transpose(-1, -2)).numpy()
    for b in range(3):
        for i in range(7):
            keep = i + 1 if causal[b] else 7
            s = beta[b].item() * g[b, i, :keep]
            want = np.exp(s - s.max()) / np.exp(s - s.max()).sum()
            np.testing.assert_allclose(a[b, i, :keep], want, rtol=1e-12, atol=1e-300)
            assert (a[b, i, keep:] == 0).all()
    assert np.isfinite(a).all()


def test_tokens_never_see_later_tokens() -> None:
    """CSA is hierarchical: the first k tokens of an n-token run are a k-token run."""
    x = tokens(2, 9, 3, seed=2)
    v = torch.from_numpy(value_matrix("top_simple", 3)).expand(2, 3, 3)
    whole = run(x, 4.0, v, t=3.0, dt=0.05)
    head = run(x[:, :5].clone(), 4.0, v, t=3.0, dt=0.05)
    np.testing.assert_allclose(whole[:, :5].numpy(), head.numpy(), rtol=0, atol=1e-13)
    full = run(x, 4.0, v, t=3.0, dt=0.05, causal=False)
    assert (full[:, :5] - head).abs().max() > 1e-3  # without the mask the later tokens pull


@pytest.mark.parametrize("name", ["top_multiple", "top_simple", "bottom_simple"])
def test_first_token_follows_lemma_3_1(name: str) -> None:
    x = tokens(1, 6, 3, seed=3)
    v = torch.from_numpy(value_matrix(name, 3))[None]
    t = 2.0
    got = run(x, 9.0, v, t=t, dt=0.01)[0, 0].numpy()
    want = theory.first_token([t], v[0].numpy(), x[0, 0].numpy())[0]
    np.testing.assert_allclose(got, want, atol=1e-9)
    assert np.linalg.norm(got - x[0, 0].numpy()) > 0.05  # it did move


def test_v_identity_first_token_fixed_and_every_token_reaches_it() -> None:
    """Lemma 3.1 (x_1 fixed to machine precision) and Theorem 4.1 (x_k(t) -> x_1(0))."""
    x = tokens(4, 5, 3, seed=4)
    end = run(x, 1.0, None, t=120.0, dt=0.1, integrator="euler_projected")
    assert (end[:, 0] - x[:, 0]).abs().max() < 1e-13
    assert (end - x[:, :1]).abs().max() < 1e-6


def test_two_tokens_follow_the_closed_form() -> None:
    """c = <x_1, x_2>: c' = (1 - c^2)/(1 + e^{beta (1 - c)}) for V = Q = K = I (docs/papers/003.md §4)."""
    x = tokens(1, 2, 4, seed=5)
    c0 = float(x[0, 0] @ x[0, 1])
    for t in (0.5, 2.0, 6.0):
        end = run(x, 3.0, None, t=t, dt=0.01)
        assert float(end[0, 0] @ end[0, 1]) == pytest.approx(theory.second_token_cosine([t], c0, 3.0)[0], abs=1e-9)


def test_captured_against_brute_force() -> None:
    x = tokens(5, 20, 3, seed=6)
    gen = torch.Generator().manual_seed(7)
    centre = torch.rand(5, 20, generator=gen) < 0.3
    centre[:, 0] = True
    radius = torch.tensor([[0.3, 1.0]] * 5, dtype=F64)
    got = sim.captured(x @ x.transpose(-1, -2), centre, radius).numpy()
    xs, cs = x.numpy(), centre.numpy()
    for b in range(5):
        dist = np.arccos(np.clip(xs[b] @ xs[b][cs[b]].T, -1, 1)).min(-1)
        for r, rad in enumerate((0.3, 1.0)):
            assert got[b, r] == pytest.approx((dist <= rad).mean(), abs=1e-15)


# ------------------------------------------------------------------ experiment


def plan(section: dict, **top: object):
    from attnsweep.plan.config import load_sweep

    config = {"dtype": "float64", **top, "experiments": {"causal_clustering": section}}
    return load_sweep(config).plans["causal_clustering"]


@pytest.mark.parametrize(
    ("patch", "key"),
    [
        ({"beta": [0.0, 1.0]}, "beta"),
        ({"d": [1]}, "d"),
        ({"values": ["identity", "identity"]}, "values"),
        ({"masks": ["sideways"]}, "masks"),
        ({"capture": [0.0]}, "capture"),
        ({"separation": -1.0}, "separation"),
        ({"n": [8, 16]}, "snapshot_times"),
        ({"t_max": 10.0, "snapshot_times": [0, 20]}, "snapshot_times"),
        ({"dt": 1000.0}, "dt"),
    ],
)
def test_bad_options_are_refused_naming_the_key(patch: dict, key: str) -> None:
    with pytest.raises(ConfigError, match=rf"^experiments\.causal_clustering\.{key}"):
        plan(patch)


def brute_centres(x: np.ndarray, delta: float) -> tuple[np.ndarray, np.ndarray]:
    """Section 5.1 by the letter, on geodesic distances: token k is a Renyi centre when it is more
    than delta from every earlier Renyi centre (greedy parking), a strong one when it is more
    than delta from every earlier token. Returns the two (n,) indicator vectors."""
    dist = np.arccos(np.clip(x @ x.T, -1.0, 1.0))
    renyi: list[int] = []
    for k in range(len(x)):
        if all(dist[k, c] > delta for c in renyi):
            renyi.append(k)
    strong = [k for k in range(len(x)) if (dist[k, :k] > delta).all()]
    return np.isin(np.arange(len(x)), renyi), np.isin(np.arange(len(x)), strong)


def test_recorded_centre_counts_match_lemma_c1_and_the_definitions() -> None:
    """Over 400 realisations of n = 64 tokens on S^2 at beta = 16: the recorded strong count's
    mean is Lemma C.1's within 4 standard errors, and the recorded centres and both counts of
    every realisation are those of a brute-force greedy parking written here (not the library's)."""
    from attnsweep.registry import get

    section = {"n": [64], "d": [3], "beta": [16.0], "seeds": 400, "masks": ["causal"], "t_max": 0.1,
               "outputs": 2, "snapshot_times": [0.0]}
    (spec,) = plan(section).jobs().values()
    ds = get("causal_clustering").simulate(spec, torch.device("cpu"), F64, progress=False).squeeze()
    strong, renyi = ds["strong_count"].values, ds["renyi_count"].values
    expected = theory.expected_strong_count(64, 4 / math.sqrt(16.0), 3)  # delta = c beta^{-1/2} = 1
    assert abs(strong.mean() - expected) < 4 * strong.std(ddof=1) / math.sqrt(400)
    brute = [brute_centres(sim.initial_tokens(64, 3, seed).numpy(), 1.0) for seed in spec.seeds]
    np.testing.assert_array_equal(ds["renyi_centre"].values, [r for r, _ in brute])
    np.testing.assert_array_equal(ds["strong_centre"].values, [s for _, s in brute])
    np.testing.assert_array_equal(renyi, [r.sum() for r, _ in brute])
    np.testing.assert_array_equal(strong, [s.sum() for _, s in brute])
    assert (strong < renyi).any()  # the two definitions differ on these draws


def test_jobs_are_independent_of_job_cut_chunking_and_mask_set(tmp_path: Path, monkeypatch) -> None:
    """One job, one job per (n, d, seed, beta), and chunks of one system give the same arrays bit
    for bit; a causal-only sweep gives the causal half of a causal-and-full one."""
    from attnsweep.plan.config import load_sweep
    from attnsweep.reduce.aggregate import collect
    from attnsweep.run.job import run_job
    from attnsweep.stores.io import open_store

    section = {"n": [5, 7], "d": [2, 3], "beta": [2.0, 9.0], "seeds": 2, "t_max": 2.0, "outputs": 5,
               "values": ["identity", "bottom_simple"], "snapshot_times": []}
    cases = (("single", {}, []), ("fanned", {}, ["n", "d", "seed", "beta"]), ("chunked", {}, ["n", "d"]),
             ("causal", {"masks": ["causal"]}, ["n", "d"]))
    sweeps = {}
    for name, extra, wildcards in cases:
        if name == "chunked":  # every system claims the whole budget: one system a chunk
            monkeypatch.setattr(sim, "chunk_bytes", lambda *args: 64 << 20)
        config = {"dtype": "float64", "experiments": {"causal_clustering": {**section, **extra,
                                                                            "wildcards": wildcards}}}
        folder = tmp_path / name
        runs = [run_job(spec, folder / "runs" / f"{path}.zarr", device="cpu", progress=False)
                for path, spec in load_sweep(config).plans["causal_clustering"].jobs().items()]
        sweeps[name] = open_store(collect(runs, folder / "sweep.zarr")).load()
    ref = sweeps["single"]
    assert not np.isnan(ref["clusters"].values).any()
    for other in ("fanned", "chunked"):
        for var in ref.data_vars:
            np.testing.assert_array_equal(sweeps[other][var].values, ref[var].values, err_msg=f"{other}: {var}")
    for var in ref.data_vars:
        if "causal" in ref[var].dims:
            np.testing.assert_array_equal(sweeps["causal"][var].values, ref[var].sel(causal=[1]).values, err_msg=var)
