"""Simulation of sphere_clustering (paper 001): torch, imported by jobs only, never by the planner.

Every (seed, rho, beta, gamma) of an (n, d) point is one system of a tensor batch, integrated
together in chunks of at most ``block_mib``. Initial tokens and random matrices come from
:func:`attnsweep.run.rng.generator` keyed by (n, d, seed) and (d, seed), so every rho, beta and
gamma sees the same draws and the numbers do not depend on the job cut or the chunking.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import torch
import xarray as xr

from attnsweep.contract import JobSpec
from attnsweep.dynamics import driver, ensembles, observables, sphere
from attnsweep.experiments.sphere_clustering.resources import reduced_dimension, system_bytes
from attnsweep.grid import Axis
from attnsweep.run import rng
from attnsweep.stores.labels import SEED, TIME, label

NAME = "sphere_clustering"
DIMS = ("n", "d", "seed", "rho", "beta", "gamma", "t")

VARIABLES: dict[str, dict[str, str]] = {
    "clustered": {"long_name": "fraction of pairs i != j with <x_i, x_j> >= 1 - delta (Fig. 3)", "units": "1"},
    "clusters": {"long_name": "connected components of <x_i, x_j> >= 1 - cluster_delta (Fig. 4)", "units": "1"},
    "boolean_rank": {"long_name": "rank of 1[<x_i, x_j> > 0.9999], the authors' cluster count", "units": "1"},
    "min_cosine": {"long_name": "min over i != j of <x_i, x_j>", "units": "1"},
    "energy": {"long_name": "interaction energy E_beta (Eq. 3.5); Q = K = V = I only", "units": "1"},
    "snapshot": {"long_name": "first two coordinates of every token at the snapshot times (Fig. 4)", "units": "1"},
}


def initial_tokens(n: int, d: int, seed: int, rho: float) -> torch.Tensor:
    """Tokens (n, d) on S^{d-1}, float64: x_i = N(sqrt(rho) z_0 + sqrt(1 - rho) z_i), z ~ N(0, I_d/d)
    (000 Eq. 25, normalised); rho = 0 gives i.i.d. uniform tokens (001 Section 2)."""
    gen = rng.generator(NAME, {"n": n, "d": d}, seed, "tokens")
    z = torch.randn(n + 1, d, generator=gen, dtype=torch.float64) / math.sqrt(d)
    return sphere.normalise(math.sqrt(rho) * z[0] + math.sqrt(1 - rho) * z[1:])


def matrices(opts: dict[str, Any], d: int, seed: int) -> tuple[torch.Tensor, torch.Tensor] | None:
    """(Q^T K, V) of one realisation; None for the identity."""
    if opts["matrices"] == "identity":
        return None
    if opts["matrices"] == "fixed":
        return ensembles.fixed(opts["q"], opts["k"], opts["v"])
    return ensembles.draw(opts["matrices"], d, rng.generator(NAME, {"d": d}, seed, "matrices"))


def simulate(job: JobSpec, axes: tuple[Axis, ...], device: torch.device, dtype: torch.dtype,
             progress: bool = True) -> xr.Dataset:
    """Every observable at every output time of every (n, d, seed, rho, beta, gamma) of ``job``."""
    grid, opts, seeds = job.grid, job.options, job.seeds
    steps, snap_steps = driver.recorded_steps(opts)
    systems = list(itertools.product(range(len(seeds)), range(len(grid["rho"])), range(len(grid["beta"])),
                                     range(len(grid["gamma"]))))
    shape = (len(grid["n"]), len(grid["d"]), len(seeds), len(grid["rho"]), len(grid["beta"]), len(grid["gamma"]))
    out = {var: np.full((*shape, len(steps)), np.nan) for var in opts["observables"]}
    snapshot = np.full((*shape, len(snap_steps), max(grid["n"]), 2), np.nan)
    size = torch.finfo(dtype).bits // 8
    run = driver.run(NAME, job, systems,
                     lambda n, d: system_bytes(n, reduced_dimension(n, d, opts), size, opts["integrator"]),
                     integrate, steps, snap_steps, device, dtype, progress)
    for at, arrays in run:
        for var, array in arrays.items():
            if var == "snapshot":
                snapshot[at + (slice(None), slice(0, array.shape[2]))] = array  # (systems, t, n, 2)
            else:
                out[var][at] = array
    coords = {"n": grid["n"], "d": grid["d"], "seed": seeds, "rho": grid["rho"], "beta": grid["beta"],
              "gamma": grid["gamma"], "t": steps * opts["dt"]}
    result = xr.Dataset({var: (DIMS, array) for var, array in out.items()}, coords=coords)
    if len(snap_steps):
        result["snapshot"] = ((*DIMS[:-1], "snapshot_t", "token", "xy"), snapshot)
        result.coords["snapshot_t"] = snap_steps * opts["dt"]
        result.coords["xy"] = [0, 1]
    label(result, axes, {"seed": SEED, "t": TIME}, VARIABLES)
    result.attrs.update(normalisation=opts["normalisation"], integrator=opts["integrator"], dt=opts["dt"],
                        matrices=opts["matrices"], matrices_definition=ensembles.ENSEMBLES[opts["matrices"]],
                        delta=opts["delta"],
                        cluster_delta=opts["cluster_delta"])
    return result


def integrate(n: int, d: int, index: np.ndarray, grid: dict[str, list], seeds: list[int], opts: dict[str, Any],
              steps: np.ndarray, snap_steps: np.ndarray, device: torch.device,
              dtype: torch.dtype) -> dict[str, np.ndarray]:
    """Integrate the systems ``index`` (rows of seed, rho, beta, gamma positions) of one (n, d)
    to the last output step, recording the observables at ``steps``; arrays (systems, steps)."""
    s, r, b, g = index.T
    drawn_tokens = {(i, j): initial_tokens(n, d, seeds[i], grid["rho"][j]) for i, j in set(zip(s, r))}
    x0 = torch.stack([drawn_tokens[i, j] for i, j in zip(s, r)])
    beta = torch.tensor([grid["beta"][i] + grid["gamma"][j] * math.log(n) for i, j in zip(b, g)],
                        dtype=dtype, device=device)
    drawn = {seed: matrices(opts, d, seeds[seed]) for seed in np.unique(s)}
    qk = v = None
    if drawn[s[0]] is not None:
        qk = torch.stack([drawn[i][0] for i in s]).to(device, dtype)
        v = torch.stack([drawn[i][1] for i in s]).to(device, dtype)
    step = sphere.stepper(opts["integrator"], beta, qk, v, opts["normalisation"], opts["dt"])
    identity = opts["matrices"] == "identity"
    basis = None
    if identity and reduced_dimension(n, d, opts) < d:  # the flow stays in the span of x(0)
        x0, basis = sphere.span_coordinates(x0)
        basis = basis[:, :2].to(device, dtype)  # the two coordinates a snapshot keeps
    recorders = {
        "clustered": lambda g: observables.clustered_pairs(g, opts["delta"]),
        "clusters": lambda g: observables.cluster_count(g, opts["cluster_delta"]),
        "boolean_rank": observables.boolean_rank,
        "min_cosine": observables.min_cosine,
        "energy": lambda g: (torch.where(beta > 0, observables.energy(g, beta), math.nan) if identity
                             else torch.full_like(beta, math.nan)),
    }

    def sample(k: int, x: torch.Tensor, record: bool, snapshot: bool) -> tuple[dict[str, torch.Tensor], Any]:
        values, gram = {}, None
        if record:
            gram = observables.gram(x)
            values = {var: recorders[var](gram) for var in opts["observables"]}
        if snapshot:
            values["snapshot"] = x[..., :2] if basis is None else x @ basis.transpose(-1, -2)
        return values, gram  # the step from k reuses the Gram matrix

    return driver.trajectory(x0.to(device, dtype), lambda k, x, gram: step(x, gram), sample, steps, snap_steps)
