"""``eta_method: none``: the layer and lambda without eta, for contexts where any eta costs more
than the layer. Truth: the same job with exact eta (every other variable agrees), the options'
effect on the job identity, the cost model and the figure list."""

from __future__ import annotations

import numpy as np
import pytest

from attnsweep.plan.config import load_sweep
from attnsweep.run.job import run_job
from attnsweep.stores.io import open_store

SECTION = {"n": [12], "d": [4, 40], "rho": [0.2, 0.7], "gamma": [0.5, 3.0], "alpha": [0.0, 0.5], "seeds": 2,
           "wildcards": []}


def plan(eta_method: str):
    config = {"dtype": "float64", "device": "cpu",
              "experiments": {"critical_scaling": {**SECTION, "eta_method": eta_method}}}
    return load_sweep(config).plans["critical_scaling"]


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    folder = tmp_path_factory.mktemp("eta_none")
    out = {}
    for method in ("exact", "none"):
        ((path, spec),) = plan(method).jobs().items()
        out[method] = (path, open_store(run_job(spec, folder / method / f"{path}.zarr", device="cpu",
                                                progress=False)).load())
    return out


def test_lambda_and_the_rest_as_with_exact_eta(stores):
    # float64; d = 40 > n + 1 runs in the tokens' span on both paths. rtol 1e-12: the exact path
    # forms the layer inside its Gram-matrix pass, a different order of the same sums.
    exact, lean = stores["exact"][1], stores["none"][1]
    assert np.isnan(lean["eta"].values).all() and np.isfinite(exact["eta"].values).all()
    for var in ("lambda", "n_eff", "cos_in_quantile", "cos_out_quantile", "eta_plateau"):
        np.testing.assert_allclose(lean[var].values, exact[var].values, rtol=1e-12, atol=1e-14, err_msg=var)
    assert lean.attrs["eta_method"].startswith("not computed")


def test_identity_cost_and_figures():
    exact, lean = plan("exact"), plan("none")
    assert set(exact.jobs()) != set(lean.jobs())  # eta_method is part of the job's identity
    (spec_exact,), (spec_lean,) = exact.jobs().values(), lean.jobs().values()
    assert lean.experiment.job_seconds(spec_lean) < exact.experiment.job_seconds(spec_exact)
    names = [f.name for f in lean.experiment.figures(lean.grid, lean.options)]
    assert names == ["lambda_n~12", "finite_size"]
    assert [f.name for f in exact.experiment.figures(exact.grid, exact.options)] == [
        "lambda_n~12", "eta_n~12", "finite_size"]


# ------------------------------------------------------------------ query tokens


def query_plan(query_tokens, eta_method: str = "none", n=(12, 40)):
    section = {**SECTION, "n": list(n), "eta_method": eta_method, "query_tokens": query_tokens}
    config = {"dtype": "float64", "device": "cpu", "experiments": {"critical_scaling": section}}
    return load_sweep(config).plans["critical_scaling"]


def test_query_tokens_change_only_the_jobs_they_sample():
    """Where no n exceeds query_tokens the option is left out of the job: the stores of sweeps
    from before it keep their names. Above it, it is the job's, and the layer's cost falls
    (4 m n d' against 4 n^2 d' a gamma)."""
    before = plan("none")
    assert set(query_plan(None, n=[12]).jobs()) == set(before.jobs())
    assert set(query_plan(12, n=[12]).jobs()) == set(before.jobs())
    (spec,) = query_plan(12, n=[12]).jobs().values()
    assert "query_tokens" not in spec.options
    sampled = query_plan(16, n=[40])
    (spec,) = sampled.jobs().values()
    (whole,) = query_plan(None, n=[40]).jobs().values()
    assert spec.options["query_tokens"] == 16 and spec.key() != whole.key()
    assert sampled.experiment.job_seconds(spec) < sampled.experiment.job_seconds(whole)


def test_query_tokens_need_eta_method_none():
    from attnsweep.errors import ConfigError

    with pytest.raises(ConfigError, match=r"experiments\.critical_scaling\.query_tokens.*eta_method: none"):
        query_plan(16, eta_method="exact", n=[40])
    query_plan(40, eta_method="exact", n=[40])  # no n above it: nothing sampled, accepted


def test_a_job_with_query_tokens(tmp_path):
    """The whole job at n = 40 with 16 query tokens: lambda at n = 12 is the unsampled job's (the
    draws of one n do not depend on the other n of the job); at n = 40 the layer ran at 16 rows,
    so lambda differs from all rows' but stays a ratio of squared distances (finite, positive)."""
    ((path, spec),) = query_plan(16, n=[12, 40]).jobs().items()
    ((_, whole),) = query_plan(None, n=[12, 40]).jobs().items()
    sampled = open_store(run_job(spec, tmp_path / "q.zarr", device="cpu", progress=False)).load()
    full = open_store(run_job(whole, tmp_path / "w.zarr", device="cpu", progress=False)).load()
    np.testing.assert_array_equal(sampled["lambda"].sel(n=12).values, full["lambda"].sel(n=12).values)
    at40 = sampled["lambda"].sel(n=40).values
    assert np.isfinite(at40).all() and (at40 > 0).all()
    assert not np.array_equal(at40, full["lambda"].sel(n=40).values)
    assert sampled.attrs["query_tokens"].startswith("16 tokens drawn uniformly where n > 16")
    assert full.attrs["query_tokens"] == "every token"
