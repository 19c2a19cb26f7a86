"""Simulation of circle_synchronization: torch for the flow, imported by jobs only.

Every (seed, normalisation, beta) of an n is one system of a batch. The starting angles come from
:func:`attnsweep.run.rng.generator` keyed by n and the seed: every beta and normalisation of a seed
starts from the same angles, whatever the job cut. The flow runs on ``device`` in ``dtype``; its end
states are polished, classified and certified in float64 on the CPU (:mod:`.critical`).
"""

from __future__ import annotations

import itertools

import numpy as np
import torch
import xarray as xr

from attnsweep.contract import JobSpec
from attnsweep.dynamics import cpu_chunk_bytes
from attnsweep.experiments.circle_synchronization import critical, flow, potential
from attnsweep.experiments.circle_synchronization.resources import system_bytes
from attnsweep.grid import Axis
from attnsweep.run import rng
from attnsweep.stores.labels import SEED, label

NAME = "circle_synchronization"
DIMS = ("n", "beta", "seed", "normalisation")
NORMALISATIONS = ("usa", "sa")
VARIABLES: dict[str, dict[str, str]] = {
    "kind": {"long_name": "class of the polished end state", "flag_values": list(range(len(critical.KINDS))),
             "flag_meanings": " ".join(critical.KINDS), "units": "1"},
    "top": {"long_name": "largest eigenvalue of H = n^2 d^2E off the rotation at the polished state", "units": "1"},
    "margin": {"long_name": "-top / the spectral norm of H (positive: a strict local maximum)", "units": "1"},
    "residual": {"long_name": "norm of n^2 grad E at the polished state, rounding charged", "units": "1"},
    "certified": {"long_name": "1 where the Newton-Kantorovich certificate holds (critical.py)", "units": "1"},
    "energy": {"long_name": "E_beta of Eq. 7.4 of 001 at the polished state (minus its beta -> 0 constant)",
               "units": "1"},
    "order": {"long_name": "length of (1/n) sum_j e^{i theta_j} at the polished state", "units": "1"},
    "clusters": {"long_name": "clusters of the polished state (angles within merge of a neighbour)", "units": "1"},
    "flow_time": {"long_name": "time the flow ran before the polish", "units": "1"},
    "theta": {"long_name": "polished angles, sorted, the first at 0 (NaN past n)", "units": "rad"},
}


def initial_angles(n: int, seed: int) -> torch.Tensor:
    """n i.i.d. uniform angles, float64 on the CPU."""
    return flow.uniform_angles(n, rng.generator(NAME, {"n": n}, seed, "angles"))


def simulate(job: JobSpec, axes: tuple[Axis, ...], device: torch.device, dtype: torch.dtype,
             progress: bool = True) -> xr.Dataset:
    """The polished end state of every (n, beta, seed, normalisation) of ``job``, classified."""
    grid, opts, seeds = job.grid, job.options, job.seeds
    norms = opts["normalisations"]
    slots = int(max(grid["n"]))
    shape = (len(grid["n"]), len(grid["beta"]), len(seeds), len(norms))
    out = {var: np.full(shape, np.nan) for var in VARIABLES if var != "theta"}
    theta_out = np.full((*shape, slots), np.nan)
    budget = cpu_chunk_bytes(job.block_mib)
    for a, n in enumerate(map(int, grid["n"])):
        starts = torch.stack([initial_angles(n, s) for s in seeds])
        systems = list(itertools.product(range(len(grid["beta"])), range(len(seeds)), range(len(norms))))
        per_chunk = max(1, budget // system_bytes(n, torch.finfo(dtype).bits // 8))
        for first in range(0, len(systems), per_chunk):
            index = np.array(systems[first:first + per_chunk])
            b, s, k = index.T
            beta = np.asarray(grid["beta"], float)[b]
            for norm in np.unique(k):
                rows = np.nonzero(k == norm)[0]
                theta0 = starts[s[rows]].to(device, dtype)
                end, time = flow.integrate(theta0, torch.as_tensor(beta[rows], dtype=dtype, device=device),
                                           norms[norm], opts["courant"], opts["t_max"], opts["flow_tol"])
                polished = critical.polish(end.cpu().double().numpy(), beta[rows])
                found = critical.classify(polished, beta[rows], opts["merge"])
                at = (a, b[rows], s[rows], k[rows])
                for var in ("kind", "top", "margin", "residual", "certified"):
                    out[var][at] = found[var]
                out["energy"][at] = potential.energy(polished, beta[rows])
                out["order"][at] = np.abs(np.exp(1j * polished).mean(-1))
                out["clusters"][at] = [len(m) for m in critical.cluster_masses(polished, opts["merge"])]
                out["flow_time"][at] = time.cpu().double().numpy()
                theta_out[(*at, slice(0, n))] = canonical(polished)
    coords = {"n": grid["n"], "beta": grid["beta"], "seed": seeds,
              "normalisation": [NORMALISATIONS.index(x) for x in norms], "slot": np.arange(slots)}
    # Floats throughout, the classes and counts too: a sweep's union of blocks holds NaN where a
    # refined point has no such seed, which an integer array cannot.
    result = xr.Dataset({var: (DIMS, array) for var, array in out.items()}, coords=coords)
    result["theta"] = ((*DIMS, "slot"), theta_out)
    label(result, axes, {"seed": SEED}, VARIABLES)
    result["normalisation"].attrs.update(long_name="attention weights", flag_values=list(range(len(NORMALISATIONS))),
                                         flag_meanings=" ".join(NORMALISATIONS))
    result["slot"].attrs.update(long_name="particle, in the order of its angle", units="1")
    result.attrs.update({key: opts[key] for key in ("courant", "t_max", "flow_tol", "merge")})
    return result


def canonical(theta: np.ndarray) -> np.ndarray:
    """Angles (B, n) sorted in [0, 2 pi), rotated so the first is 0."""
    a = np.sort(np.mod(theta, 2 * np.pi), -1)
    return a - a[..., :1]
