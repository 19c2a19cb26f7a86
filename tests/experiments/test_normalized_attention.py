"""normalized_attention: bad input refused in one line, one head under Post-LN is sphere_clustering's
run bit for bit, and results do not depend on the job cut. The engine's equations:
tests/dynamics/test_normalization.py."""

from __future__ import annotations

import numpy as np
import pytest

from attnsweep.errors import ConfigError
from attnsweep.plan.config import load_sweep
from attnsweep.reduce.aggregate import collect
from attnsweep.run.job import run_job
from attnsweep.stores.io import open_store

NAME = "normalized_attention"


def sweep_of(tmp_path, sections: dict, top: dict | None = None) -> dict:
    """Every experiment of ``sections`` run in process, one sweep Dataset each."""
    plans = load_sweep({"dtype": "float64", **(top or {}), "experiments": sections}).plans
    out = {}
    for name, plan in plans.items():
        runs = [run_job(spec, tmp_path / name / "runs" / f"{path}.zarr", device="cpu", threads=1, progress=False)
                for path, spec in plan.jobs().items()]
        out[name] = open_store(collect(runs, tmp_path / name / "sweep.zarr")).load()
    return out


EYE2 = [[1.0, 0.0], [0.0, 1.0]]


@pytest.mark.parametrize(("patch", "key", "words"), [
    ({"heads": [0, 2]}, "heads", "outside"),
    ({"schemes": ["post_ln", "rms_ln"]}, "schemes", "rms_ln"),
    ({"window": 9}, "window", "wider than every n"),
    ({"window": 0}, "window", "minimum"),
    ({"mask": "sideways"}, "mask", "sideways"),
    ({"qk": "fixed"}, "qk_matrices", "is needed"),
    ({"d": [2, 3], "qk": "fixed", "qk_matrices": [EYE2]}, "qk_matrices", "single d and a single heads"),
    ({"d": [2], "heads": [2], "qk": "fixed", "qk_matrices": [EYE2]}, "qk_matrices", "1 matrices for heads = 2"),
    ({"d": [2], "heads": [2], "v": "fixed", "v_matrices": [EYE2, [[1.0, 0.0]]]}, "v_matrices[1]", "not d x d"),
    ({"d": [2], "heads": [1], "v_matrices": [EYE2]}, "v_matrices", "v: fixed only"),
    ({"integrator": "euler_anchor"}, "schemes", "no mix_ln, ln_scaling"),
    ({"observables": ["radius"]}, "observables", "clustered"),
    ({"dt": 50.0}, "dt", "exceeds"),
    ({"alpha": 0.0}, "alpha", "0"),
])
def test_bad_input_is_one_line_naming_the_key(patch, key, words):
    with pytest.raises(ConfigError) as error:
        load_sweep({"experiments": {NAME: {"n": [8], "d": [3], "heads": [1], **patch}}})
    message = str(error.value)
    assert f"experiments.{NAME}.{key}" in message and words in message and "\n" not in message, message


@pytest.mark.parametrize("n", [6, 3])  # n >= d, and n < d, where both integrate in the span of x(0)
def test_one_head_post_ln_is_sphere_clustering_bit_for_bit(tmp_path, n):
    """Same tokens (keyed alike), the same engine: every recorded array equal, through the jobs and
    the collection."""
    common = {"n": [n], "d": [4], "beta": [0.5, 4.0], "seeds": 3, "t_max": 6.0, "outputs": 13}
    sweeps = sweep_of(tmp_path, {
        "sphere_clustering": {**common, "observables": ["clustered", "clusters", "boolean_rank", "min_cosine"]},
        NAME: {**common, "heads": [1], "schemes": ["post_ln"], "observables": ["clustered", "clusters",
                                                                               "boolean_rank", "min_cosine"]},
    })
    ours = sweeps[NAME].isel(heads=0, scheme=0)
    theirs = sweeps["sphere_clustering"].isel(rho=0, gamma=0)
    for var in ("clustered", "clusters", "boolean_rank", "min_cosine"):
        a, b = ours[var].transpose("n", "d", "seed", "beta", "t"), theirs[var].transpose("n", "d", "seed", "beta", "t")
        np.testing.assert_array_equal(a.values, b.values, err_msg=var)
    assert 0 < float(ours["clustered"].isel(t=-1).mean()) <= 1  # something happened: a test that can fail


def test_a_job_is_independent_of_the_job_cut_and_the_chunking(tmp_path, monkeypatch):
    """One job for everything, one per (n, d, heads, seed), and chunks of one system: the same
    arrays bit for bit (tokens keyed by (n, d, seed), matrices by (d, seed, head))."""
    section = {"n": [4, 6], "d": [3], "heads": [1, 2], "beta": [1.0, 5.0], "seeds": 2, "qk": "ginibre",
               "v": "gaussian", "t_max": 2.0, "outputs": 5}
    sweeps = {}
    for name, wildcards in (("single", []), ("fanned", ["n", "d", "heads", "seed"]), ("chunked", ["n", "d"])):
        if name == "chunked":  # every system claims the whole 1 MiB budget: one a chunk
            monkeypatch.setattr("attnsweep.experiments.normalized_attention.simulate.system_bytes",
                                lambda *a: 1 << 20)
        sweeps[name] = sweep_of(tmp_path / name, {NAME: {**section, "wildcards": wildcards}}, {"block_mib": 1})[NAME]
    ref = sweeps["single"]
    assert not np.isnan(ref["clustered"].values).any()
    for other in ("fanned", "chunked"):
        for var in ref.data_vars:
            if var != "simulated":
                np.testing.assert_array_equal(sweeps[other][var].values, ref[var].values, err_msg=f"{other}: {var}")


def test_with_v_identity_the_span_of_the_tokens_carries_the_flow(tmp_path, monkeypatch):
    """n = 4 tokens in d = 7 with random Q_h^T K_h and V = I, integrated in the span of x(0) (4
    coordinates, the scores through U^T Q_h^T K_h U) and in R^7: the same flow in other coordinates.
    float64, beta <= 1, t = 1: rounding (1e-15 an operation) grown at most by e^{beta |QK| t}, a few
    hundred; allowed 1e-10."""
    section = {"n": [4], "d": [7], "heads": [2], "beta": [0.5, 1.0], "seeds": 3, "qk": "ginibre", "t_max": 1.0,
               "outputs": 11, "schemes": ["post_ln", "pre_ln", "peri_ln"], "observables": ["min_cosine", "radius",
                                                                                      "clustered"]}
    reduced = sweep_of(tmp_path / "reduced", {NAME: section})[NAME]
    monkeypatch.setattr("attnsweep.experiments.normalized_attention.simulate.reduced_dimension", lambda n, d, o: d)
    full = sweep_of(tmp_path / "full", {NAME: section})[NAME]
    for var in ("min_cosine", "radius", "radius_max"):
        np.testing.assert_allclose(reduced[var].values, full[var].values, rtol=0, atol=1e-10, err_msg=var)
    assert float(abs(full["min_cosine"].isel(t=-1) - full["min_cosine"].isel(t=0)).max()) > 0.01  # they move


def test_a_system_that_overflows_records_nan_not_counts(tmp_path):
    """USA's e^{beta <theta_i, theta_j>}/n past float32's range (beta = 200: e^200) turns the
    state to NaN; its records are NaN, while beta = 1 beside it records numbers."""
    section = {"n": [6], "d": [3], "heads": [1], "beta": [1.0, 200.0], "seeds": 2, "weights": "usa", "t_max": 1.0,
               "outputs": 3, "schemes": ["post_ln", "pre_ln"]}
    sweep = sweep_of(tmp_path, {NAME: section}, {"dtype": "float32"})[NAME]
    for var in ("clustered", "clusters", "boolean_rank", "min_cosine", "radius"):
        assert np.isnan(sweep[var].sel(beta=200.0).isel(t=-1)).all(), var
        assert np.isfinite(sweep[var].sel(beta=1.0)).all(), var


#: Non-symmetric per-head matrices, so that token j's x_j^T M and M x_j differ (d = 3, H = 2).
QK_FIXED = [[[0.9, 0.6, -0.2], [-0.3, 1.1, 0.4], [0.5, -0.7, 0.8]],
            [[1.2, -0.5, 0.1], [0.2, 0.7, 0.9], [-0.6, 0.3, 1.0]]]
V_FIXED = [[[1.0, 0.8, 0.0], [-0.4, 0.9, 0.3], [0.2, -0.6, 1.1]],
           [[0.7, 0.0, 0.5], [0.6, 1.2, -0.3], [-0.1, 0.4, 0.8]]]


def simuformer_run(m: np.ndarray, beta: float, bf: list, v: list, scheme: str, dt: float, steps: int):
    """simuformer's ``SimuXForm.step`` written out (tokens as the rows of M, heads averaged):
    A = (1/H) sum_h softmax(beta M BF_h M^T) (M V_h), then Post-LN ``M <- N(M + dt A)`` or Pre-LN
    ``r <- r + dt r sum_c A_c``, ``M <- N(M + dt (A - <M, A> M) / (r + 1e-9))``. Per step, the
    tokens and radii."""
    r = np.ones(len(m))
    out = [(m, r)]
    for _ in range(steps):
        a = np.zeros_like(m)
        for bf_h, v_h in zip(bf, v):
            scores = beta * m @ np.asarray(bf_h) @ m.T
            w = np.exp(scores - scores.max(1, keepdims=True))
            a += (w / w.sum(1, keepdims=True)) @ (m @ np.asarray(v_h)) / len(bf)
        if scheme == "post_ln":
            m = m + dt * a
        else:
            r = r + dt * r * a.sum(-1)
            m = m + dt * (a - (m * a).sum(-1, keepdims=True) * m) / (r[:, None] + 1e-9)
        m = m / np.linalg.norm(m, axis=-1, keepdims=True)
        out.append((m, r))
    return out


@pytest.mark.parametrize("v", ["fixed", "qk"])
@pytest.mark.parametrize("scheme", ["post_ln", "pre_ln"])
def test_euler_anchor_runs_simuformer_s_step_with_its_value_convention(tmp_path, v, scheme):
    """``integrator: euler_anchor`` against simuformer's update written out from its code, with
    non-symmetric V (fixed, or Q^T K tied): min cosine and mean radius at every step equal. Under
    Eq. 2.7's convention (token j contributing V x_j) they would differ by O(dt |V - V^T|) a step.
    float64, 10 steps: each step rounds at 1e-16 relative over a few dozen operations and a step's
    map has Lipschitz constant at most 1 + dt (1 + beta |BF| |V|) < 2, so the two agree to
    1e-13 x 2^10 = 1e-10; allowed 1e-9."""
    from attnsweep.experiments.sphere_clustering.simulate import initial_tokens

    n, d, beta, dt, steps = 5, 3, 1.5, 0.1, 10
    section = {"n": [n], "d": [d], "heads": [2], "beta": [beta], "seeds": 2, "qk": "fixed", "qk_matrices": QK_FIXED,
               "v": v, "reduction": "mean", "integrator": "euler_anchor", "schemes": [scheme], "dt": dt,
               "t_max": dt * steps, "outputs": steps + 1, "observables": ["clustered", "min_cosine", "radius"]}
    if v == "fixed":
        section["v_matrices"] = V_FIXED
    ours = sweep_of(tmp_path, {NAME: section})[NAME].isel(n=0, d=0, heads=0, scheme=0, beta=0)
    for k, seed in enumerate(ours["seed"].values):
        m0 = initial_tokens(n, d, int(seed), 0.0).numpy().astype(np.float64)
        run = simuformer_run(m0, beta, QK_FIXED, V_FIXED if v == "fixed" else QK_FIXED, scheme, dt, steps)
        gram = [m @ m.T for m, _ in run]
        min_cosine = [g[~np.eye(n, dtype=bool)].min() for g in gram]
        np.testing.assert_allclose(ours["min_cosine"].isel(seed=k).values, min_cosine, rtol=0, atol=1e-9)
        np.testing.assert_allclose(ours["radius"].isel(seed=k).values, [r.mean() for _, r in run], rtol=0, atol=1e-9)
    assert abs(min_cosine[-1] - min_cosine[0]) > 0.01  # the tokens moved: the comparison can fail
