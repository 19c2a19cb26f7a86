"""The CUDA path: the same observables as the CPU path (skipped without a CUDA device)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import yaml
from helpers.project import CONFIGS

from attnsweep.plan.config import load_sweep
from attnsweep.registry import get

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device: torch.cuda.is_available() is False"),
]


@pytest.mark.parametrize("eta_method", ["exact", "hutchinson"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_cuda_matches_cpu(dtype: torch.dtype, eta_method: str) -> None:
    config = {"block_mib": 1, "experiments": {"critical_scaling": {
        "n": [300], "d": [4, 16, 64], "rho": [0.2, 0.6], "gamma": [0.5, 2.0, 6.0],
        "alpha": [0.0, 0.5], "seeds": 2, "eta_method": eta_method, "probes": 8, "wildcards": [],
    }}}
    (job,) = load_sweep(config).plans["critical_scaling"].jobs().values()
    experiment = get("critical_scaling")
    cpu = experiment.simulate(job, torch.device("cpu"), dtype, progress=False)
    gpu = experiment.simulate(job, torch.device("cuda"), dtype, progress=False)
    tol = 1e-10 if dtype == torch.float64 else 2e-4
    for var in cpu.data_vars:
        np.testing.assert_allclose(gpu[var].values, cpu[var].values, rtol=tol, atol=tol, err_msg=var)


def test_mixture_training_cuda_matches_cpu() -> None:
    """Both engines and the three modes of paper 002 train alike on the GPU: float64, 200 steps."""
    config = {"experiments": {"mixture_training": {
        "K": [3], "m": [16], "omega": [0.3], "lr": [0.5], "seeds": 2, "steps": 200, "record_every": 20,
        "modes": ["joint", "three_stage", "attention_only"], "stage_1_steps": 20, "stage_2_steps": 50,
        "engines": ["direct", "gram"], "map_steps": [0, 100], "wildcards": [],
    }}}
    (job,) = load_sweep(config).plans["mixture_training"].jobs().values()
    experiment = get("mixture_training")
    cpu = experiment.simulate(job, torch.device("cpu"), torch.float64, progress=False)
    gpu = experiment.simulate(job, torch.device("cuda"), torch.float64, progress=False)
    moved = abs(cpu["loss_hard"].isel(step=-1) - cpu["loss_hard"].isel(step=0))
    assert float(moved.min()) > 1e-3  # every system trained: the comparison is not of initial states
    for var in cpu.data_vars:
        np.testing.assert_allclose(gpu[var].values, cpu[var].values, rtol=1e-9, atol=1e-9, err_msg=var)


@pytest.mark.parametrize("name", ["sphere_clustering", "causal_clustering", "cluster_emergence"])
def test_dynamics_cuda_matches_cpu(name: str) -> None:
    """The dynamics engines of papers 001, 003 and 004 (torch's ops on the GPU, numpy's products
    and counts on the CPU) give the same trajectories: float64, the tiny configs of the SLURM
    test, every observable, NaN where the CPU has NaN and 99.9% of values within 1e-8 (a value
    set by a threshold, a pair counted as clustered, may flip for a pair within rounding of it)."""
    tiny = CONFIGS / f"{name}.yaml"
    section = yaml.safe_load(tiny.read_text())["experiments"][name]
    section = {**section, "wildcards": []}
    (job,) = load_sweep({"dtype": "float64", "experiments": {name: section}}).plans[name].jobs().values()
    experiment = get(name)
    cpu = experiment.simulate(job, torch.device("cpu"), torch.float64, progress=False)
    gpu = experiment.simulate(job, torch.device("cuda"), torch.float64, progress=False)
    for var in cpu.data_vars:
        a, b = cpu[var].values, gpu[var].values
        assert np.array_equal(np.isnan(a), np.isnan(b)), var
        close = np.isclose(a, b, rtol=1e-8, atol=1e-8) | np.isnan(a)
        assert close.mean() > 0.999, (var, close.mean())
