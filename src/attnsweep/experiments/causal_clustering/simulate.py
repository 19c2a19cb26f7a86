"""Simulation of causal_clustering (paper 003): torch, imported by jobs only, never by the planner.

Every (beta, seed, value, mask) of an (n, d) point is one system of a tensor batch, integrated
together in chunks by the sphere engine (:mod:`attnsweep.dynamics.sphere`, causal mask per
system). Initial tokens are i.i.d. uniform on S^{d-1}, keyed by (n, d, seed): every beta, value
matrix and mask sees the same draw, so causal and full attention are compared on the same
tokens and nothing depends on the job cut or the chunking. Renyi and strong Renyi centres are
found once on x(0) (``theory.py``) and followed by index.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import torch
import xarray as xr
from torch import Tensor

from attnsweep.contract import JobSpec
from attnsweep.dynamics import driver, observables, sphere
from attnsweep.experiments.causal_clustering import SERIES, separation, theory
from attnsweep.experiments.causal_clustering.cases import value_matrix
from attnsweep.experiments.causal_clustering.resources import chunk_bytes
from attnsweep.grid import Axis
from attnsweep.run import rng
from attnsweep.stores.labels import SEED, TIME, label

NAME = "causal_clustering"
DIMS = ("n", "d", "beta", "seed", "value", "causal")
COORDS = 3  # token coordinates kept in the snapshots (Figs. 1, 2 live in d <= 3)

VARIABLES: dict[str, dict[str, str]] = {
    "captured_renyi": {"long_name": "fraction of tokens within capture beta^{-1/2} (geodesic) of a Renyi centre's "
                                    "current position, centres included (Fig. 3)", "units": "1"},
    "captured_strong": {"long_name": "fraction of tokens within capture beta^{-1/2} (geodesic) of a strong Renyi "
                                     "centre's current position, centres included (Fig. 3)", "units": "1"},
    "clusters": {"long_name": "connected components of <x_i, x_j> >= 1 - cluster_delta", "units": "1"},
    "first_drift": {"long_name": "geodesic distance of token 1 from its start (0 for V = I: Lemma 3.1)",
                    "units": "rad"},
    "strong_drift": {"long_name": "largest geodesic distance of a strong Renyi centre from its start (Lemma 5.1)",
                     "units": "rad"},
    "renyi_count": {"long_name": "number of Renyi centres of x(0) at separation delta (Section 5.1)", "units": "1"},
    "strong_count": {"long_name": "number of strong Renyi centres of x(0) at separation delta (Section 5.1)",
                     "units": "1"},
    "snapshot": {"long_name": "first three coordinates of every token at the snapshot times (Figs. 1, 2)",
                 "units": "1"},
    "renyi_centre": {"long_name": "1 if the token is a Renyi centre of x(0), else 0", "units": "1"},
    "strong_centre": {"long_name": "1 if the token is a strong Renyi centre of x(0), else 0", "units": "1"},
}
SERIES_DIMS = {"captured_renyi": ("t", "capture"), "captured_strong": ("t", "capture")}


def initial_tokens(n: int, d: int, seed: int) -> Tensor:
    """Tokens (n, d) i.i.d. uniform on S^{d-1}, float64 on the CPU (Section 2)."""
    gen = rng.generator(NAME, {"n": n, "d": d}, seed, "tokens")
    return sphere.normalise(torch.randn(n, d, generator=gen, dtype=torch.float64))


def geodesic(cosine: Tensor) -> Tensor:
    """arccos of a cosine clamped to [-1, 1] (radians)."""
    return torch.arccos(cosine.clamp(-1.0, 1.0))


def captured(gram: Tensor, centre: Tensor, radius: Tensor) -> Tensor:
    """Fraction of tokens within geodesic ``radius`` (B, R) of the nearest token marked in
    ``centre`` (B, n) bool, from the Gram matrix (B, n, n) of the tokens' current positions: (B, R)."""
    cosine = torch.where(centre[:, None, :], gram, -2.0).amax(-1)  # (B, n): nearest centre
    return (geodesic(cosine)[..., None] <= radius[:, None, :]).to(gram.dtype).mean(-2)


def simulate(job: JobSpec, axes: tuple[Axis, ...], device: torch.device, dtype: torch.dtype,
             progress: bool = True) -> xr.Dataset:
    """Every observable at every output time of every (n, d, beta, seed, value, mask) of ``job``."""
    grid, opts, seeds = job.grid, job.options, job.seeds
    steps, snap_steps = driver.recorded_steps(opts)
    values, masks = opts["values"], opts["masks"]
    systems = list(itertools.product(range(len(grid["beta"])), range(len(seeds)), range(len(values)),
                                     range(len(masks))))
    shape = (len(grid["n"]), len(grid["d"]), len(grid["beta"]), len(seeds), len(values), len(masks))
    tokens, captures = int(max(grid["n"])), len(opts["capture"])
    extra = {"t": len(steps), "capture": captures, "snapshot_t": len(snap_steps), "token": tokens, "coord": COORDS}
    layout = {**{var: SERIES_DIMS.get(var, ("t",)) for var in SERIES}, "renyi_count": (), "strong_count": ()}
    if len(snap_steps):
        layout.update(snapshot=("snapshot_t", "token", "coord"), renyi_centre=("token",), strong_centre=("token",))
    out = {var: np.full((*shape, *(extra[e] for e in dims)), np.nan) for var, dims in layout.items()}
    size = torch.finfo(dtype).bits // 8
    run = driver.run(NAME, job, systems, lambda n, d: chunk_bytes(n, d, size, opts["integrator"], captures),
                     integrate, steps, snap_steps, device, dtype, progress)
    for at, arrays in run:
        for var, array in arrays.items():
            out[var][at] = driver.fit(array, dict(enumerate(out[var][at].shape)))
    coords = {"n": grid["n"], "d": grid["d"], "beta": grid["beta"], "seed": seeds, "value": np.arange(len(values)),
              "causal": [int(m == "causal") for m in masks], "t": steps * opts["dt"],
              "capture": np.asarray(opts["capture"], float), "coord": np.arange(COORDS)}
    if len(snap_steps):
        coords.update(snapshot_t=snap_steps * opts["dt"], token=np.arange(tokens))
    result = xr.Dataset({var: ((*DIMS, *dims), out[var], VARIABLES[var]) for var, dims in layout.items()},
                        coords=coords)
    spectra = np.array([[driver.fit(np.diag(value_matrix(name, int(d))), {0: COORDS}) for name in values]
                        for d in grid["d"]])
    result["value_spectrum"] = (("d", "value", "coord"), spectra,
                                {"long_name": "first three eigenvalues of V (its diagonal)", "units": "1"})
    label(result, axes, {"seed": SEED, "t": TIME,
                         "value": {"long_name": f"value matrix V: {', '.join(values)} (Table 1)"},
                         "causal": {"long_name": "1: causal mask (CSA), 0: full attention (SA)"},
                         "capture": {"long_name": "capture radius in units of beta^{-1/2}", "units": "1"}})
    result.attrs.update(value_names=", ".join(values), integrator=opts["integrator"], dt=opts["dt"],
                        spacing=opts["spacing"],
                        separation=opts["separation"], cluster_delta=opts["cluster_delta"])
    return result


def integrate(n: int, d: int, index: np.ndarray, grid: dict[str, list], seeds: list[int], opts: dict[str, Any],
              steps: np.ndarray, snap_steps: np.ndarray, device: torch.device,
              dtype: torch.dtype) -> dict[str, np.ndarray]:
    """Integrate the systems ``index`` (rows of beta, seed, value, mask positions) of one (n, d)
    to the last output step, recording at ``steps`` and ``snap_steps``; arrays (systems, ...)."""
    b, s, v, m = index.T
    drawn = {i: initial_tokens(n, d, seeds[i]) for i in np.unique(s)}
    x0 = torch.stack([drawn[i] for i in s])
    beta = np.asarray(grid["beta"], float)[b]
    delta = separation(beta, opts["separation"])
    renyi = torch.from_numpy(np.stack([theory.renyi_centres(drawn[i].numpy(), dl) for i, dl in zip(s, delta)]))
    strong = torch.from_numpy(np.stack([theory.strong_centres(drawn[i].numpy(), dl) for i, dl in zip(s, delta)]))
    radius = torch.from_numpy(np.outer(beta ** -0.5, opts["capture"]))
    matrices = {name: torch.from_numpy(value_matrix(name, d)) for name in opts["values"]}
    identity = all(name == "identity" for name in opts["values"])
    vs = None if identity else torch.stack([matrices[opts["values"][i]] for i in v]).to(device, dtype)
    causal = torch.tensor([opts["masks"][i] == "causal" for i in m], device=device)
    step = sphere.stepper(opts["integrator"], torch.tensor(beta, dtype=dtype, device=device), None, vs,
                          "sa", opts["dt"], causal)
    renyi, strong, radius = renyi.to(device), strong.to(device), radius.to(device, dtype)
    start = x0.to(device, dtype)

    def sample(k: int, x: Tensor, record: bool, snapshot: bool) -> tuple[dict[str, Tensor], Tensor | None]:
        values, gram = {}, None
        if record:
            gram = observables.gram(x)
            moved = geodesic((x * start).sum(-1))  # (B, n)
            values = {"captured_renyi": captured(gram, renyi, radius),
                      "captured_strong": captured(gram, strong, radius),
                      "clusters": observables.cluster_count(gram, opts["cluster_delta"]),
                      "first_drift": moved[:, 0], "strong_drift": torch.where(strong, moved, 0.0).amax(-1)}
        if snapshot:
            values["snapshot"] = x[..., :COORDS]
        return values, gram  # the step from k reuses the Gram matrix

    arrays = driver.trajectory(start.clone(), lambda k, x, gram: step(x, gram), sample, steps, snap_steps)
    if "snapshot" in arrays:
        arrays["snapshot"] = driver.fit(arrays["snapshot"], {3: COORDS})
        arrays["renyi_centre"] = renyi.double().cpu().numpy()
        arrays["strong_centre"] = strong.double().cpu().numpy()
    arrays["renyi_count"] = renyi.sum(-1).double().cpu().numpy()
    arrays["strong_count"] = strong.sum(-1).double().cpu().numpy()
    return arrays
