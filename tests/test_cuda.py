"""The CUDA path: the same observables as the CPU path (skipped without a CUDA device)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnsweep.config import load_sweep
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
