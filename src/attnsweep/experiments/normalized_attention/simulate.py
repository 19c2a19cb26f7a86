"""Simulation of normalized_attention: torch, imported by jobs only, never by the planner.

Every (heads, seed, scheme, beta) of an (n, d) point is one system; a chunk's systems of one H and
one scheme are integrated together (:mod:`attnsweep.dynamics.normalization`). Initial tokens are
sphere_clustering's (i.i.d. uniform, keyed by (n, d, seed)) and the matrices keyed by (d, seed,
head) (:mod:`.matrices`): every scheme, H and beta sees the same draws, so the schemes are compared
on the same realisations, and one head under Post-LN is sphere_clustering's run bit for bit.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import torch
import xarray as xr

from attnsweep.contract import JobSpec
from attnsweep.dynamics import driver, heads, observables, sphere
from attnsweep.dynamics.normalization import SCHEMES, Scheme, State, stepper
from attnsweep.experiments.normalized_attention import matrices
from attnsweep.experiments.normalized_attention.resources import reduced_dimension, system_bytes
from attnsweep.experiments.sphere_clustering.simulate import initial_tokens
from attnsweep.grid import Axis
from attnsweep.stores.labels import SEED, TIME, label

NAME = "normalized_attention"
DIMS = ("n", "d", "heads", "seed", "scheme", "beta", "t")

VARIABLES: dict[str, dict[str, str]] = {
    "clustered": {"long_name": "fraction of pairs i != j with <theta_i, theta_j> >= 1 - delta (001 Fig. 3)",
                  "units": "1"},
    "clusters": {"long_name": "connected components of <theta_i, theta_j> >= 1 - cluster_delta", "units": "1"},
    "boolean_rank": {"long_name": "rank of 1[<theta_i, theta_j> > 0.9999], simuformer's cluster count", "units": "1"},
    "min_cosine": {"long_name": "min over i != j of <theta_i, theta_j>", "units": "1"},
    "radius": {"long_name": "mean radius r_i, the norm of x_i (1 without a radius)", "units": "1"},
    "radius_max": {"long_name": "largest radius r_i, the norm of x_i (1 without a radius)", "units": "1"},
}


def simulate(job: JobSpec, axes: tuple[Axis, ...], device: torch.device, dtype: torch.dtype,
             progress: bool = True) -> xr.Dataset:
    """Every observable at every output time of every (n, d, heads, seed, scheme, beta) of ``job``."""
    grid, opts, seeds = job.grid, job.options, job.seeds
    steps, _ = driver.recorded_steps(opts | {"snapshot_times": []})
    systems = list(itertools.product(range(len(grid["heads"])), range(len(seeds)), range(len(opts["schemes"])),
                                     range(len(grid["beta"]))))
    shape = (len(grid["n"]), len(grid["d"]), len(grid["heads"]), len(seeds), len(opts["schemes"]), len(grid["beta"]))
    names = [v for var in opts["observables"] for v in ((var, "radius_max") if var == "radius" else (var,))]
    out = {var: np.full((*shape, len(steps)), np.nan) for var in names}
    size = torch.finfo(dtype).bits // 8
    most = int(max(grid["heads"]))
    run = driver.run(NAME, job, systems,
                     lambda n, d: system_bytes(n, reduced_dimension(n, d, opts), most, size, opts["integrator"]),
                     integrate, steps, np.array([], np.int64), device, dtype, progress)
    for at, arrays in run:
        for var, array in arrays.items():
            out[var][at] = array
    coords = {"n": grid["n"], "d": grid["d"], "heads": grid["heads"], "seed": seeds,
              "scheme": [SCHEMES.index(s) for s in opts["schemes"]], "beta": grid["beta"], "t": steps * opts["dt"]}
    result = xr.Dataset({var: (DIMS, array) for var, array in out.items()}, coords=coords)
    label(result, axes, {"seed": SEED, "t": TIME}, VARIABLES)
    result["scheme"].attrs.update(long_name="normalisation scheme", flag_values=list(range(len(SCHEMES))),
                                  flag_meanings=" ".join(SCHEMES))
    result.attrs.update({key: opts[key] for key in ("weights", "reduction", "qk", "v", "mask", "integrator", "dt",
                                                    "t_max", "delta", "cluster_delta")})
    result.attrs.update(window=-1 if opts["window"] is None else opts["window"],
                        matrices_definition=matrices.definition(opts))
    if opts["alpha"] is not None:  # nGPT's step and Mix-LN's switch, where those schemes run
        result.attrs["alpha"] = opts["alpha"]
    if opts["mix_fraction"] is not None:
        result.attrs["tau"] = switch_time(opts)
    return result


def switch_time(opts: dict[str, Any]) -> float:
    """Mix-LN's tau = mix_fraction t_max (0 where no Mix-LN runs and the option is left out)."""
    return 0.0 if opts["mix_fraction"] is None else opts["mix_fraction"] * opts["t_max"]


def integrate(n: int, d: int, index: np.ndarray, grid: dict[str, list], seeds: list[int], opts: dict[str, Any],
              steps: np.ndarray, snap_steps: np.ndarray, device: torch.device,
              dtype: torch.dtype) -> dict[str, np.ndarray]:
    """Integrate the systems ``index`` (rows of heads, seed, scheme, beta positions) of one (n, d)
    to the last output step, one (heads, scheme) group at a time; arrays (systems, steps)."""
    out: dict[str, np.ndarray] = {}
    for h, c in sorted({(int(h), int(c)) for h, _, c, _ in index}):
        rows = np.flatnonzero((index[:, 0] == h) & (index[:, 2] == c))
        arrays = _integrate_group(n, d, int(grid["heads"][h]), opts["schemes"][c], index[rows, 1], index[rows, 3],
                                  grid, seeds, opts, steps, device, dtype)
        for var, array in arrays.items():
            out.setdefault(var, np.full((len(index), *array.shape[1:]), np.nan))[rows] = array
    return out


def _integrate_group(n: int, d: int, count: int, scheme: str, s: np.ndarray, b: np.ndarray,
                     grid: dict[str, list], seeds: list[int], opts: dict[str, Any], steps: np.ndarray,
                     device: torch.device, dtype: torch.dtype) -> dict[str, np.ndarray]:
    """Systems of ``count`` heads under one ``scheme``: seed positions ``s``, beta positions ``b``."""
    x0 = torch.stack([initial_tokens(n, d, seeds[i], 0.0) for i in s])
    beta = torch.tensor([grid["beta"][i] for i in b], dtype=dtype, device=device)
    drawn = {i: matrices.draw(opts, d, count, seeds[i]) for i in np.unique(s)}
    qk = v = None
    if drawn[s[0]][0] is not None:
        qk = torch.stack([drawn[i][0] for i in s])
    if drawn[s[0]][1] is not None:
        v = torch.stack([drawn[i][1] for i in s]).to(device, dtype)
    if reduced_dimension(n, d, opts) < d:  # V_h = I: the flow stays in the span of x(0)
        x0, basis = sphere.span_coordinates(x0)
        if qk is not None:  # U^T Q_h^T K_h U, in float64 before the cast
            qk = basis.transpose(-1, -2)[:, None] @ qk @ basis[:, None]
    qk = None if qk is None else qk.to(device, dtype)
    x0 = x0.to(device, dtype)
    hidden = heads.hidden_keys(n, opts["mask"], opts["window"], device)
    plan = (sphere.fused(beta, qk, opts["weights"]), sphere.needs_shift(beta, n, dtype))

    def field(theta: torch.Tensor, gram: torch.Tensor | None) -> torch.Tensor:
        return heads.attention_vector(theta, beta, qk, v, count, opts["weights"], opts["reduction"], hidden, gram,
                                      plan)

    rule = Scheme(scheme, alpha=opts["alpha"], tau=switch_time(opts))
    step = stepper(rule, opts["integrator"], opts["dt"], field)
    recorders = {
        "clustered": lambda g, r: observables.clustered_pairs(g, opts["delta"]),
        "clusters": lambda g, r: observables.cluster_count(g, opts["cluster_delta"]),
        "boolean_rank": lambda g, r: observables.boolean_rank(g),
        "min_cosine": lambda g, r: observables.min_cosine(g),
        "radius": lambda g, r: r.mean(-1),
    }

    def sample(k: int, state: State, record: bool, snapshot: bool) -> tuple[dict[str, torch.Tensor], Any]:
        gram = observables.gram(state.theta)
        values = {var: recorders[var](gram, state.r) for var in opts["observables"]}
        if "radius" in values:
            values["radius_max"] = state.r.amax(-1)
        # A system whose state overflowed (USA's e^{score} past the dtype's range) records NaN, not
        # the counts its NaN cosines would give.
        finite = torch.isfinite(gram).flatten(1).all(-1) & torch.isfinite(state.r).all(-1)
        values = {var: torch.where(finite, value.to(gram.dtype), torch.nan) for var, value in values.items()}
        return values, gram  # the step from k reuses the Gram matrix

    start = State(x0, torch.ones(x0.shape[:-1], dtype=dtype, device=device))
    return driver.trajectory(start, step, sample, steps, np.array([], np.int64))
