"""``eta_method: none``: the layer and lambda without eta, for contexts where any eta costs more
than the layer. Truth: the same job with exact eta (every other variable agrees), the options'
effect on the job identity, the cost model and the figure list."""

from __future__ import annotations

import numpy as np
import pytest

from attnsweep.config import load_sweep
from attnsweep.jobs import run_job
from attnsweep.store import open_store

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
