"""Simulation of cluster_emergence (paper 004): torch, imported by jobs only, never by the planner.

Every (seed, scale) of an (n, d) point is one system of a tensor batch, integrated together in
chunks of at most ``block_mib``. Initial tokens are a U[-1, 1]^{n x d} draw keyed by (n, d, seed),
times the half-width a, so every scale sees the same draw (common random numbers); V, Q^T K and
the W of Eq. 12.1 are keyed by (d, seed), in streams of their own, so that changing one case
keeps the others' draws. Nothing depends on the job cut or the chunking.

By default the systems are integrated in the real eigenbasis of V (``basis: eigen``): with
c = Phi^-1 z, Eq. 3.1 keeps its form with V replaced by its real block-diagonal form B (exact
zeros off the blocks) and Q^T K by Phi^T Q^T K Phi, and so does Eq. 1.1; RK4 is covariant under
this constant change of variables, and so is the map of Remark 3.4 (R = I + hV becomes I + hB).
Eq. 12.1 is not (sigma acts on the tokens' coordinates): it runs in ``basis: standard``. In the
tokens' own coordinates a mode with lambda < 0 grows
like e^{|lambda| t} and swamps the others' digits (d = 128, lambda = -9: the positive-mode
coordinates are noise from t ~ 4 on); in the eigenbasis each mode keeps its own digits.
"""

from __future__ import annotations

import itertools
from typing import Any, NamedTuple

import numpy as np
import torch
import xarray as xr
from torch import Tensor

from attnsweep.contract import JobSpec
from attnsweep.dynamics import attention, driver, rd
from attnsweep.experiments.cluster_emergence import checkpoint, good_triples, theory
from attnsweep.experiments.cluster_emergence.cases import QUERY_KEYS, VALUES
from attnsweep.experiments.cluster_emergence.resources import system_bytes
from attnsweep.grid import Axis
from attnsweep.run import rng
from attnsweep.stores.labels import SEED, TIME, label

NAME = "cluster_emergence"
DIMS = ("n", "d", "scale", "seed")
COORDS = 3  # token coordinates kept in the snapshots (Figs. 5-8 live in d <= 3)
SIGNS = (-1, 0, 1)  # groups of the coordinate moments: phi_j^* < 0, all tokens, phi_j^* > 0

VARIABLES: dict[str, dict[str, str]] = {
    "rank": {"long_name": "numerical rank of P(t): singular values above rank_tol sigma_max (Figs. 3, 11, 12)",
             "units": "1"},
    "defect": {"long_name": "Boolean defect b(t) = 1 - min_i max_j P_ij(t)", "units": "1"},
    "leaders": {"long_name": "number of leaders |{argmax_j P_ij(t)}|", "units": "1"},
    "clusters": {"long_name": "connected components of ||z_i - z_j|| <= cluster_radius diam z(0)", "units": "1"},
    "resolved": {"long_name": "1 while the scores fix P despite their rounding error (attention.resolved), else 0",
                 "units": "1"},
    "coordinate_mean": {"long_name": "mean of phi_j^*(z_i(t)) over the tokens of a sign group (Figs. 7b, 15)",
                        "units": "1"},
    "coordinate_var": {"long_name": "variance (1/count) of phi_j^*(z_i(t)) over the tokens of a sign group "
                                    "(Figs. 7b, 15)", "units": "1"},
    "eigenvalue_real": {"long_name": "Re lambda_j of V, modes by decreasing real part", "units": "1"},
    "eigenvalue_imag": {"long_name": "Im lambda_j of V (a conjugate pair: +Im first)", "units": "1"},
    "eigenvector": {"long_name": "first three components of phi_j (unit eigenvector; real basis of the "
                                 "invariant plane for a complex pair)", "units": "1"},
    "dual_functional": {"long_name": "first three components of the dual functional phi_j^* (row j of Phi^-1)",
                        "units": "1"},
    "multiplicity": {"long_name": "k = dim F: multiplicity of a real lambda_1 > 0 above every other |lambda| "
                                  "(0: none; 1: good-triple spectrum, Def. 4.1; >= 1: paranormal, Def. 5.1)",
                     "units": "1"},
    "phi1_score": {"long_name": "<Q phi_1, K phi_1> (Def. 4.1 asks > 0)", "units": "1"},
    "qk_definite": {"long_name": "1 if Q^T K is symmetric positive definite (Theorems 3.1, 5.2), else 0",
                    "units": "1"},
    "snapshot": {"long_name": "first three coordinates of z_i at the snapshot times (Figs. 5-8; NaN beyond d)",
                 "units": "1"},
    "coordinate_snapshot": {"long_name": "phi_j^*(z_i) at the snapshot times", "units": "1"},
    "attention_snapshot": {"long_name": "P_ij at the snapshot times (Figs. 3, 11, 12)", "units": "1"},
    "query_snapshot": {"long_name": "first three coordinates of the queries Q x_i(t) at the snapshot times (Fig. 4)",
                       "units": "1"},
    "key_snapshot": {"long_name": "first three coordinates of the keys K x_j(t) at the snapshot times (Fig. 4)",
                     "units": "1"},
}
SERIES = ("rank", "defect", "leaders", "clusters", "resolved")
MODAL_SERIES = ("coordinate_mean", "coordinate_var")
SPECTRAL = ("multiplicity", "phi1_score", "qk_definite")
MODAL = ("eigenvalue_real", "eigenvalue_imag")
MODAL_COORDS = ("eigenvector", "dual_functional")
HEAD_COORDS = {"head": {"long_name": "attention head h of the checkpoint, numbered from 1 as in the paper"},
               "eigen": {"long_name": "eigenvalue j of V_h, by decreasing modulus (j = 1: lambda_1)"}}


def uniform(shape: tuple[int, ...], generator: torch.Generator) -> Tensor:
    """i.i.d. U[-1, 1] entries, float64 on the CPU (Section 11.1)."""
    return torch.rand(*shape, generator=generator, dtype=torch.float64) * 2 - 1


def unit_tokens(n: int, d: int, seed: int) -> Tensor:
    """Initial tokens (n, d) i.i.d. U[-1, 1]^d; the run scales them by a (Section 11.1: a = 5)."""
    return uniform((n, d), rng.generator(NAME, {"n": n, "d": d}, seed, "tokens"))


def spectrum_block(spectrum: list[float | list[float]]) -> Tensor:
    """Block-diagonal real matrix with eigenvalues ``spectrum``: [lambda] for a real entry,
    [[a, b], [-b, a]] (eigenvalues a +- ib) for an entry [a, b]."""
    blocks = [torch.tensor([[float(s)]]) if not isinstance(s, list)
              else torch.tensor([[s[0], s[1]], [-s[1], s[0]]], dtype=torch.float64) for s in spectrum]
    return torch.block_diag(*blocks).to(torch.float64)


def value_matrix(opts: dict[str, Any], d: int, seed: int) -> Tensor:
    """V (d, d) float64 of one realisation, for the case ``opts["value"]`` (see ``VALUES``)."""
    case = opts["value"]
    gen = rng.generator(NAME, {"d": d}, seed, "value")
    eye = torch.eye(d, dtype=torch.float64)
    if case == "identity":
        return eye
    if case == "minus_identity":
        return -eye
    if case == "fixed":
        return torch.tensor(opts["v"], dtype=torch.float64)
    if case == "symmetric":
        m = uniform((d, d), gen)
        return (m + m.T) / 2
    if case == "gram":
        g = uniform((d, d), gen)
        return g @ g.T / d
    if case == "spectrum":
        s = uniform((d, d), gen)
        return s @ spectrum_block(opts["spectrum"]) @ torch.linalg.inv(s)
    if case == "checkpoint":
        return torch.from_numpy(heads(opts).value_matrix(opts["head"]))
    raise ValueError(f"unknown value case {case!r} ({', '.join(VALUES)})")


def query_key_factors(opts: dict[str, Any], d: int, seed: int) -> tuple[Tensor, Tensor] | None:
    """(Q, K) float64 of one realisation, None for Q = K = I (see ``QUERY_KEYS``); where only
    Q^T K is drawn (``uniform``), K = I and Q = (Q^T K)^T."""
    case = opts["query_key"]
    gen = rng.generator(NAME, {"d": d}, seed, "query_key")
    if case == "identity":
        return None
    if case == "fixed":
        q, k = (torch.tensor(opts[key], dtype=torch.float64) for key in ("q", "k"))
        return q, k
    if case == "uniform":
        return uniform((d, d), gen).T, torch.eye(d, dtype=torch.float64)
    if case == "uniform_factors":
        q = uniform((d, d), gen)
        return q, uniform((d, d), gen)
    if case == "gram":
        g = uniform((d, d), gen)
        return g @ g.T / d, torch.eye(d, dtype=torch.float64)
    if case == "checkpoint":
        q, k = heads(opts).query_key(opts["head"])
        return torch.from_numpy(q), torch.from_numpy(k)
    raise ValueError(f"unknown query_key case {case!r} ({', '.join(QUERY_KEYS)})")


def heads(opts: dict[str, Any]) -> checkpoint.Heads:
    """The attention heads of the job's checkpoint (read once a process, ``checkpoint.read``)."""
    return checkpoint.read(opts["checkpoint"], opts["checkpoint_layer"])


def weight_matrix(opts: dict[str, Any], d: int, seed: int) -> Tensor | None:
    """W (d, d) float64 of Eq. 12.1 for one realisation: None for W = I, i.i.d. U[-1, 1] entries
    for ``weight: uniform`` (Fig. 18, bottom row)."""
    if opts["weight"] != "uniform":
        return None
    return uniform((d, d), rng.generator(NAME, {"d": d}, seed, "weight"))


def spectral_summary(v: Tensor, qk: Tensor | None, basis: attention.Eigenbasis, modes: int) -> dict[str, np.ndarray]:
    """Per system (B,): multiplicity, <Q phi_1, K phi_1>, Q^T K definite; per mode: eigenvalues,
    eigenvectors and dual functionals (first three components)."""
    phi1 = basis.vectors[..., 0]
    if qk is None:
        score = (phi1 * phi1).sum(-1)
        definite = torch.ones(v.shape[0], dtype=torch.float64)
    else:
        score = torch.einsum("bi,bij,bj->b", phi1, qk, phi1)
        symmetric = (qk - qk.transpose(-1, -2)).abs().amax((-2, -1)) <= 1e-12 * qk.abs().amax((-2, -1))
        definite = (symmetric & (torch.linalg.eigvalsh(qk).amin(-1) > 0)).to(torch.float64)
    values = basis.values.numpy()
    return {
        "multiplicity": theory.dominant_multiplicity(values).astype(np.float64),
        "phi1_score": score.numpy(),
        "qk_definite": definite.numpy(),
        "eigenvalue_real": driver.fit(values.real, {1: modes}),
        "eigenvalue_imag": driver.fit(values.imag, {1: modes}),
        "eigenvector": driver.fit(basis.vectors.transpose(-1, -2).numpy(), {1: modes, 2: COORDS}),
        "dual_functional": driver.fit(basis.dual.numpy(), {1: modes, 2: COORDS}),
    }


class Frame(NamedTuple):
    """The coordinates w a batch is integrated in: tokens z = w Phi^T, eigen-coordinates
    c = w M^T, and V, Q^T K (None: I) as they act on w."""

    to_tokens: Tensor
    to_modes: Tensor
    v: Tensor
    qk: Tensor | None


def block_form(values: Tensor) -> Tensor:
    """The real block-diagonal form B of V in the basis of :func:`attention.eigenbasis`: lambda
    on the diagonal, [[a, b], [-b, a]] for a pair a +- ib (+Im first); zeros off the blocks."""
    b = torch.diag_embed(values.real)
    pair = (values.imag[..., :-1] > 0).to(values.real.dtype) * values.imag[..., :-1]
    return b + torch.diag_embed(pair, offset=1) - torch.diag_embed(pair, offset=-1)


def frame(kind: str, v: Tensor, qk: Tensor | None, basis: attention.Eigenbasis) -> Frame:
    """``standard``: the tokens' coordinates. ``eigen``: the real eigenbasis of V, for every
    system whose eigenbasis is well conditioned (the others stay standard)."""
    d = v.shape[-1]
    eye = torch.eye(d, dtype=v.dtype).expand_as(v)
    if kind == "standard":
        return Frame(eye, basis.dual, v, qk)
    good = torch.isfinite(basis.dual).flatten(1).all(-1)[:, None, None]
    phi = basis.vectors
    moved = phi.transpose(-1, -2) @ (phi if qk is None else qk @ phi)
    return Frame(torch.where(good, phi, eye), torch.where(good, eye, basis.dual),
                 torch.where(good, block_form(basis.values), v), torch.where(good, moved, eye if qk is None else qk))


def simulate(job: JobSpec, axes: tuple[Axis, ...], device: torch.device, dtype: torch.dtype,
             progress: bool = True) -> xr.Dataset:
    """Every observable at every output time of every (n, d, scale, seed) of ``job``."""
    grid, opts, seeds = job.grid, job.options, job.seeds
    if "checkpoint_sha256" in opts:  # refuse a checkpoint changed since the jobs were planned
        checkpoint.verify(opts["checkpoint"], opts["checkpoint_sha256"])
    steps, snap_steps = driver.recorded_steps(opts)
    systems = list(itertools.product(range(len(grid["scale"])), range(len(seeds))))  # (scale, seed) positions
    shape = (len(grid["n"]), len(grid["d"]), len(grid["scale"]), len(seeds))
    tokens, modes = int(max(grid["n"])), opts["modes"]
    extra = {"t": len(steps), "snapshot_t": len(snap_steps), "token": tokens, "key": tokens, "mode": modes,
             "coord": COORDS, "sign": len(SIGNS)}
    layout = {**{v: ("t",) for v in SERIES}, **{v: ("t", "mode", "sign") for v in MODAL_SERIES},
              **{v: () for v in SPECTRAL}, **{v: ("mode",) for v in MODAL},
              **{v: ("mode", "coord") for v in MODAL_COORDS}}
    if len(snap_steps):
        points = ("snapshot_t", "token", "coord")
        layout.update(snapshot=points, coordinate_snapshot=("snapshot_t", "token", "mode"),
                      attention_snapshot=("snapshot_t", "token", "key"), query_snapshot=points, key_snapshot=points)
    out = {var: np.full((*shape, *(extra[e] for e in dims)), np.nan) for var, dims in layout.items()}
    size = torch.finfo(dtype).bits // 8
    run = driver.run(NAME, job, systems, lambda n, d: system_bytes(n, d, size, opts["integrator"]),
                     integrate, steps, snap_steps, device, dtype, progress)
    for at, arrays in run:
        for var, array in arrays.items():
            out[var][at] = array
    coords = {"n": grid["n"], "d": grid["d"], "scale": grid["scale"], "seed": seeds, "t": steps * opts["dt"],
              "mode": np.arange(modes), "coord": np.arange(COORDS), "sign": list(SIGNS)}
    if len(snap_steps):
        coords.update(snapshot_t=snap_steps * opts["dt"], token=np.arange(tokens), key=np.arange(tokens))
    result = xr.Dataset({var: ((*DIMS, *dims), out[var], VARIABLES[var]) for var, dims in layout.items()},
                        coords=coords)
    labels = {"seed": SEED, "t": TIME, "mode": {"long_name": "eigenmode j of V, by decreasing Re(lambda_j)"},
              "sign": {"long_name": "tokens averaged: -1 where phi_j^* < 0, 0 all, +1 where phi_j^* > 0"}}
    if "checkpoint_sha256" in opts:
        result = result.merge(head_spectra(opts, shape))
        result.attrs.update(checkpoint=opts["checkpoint"], checkpoint_head=opts["head"],
                            checkpoint_layer=opts["checkpoint_layer"])
        labels.update(HEAD_COORDS)
    label(result, axes, labels)
    result.attrs.update(value=VALUES[opts["value"]], value_case=opts["value"], query_key=QUERY_KEYS[opts["query_key"]],
                        query_key_case=opts["query_key"], equation=opts["equation"], basis=opts["basis"],
                        activation=str(opts["activation"]), weight=str(opts["weight"]),
                        integrator=opts["integrator"],
                        dt=opts["dt"], rank_tol=opts["rank_tol"], cluster_radius=opts["cluster_radius"])
    return result


def head_spectra(opts: dict[str, Any], shape: tuple[int, ...]) -> xr.Dataset:
    """Every head's V_h spectrum and Definition 4.1 (``good_triples``; Fig. 10), the same for
    every system of ``shape`` (n, d, scale, seed)."""
    table = good_triples.head_table(heads(opts))
    count, size = table["head_eigenvalue_real"].shape
    data = {var: ((*DIMS, "head") if values.ndim == 1 else (*DIMS, "head", "eigen"),
                  np.array(np.broadcast_to(values, (*shape, *values.shape))), good_triples.VARIABLES[var])
            for var, values in table.items()}
    return xr.Dataset(data, coords={"head": np.arange(1, count + 1), "eigen": np.arange(1, size + 1)})


def integrate(n: int, d: int, index: np.ndarray, grid: dict[str, list], seeds: list[int], opts: dict[str, Any],
              steps: np.ndarray, snap_steps: np.ndarray, device: torch.device,
              dtype: torch.dtype) -> dict[str, np.ndarray]:
    """Integrate the systems ``index`` (rows of scale, seed positions) of one (n, d) to the last
    output step, recording at ``steps`` and ``snap_steps``; arrays (systems, ...).

    A lone system is integrated with a twin: torch takes other BLAS (gemv) and Pade paths for
    a batch of one, so its numbers would depend on the chunking at the rounding level."""
    lone = len(index) == 1
    if lone:
        index = np.repeat(index, 2, axis=0)
    a, s = index.T
    unit = {i: unit_tokens(n, d, seeds[i]) for i in np.unique(s)}
    value = {i: value_matrix(opts, d, seeds[i]) for i in np.unique(s)}
    factors = {i: query_key_factors(opts, d, seeds[i]) for i in np.unique(s)}
    weight = {i: weight_matrix(opts, d, seeds[i]) for i in np.unique(s)}
    z0 = torch.stack([grid["scale"][j] * unit[i] for j, i in zip(a, s)])
    v = torch.stack([value[i] for i in s])
    qk = None if factors[s[0]] is None else torch.stack([factors[i][0].T @ factors[i][1] for i in s])
    q, k = (torch.eye(d, dtype=torch.float64).expand(len(s), d, d) if factors[s[0]] is None else
            torch.stack([factors[i][m] for i in s]) for m in (0, 1))
    w = None if weight[s[0]] is None else torch.stack([weight[i] for i in s]).to(device, dtype)
    modes = opts["modes"]
    basis = attention.eigenbasis(v)  # float64 on the CPU: reproducible signs
    static = spectral_summary(v, qk, basis, modes)
    radius = (opts["cluster_radius"] * attention.diameter(z0)).to(device, dtype)
    where = frame(opts["basis"], v, qk, basis)
    y = (z0 @ torch.linalg.inv(where.to_tokens).transpose(-1, -2)).to(device, dtype)
    to_tokens, to_modes = where.to_tokens.to(device, dtype), where.to_modes[:, :modes].to(device, dtype)
    v, qk = where.v.to(device, dtype), None if where.qk is None else where.qk.to(device, dtype)
    q, k = q.to(device, dtype), k.to(device, dtype)
    equation, h = opts["equation"], opts["dt"]
    step = rd.stepper(equation, opts["integrator"], qk, v, h, opts["activation"], w)

    def sample(step: int, y: Tensor, record: bool, snapshot: bool) -> tuple[dict[str, Tensor], None]:
        t = step * h
        x, keys = rd.queries_keys(equation, t, y, v, h)
        logits = rd.scores(x, qk, keys)
        p = rd.probabilities(logits)
        rescaled = rd.to_rescaled(y, v, t) if equation == "original" else y
        z, c = rescaled @ to_tokens.transpose(-1, -2), attention.eigen_coordinates(rescaled, to_modes)
        values = {}
        if record:
            mean, var = attention.moments(c)
            values = {"rank": attention.numerical_rank(p, opts["rank_tol"]), "defect": attention.boolean_defect(p),
                      "leaders": attention.leader_count(p), "clusters": attention.cluster_count(z, radius),
                      "resolved": attention.resolved(logits, rd.score_error(x, qk)), "coordinate_mean": mean,
                      "coordinate_var": var}
        if snapshot:
            x = x @ to_tokens.transpose(-1, -2)  # the original tokens in their own coordinates
            values.update(snapshot=z[..., :COORDS], coordinate_snapshot=c, attention_snapshot=p,
                          query_snapshot=(x @ q.transpose(-1, -2))[..., :COORDS],
                          key_snapshot=(x @ k.transpose(-1, -2))[..., :COORDS])
        return values, None

    arrays = driver.trajectory(y, lambda k, y, _: step(k, y), sample, steps, snap_steps)
    for var in ("coordinate_mean", "coordinate_var"):
        arrays[var] = driver.fit(arrays[var], {2: modes})
    if "snapshot" in arrays:
        arrays["coordinate_snapshot"] = driver.fit(arrays["coordinate_snapshot"], {3: modes})
        for var in ("snapshot", "query_snapshot", "key_snapshot"):
            arrays[var] = driver.fit(arrays[var], {3: COORDS})
    return {var: array[:1] if lone else array for var, array in {**arrays, **static}.items()}
