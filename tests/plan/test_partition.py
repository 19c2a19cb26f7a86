"""The numbers do not depend on how the sweep is cut into jobs (plan.Plan, jobs, aggregate).

Independent truth: the same grid run as one job per (n, d, seed), as one job per
(n, d, rho, gamma, seed), and as a single job must give identical sweep stores after
``collect`` (float64, exact equality). This holds only if the random draws depend on
(n, d, seed) alone, which is checked directly: common random numbers across rho and gamma,
distinct numbers across seeds.
"""

from __future__ import annotations

import math
import threading

import numpy as np
import pytest
import torch

from attnsweep.experiments.critical_scaling import simulate
from attnsweep.experiments.critical_scaling.simulate import draw_probes, draw_tokens, prepare
from attnsweep.plan.config import load_sweep
from attnsweep.reduce.aggregate import collect
from attnsweep.run.job import run_job
from attnsweep.stores.io import open_store

SECTION = {
    "n": [16, 24],
    "d": [4, 8],
    "rho": [0.0, 0.4, 0.8],
    "gamma": [0.5, 6.0],
    "alpha": [0.0, 0.5],
    "seeds": 2,
    "eta_method": "hutchinson",  # probes drawn per (n, d, seed): the stricter partition test
    "probes": 4,
}


def plan(wildcards: list[str]):
    config = {"dtype": "float64", "experiments": {"critical_scaling": {**SECTION, "wildcards": wildcards}}}
    return load_sweep(config).plans["critical_scaling"]


def run_plan(p, folder) -> object:
    """Run every job of plan ``p`` on the CPU and collect them into one sweep store."""
    runs = []
    for path, spec in p.jobs().items():
        runs.append(run_job(spec, folder / "runs" / f"{path}.zarr", device="cpu", progress=False))
    return open_store(collect(runs, folder / "sweep.zarr")).load()


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory):
    per_point = plan(["n", "d", "seed"])
    per_cell = plan(["n", "d", "rho", "gamma", "seed"])
    single = plan([])  # one job for everything
    assert len(per_point.jobs()) == 2 * 2 * 2
    assert len(per_cell.jobs()) == 2 * 2 * 3 * 2 * 2
    assert len(single.jobs()) == 1
    return {
        name: run_plan(p, tmp_path_factory.mktemp(name))
        for name, p in (("per_point", per_point), ("per_cell", per_cell), ("single", single))
    }


@pytest.mark.parametrize("other", ["per_cell", "single"])
def test_partition_gives_identical_sweeps(sweeps, other):
    """Every variable and coordinate equal, bit for bit, to the per-(n, d, seed) partition."""
    ref, ds = sweeps["per_point"], sweeps[other]
    assert set(ds.data_vars) == set(ref.data_vars)
    assert dict(ds.sizes) == dict(ref.sizes)
    for coord in ref.coords:
        np.testing.assert_array_equal(ds[coord].values, ref[coord].values, err_msg=coord)
    for var in ref.data_vars:
        assert ds[var].dims == ref[var].dims, var
        assert not np.isnan(ref[var].values).any(), f"{var}: unfilled cells after collect"
        np.testing.assert_array_equal(ds[var].values, ref[var].values, err_msg=var)


def test_drawing_ahead_changes_no_number(sweeps, tmp_path, monkeypatch):
    """On a GPU a job draws the next (n, d, seed) on a worker thread while the device computes:
    forced on the CPU here, the single job's 8 systems are all drawn on that thread, and its
    sweep equals the per-(n, d, seed) cut bit for bit."""
    threads = []

    def recording(*args):
        threads.append(threading.current_thread().name)
        return prepare(*args)

    monkeypatch.setattr(simulate, "DRAW_AHEAD_ON", frozenset({"cpu"}))
    monkeypatch.setattr(simulate, "prepare", recording)
    ahead = run_plan(plan([]), tmp_path)
    assert len(threads) == 8 and all(name.startswith("attnsweep-draw") for name in threads)
    for var in sweeps["per_point"].data_vars:
        np.testing.assert_array_equal(ahead[var].values, sweeps["per_point"][var].values, err_msg=var)


def test_sweep_covers_grid(sweeps):
    ds = sweeps["per_point"]
    assert ds["n"].values.tolist() == [16, 24]
    assert ds["d"].values.tolist() == [4, 8]
    assert ds["seed"].values.tolist() == [0, 1]
    assert ds["rho"].values.tolist() == [0.0, 0.4, 0.8]
    assert ds["gamma"].values.tolist() == [0.5, 6.0]
    assert ds.sizes["probe"] == 4


def test_common_random_numbers():
    """Tokens and probes depend on (n, d, seed) only: the same z_0, z_i for every rho and
    gamma (draw_tokens takes neither), reproducible, and different for another seed, n or d."""
    z0, z = draw_tokens(16, 4, 0, "scaled")
    z0_again, z_again = draw_tokens(16, 4, 0, "scaled")
    assert torch.equal(z0, z0_again) and torch.equal(z, z_again)
    z0_other, z_other = draw_tokens(16, 4, 1, "scaled")
    assert not torch.equal(z, z_other) and not torch.equal(z0, z0_other)
    assert not torch.equal(draw_tokens(16, 8, 0, "scaled")[1][:, :4], z)
    assert not torch.equal(draw_tokens(24, 4, 0, "scaled")[1][:16], z)
    # noise conventions differ by the scale only
    z0_std, z_std = draw_tokens(16, 4, 0, "standard")
    torch.testing.assert_close(z_std / math.sqrt(4), z, rtol=1e-15, atol=0)
    torch.testing.assert_close(z0_std / math.sqrt(4), z0, rtol=1e-15, atol=0)
    # probes: same prefix for any count, another seed another draw
    p4, p8 = draw_probes(16, 4, 0, 4), draw_probes(16, 4, 0, 8)
    assert torch.equal(p8[:4], p4)
    assert not torch.equal(draw_probes(16, 4, 1, 4), p4)
    assert set(p8.unique().tolist()) == {-1, 1}


def test_sweep_reflects_common_random_numbers(sweeps):
    """In the stored sweep, the rho-independent input statistic (eta_plateau depends on the
    norms of x_i = sqrt(rho) z_0 + sqrt(1 - rho) z_i) at rho = 0 equals (1 - 1/d) mean 1/||z_i||^2
    from draw_tokens directly, so the jobs really used those draws."""
    ds = sweeps["single"]
    for n in (16, 24):
        for d in (4, 8):
            for seed in (0, 1):
                _, z = draw_tokens(n, d, seed, "scaled")
                expected = (1 - 1 / d) * (1 / z.square().sum(-1)).mean().item()
                got = ds["eta_plateau"].sel(n=n, d=d, seed=seed, rho=0.0).item()
                assert got == pytest.approx(expected, rel=1e-12)
