"""Simulation of noisy_clustering: torch, imported by jobs only, never by the planner.

Every (seed, start, beta, K) of an (n, d) point is one system of a tensor batch. Initial tokens
come from :func:`attnsweep.run.rng.generator` keyed by (n, d, seed), the noise from one generator
per (n, d, seed) (:class:`attnsweep.dynamics.langevin.Increments`): every start, beta and K of a
seed sees the same draws, and the numbers do not depend on the job cut or the chunking.

A run records the observables every ``record_every`` steps; the job keeps, per run, the mean over
the window after the burn-in, its integrated autocorrelation time and the standard error that
follows, and a thinned trace of |m| and of the degree-2 order parameter.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import torch
import xarray as xr

from attnsweep.contract import JobSpec
from attnsweep.dynamics import driver, langevin, observables, sphere
from attnsweep.dynamics.ops import bmm
from attnsweep.experiments.noisy_clustering import averages
from attnsweep.experiments.noisy_clustering.resources import STARTS, couplings, recorded_steps, system_bytes
from attnsweep.grid import Axis
from attnsweep.run import rng
from attnsweep.stores.labels import SEED, label

NAME = "noisy_clustering"
DIMS = ("n", "d", "seed", "start", "beta", "K")
OBSERVABLES: dict[str, str] = {
    "order": "the length of m = (1/n) sum_i x_i (order parameter)",
    "order_sq": "the squared length of m (n times it is 1 for independent uniform tokens)",
    "alignment": "top eigenvalue of (1/n) sum_i x_i x_i^T - I/d (degree-2 order, antipodal states)",
    "clusters": "connected components of <x_i, x_j> >= 1 - cluster_delta",
    "energy": "interaction energy (1/(2 beta n^2)) sum_{i,j} e^{beta <x_i, x_j>} (001 Eq. 3.5)",
}
TRACED = ("order", "alignment")


def initial_tokens(n: int, d: int, seed: int, start: str) -> torch.Tensor:
    """Tokens (n, d) on S^{d-1}, float64: i.i.d. uniform, or every token at e_1."""
    if start == "point":
        return torch.eye(d, dtype=torch.float64)[0].expand(n, d).clone()
    gen = rng.generator(NAME, {"n": n, "d": d}, seed, "tokens")
    return sphere.normalise(torch.randn(n, d, generator=gen, dtype=torch.float64))


def record(x: torch.Tensor, gram: torch.Tensor, beta: torch.Tensor, cluster_delta: float) -> dict[str, torch.Tensor]:
    """Every observable of the systems ``x`` (B, n, d) with Gram matrices ``gram``, (B,) each."""
    n, d = x.shape[-2:]
    m = x.mean(-2)
    # ops.bmm: one product per system, the same bits whatever systems share the batch
    second = bmm(x.transpose(-1, -2), x) / n - torch.eye(d, dtype=x.dtype, device=x.device) / d
    return {
        "order": torch.linalg.vector_norm(m, dim=-1),
        "order_sq": (m * m).sum(-1),
        "alignment": torch.linalg.eigvalsh(second)[..., -1],
        "clusters": observables.cluster_count(gram, cluster_delta),
        "energy": torch.where(beta > 0, observables.energy(gram, beta), math.nan),
    }


def simulate(job: JobSpec, axes: tuple[Axis, ...], device: torch.device, dtype: torch.dtype,
             progress: bool = True) -> xr.Dataset:
    """Time averages, autocorrelation times and traces of every (n, d, seed, start, beta, K) of ``job``."""
    grid, opts, seeds = job.grid, job.options, job.seeds
    starts = opts["starts"]
    steps = recorded_steps(opts)
    times = steps * opts["dt"]
    trace = averages.trace_positions(len(steps), opts["trace_points"])
    systems = list(itertools.product(range(len(seeds)), range(len(starts)), range(len(grid["beta"])),
                                     range(len(grid["K"]))))
    shape = (len(grid["n"]), len(grid["d"]), len(seeds), len(starts), len(grid["beta"]), len(grid["K"]))
    out = {f"{var}{part}": np.full(shape, np.nan) for var in OBSERVABLES for part in ("", "_se", "_tau")}
    traces = {var: np.full((*shape, len(trace)), np.nan) for var in TRACED}
    size = torch.finfo(dtype).bits // 8
    window = times >= opts["burn_in"]
    run = driver.run(NAME, job, systems, lambda n, d: system_bytes(n, d, size), integrate, steps,
                     np.array([], np.int64), device, dtype, progress)
    for at, series in run:
        for var in OBSERVABLES:
            mean, se, tau = averages.window_statistics(series[var][:, window], opts["record_every"] * opts["dt"])
            out[var][at], out[f"{var}_se"][at], out[f"{var}_tau"][at] = mean, se, tau
        for var in TRACED:
            traces[var][at] = series[var][:, trace]
    coords = {"n": grid["n"], "d": grid["d"], "seed": seeds, "start": [STARTS.index(s) for s in starts],
              "beta": grid["beta"], "K": grid["K"]}
    result = xr.Dataset({var: (DIMS, array) for var, array in out.items()}, coords=coords)
    for var, array in traces.items():
        result[f"{var}_trace"] = ((*DIMS, "trace_t"), array)
    result.coords["trace_t"] = times[trace]
    label(result, axes, {"seed": SEED}, variables())
    result["start"].attrs.update(long_name="initial tokens", flag_values=list(range(len(STARTS))),
                                 flag_meanings=" ".join(STARTS))
    result["trace_t"].attrs.update(long_name="time of a traced record, in the clock's unit", units="1")
    result.attrs.update({key: opts[key] for key in ("normalisation", "noise", "clock", "K_unit", "dt", "burn_in",
                                                    "window", "record_every", "level", "cluster_delta")})
    return result


def variables() -> dict[str, dict[str, str]]:
    """Long names and units of every data variable (times in the unit of the ``clock`` attr)."""
    out = {}
    for var, text in OBSERVABLES.items():
        out[var] = {"long_name": f"time average of {text} over the window after the burn-in", "units": "1"}
        out[f"{var}_se"] = {"long_name": f"standard error of {var} from its autocorrelation time", "units": "1"}
        out[f"{var}_tau"] = {"long_name": f"integrated autocorrelation time of {var}, in the clock's unit",
                             "units": "1"}
    for var in TRACED:
        out[f"{var}_trace"] = {"long_name": f"{OBSERVABLES[var]} at the traced times", "units": "1"}
    return out


def integrate(n: int, d: int, index: np.ndarray, grid: dict[str, list], seeds: list[int], opts: dict[str, Any],
              steps: np.ndarray, snap_steps: np.ndarray, device: torch.device,
              dtype: torch.dtype) -> dict[str, np.ndarray]:
    """Integrate the systems ``index`` (rows of seed, start, beta, K positions) of one (n, d) to the
    last recorded step; every observable at ``steps``, arrays (systems, steps)."""
    s, a, b, c = index.T
    starts = opts["starts"]
    x0 = torch.stack([initial_tokens(n, d, seeds[i], starts[j]) for i, j in zip(s, a)]).to(device, dtype)
    beta_values = np.asarray(grid["beta"], float)[b]
    coupling = couplings(grid["K"], grid["beta"], d, opts["K_unit"])[c, b] if len(index) else np.array([])
    beta = torch.tensor(beta_values, dtype=dtype, device=device)
    sigma = torch.tensor(np.where(np.isinf(coupling), 0.0, coupling ** -0.5), dtype=dtype, device=device)
    dt: float | torch.Tensor = opts["dt"]
    if opts["clock"] == "noise":  # s = t / K: a step of dt in s is dt K in t
        dt = torch.tensor(opts["dt"] * coupling, dtype=dtype, device=device)
    seed_rows, rows = np.unique(s, return_inverse=True)
    shape = (n if opts["noise"] == "independent" else 1, d)
    increments = langevin.Increments([rng.generator(NAME, {"n": n, "d": d}, seeds[i], "noise") for i in seed_rows],
                                     rows, shape, device, dtype)
    step = langevin.stepper(beta, opts["normalisation"], dt, sigma, increments)

    def sample(k: int, x: torch.Tensor, record_now: bool, snapshot: bool) -> tuple[dict[str, torch.Tensor], Any]:
        gram = observables.gram(x)
        return record(x, gram, beta, opts["cluster_delta"]), gram  # the step from k reuses the Gram matrix

    return driver.trajectory(x0, step, sample, steps, snap_steps)
