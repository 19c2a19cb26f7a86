"""Simulation of critical_scaling (paper 000): torch, imported by jobs only, never by the planner.

Draws (Eq. 25) come from :func:`attnsweep.run.rng.generator` keyed by (n, d, seed), so every rho,
gamma and alpha of a point sees the same tokens and the numbers do not depend on the job cut.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple

import numpy as np
import torch
import xarray as xr
from tqdm import tqdm

from attnsweep.contract import JobSpec
from attnsweep.experiments.critical_scaling import kernel
from attnsweep.experiments.critical_scaling.resources import subsampled
from attnsweep.grid import Axis
from attnsweep.run import rng
from attnsweep.stores.labels import label

NAME = "critical_scaling"
NOISE = {
    "scaled": "z ~ N(0, I_d/d): E||x_i||^2 = 1 and E<x_i,x_j> = rho as Section 3 states (docs/papers/000.md §1, §5)",
    "standard": "z ~ N(0, I_d): the text's 'standard Gaussian'; eta is about d times smaller (docs/papers/000.md §1)",
}
ETA_METHOD = {
    "exact": "exact ||J||_F^2 from Gram matrices (kernel.jacobian_frobenius)",
    "hutchinson": "Hutchinson mean over Rademacher probes through a forward-mode JVP (Fig. 2 caption)",
    "none": "not computed (eta_method none: lambda only)",
}
DIMS = ("n", "d", "seed", "rho", "gamma", "alpha")

VARIABLES: dict[str, dict[str, str]] = {
    "lambda": {"long_name": "input-to-output angle ratio lambda (Eq. 26)", "units": "1"},
    "eta": {"long_name": "normalised Jacobian norm eta = ||dX'/dX||_F^2/(nd) (Eq. 27)", "units": "1"},
    "eta_probe": {"long_name": "||J v||^2/(nd) for one Rademacher probe v (Hutchinson term of Eq. 27)", "units": "1"},
    "eta_plateau": {"long_name": "supercritical eta limit (1 - 1/d) mean_i 1/||x_i||^2 (Eq. 24)", "units": "1"},
    "n_eff": {"long_name": "effective number of attended tokens mean_i 1/sum_j A_ij^2 (App. C)", "units": "1"},
    "cos_in_quantile": {"long_name": "quantiles of input pair cosines <y_i, y_j>", "units": "1"},
    "cos_out_quantile": {"long_name": "quantiles of output pair cosines <y'_i, y'_j>", "units": "1"},
}


def draw_tokens(n: int, d: int, seed: int, noise: str) -> tuple[torch.Tensor, torch.Tensor]:
    """``z_0`` (d,) and ``z`` (n, d) of Eq. 25, float64 on the CPU, shared by every rho and gamma."""
    gen = rng.generator(NAME, {"n": n, "d": d}, seed, "tokens")
    z = torch.randn(n + 1, d, generator=gen, dtype=torch.float64)
    if noise == "scaled":
        z /= math.sqrt(d)
    return z[0], z[1:]


def draw_probes(n: int, d: int, seed: int, count: int) -> torch.Tensor:
    """``count`` Rademacher probes (count, n, d) as int8; the first k are the same for any count."""
    gen = rng.generator(NAME, {"n": n, "d": d}, seed, "probes")
    return torch.randint(0, 2, (count, n, d), generator=gen, dtype=torch.int8) * 2 - 1


class Draws(NamedTuple):
    """Everything random about one (n, d, seed), on the CPU (:func:`prepare`)."""

    z0: torch.Tensor  # (d,) or (n + 1,) in span coordinates, float64
    z: torch.Tensor  # (n, d) or (n, n + 1)
    probes: torch.Tensor | None  # (probes, n, d) int8, Hutchinson only
    lambda_pairs: tuple[torch.Tensor, torch.Tensor] | None  # sampled pairs, None: all pairs
    quantile_tokens: torch.Tensor  # tokens whose pairs give the cosine quantiles
    queries: torch.Tensor | None  # the tokens at which the layer is computed, None: all


def prepare(n: int, d: int, seed: int, opts: dict[str, Any]) -> Draws:
    """The draws of one (n, d, seed): tokens (in the span of the tokens where d > n + 1 and eta
    needs no probes in R^d), probes, sampled pairs, quantile tokens and query tokens."""
    z0, z = draw_tokens(n, d, seed, opts["noise"])
    hutchinson = opts["eta_method"] == "hutchinson"
    if not hutchinson and d > n + 1:  # no probes in R^d: the tokens' span suffices
        z0, z = kernel.span_coordinates(z0, z)
    probes = draw_probes(n, d, seed, opts["probes"]) if hutchinson else None
    return Draws(z0, z, probes, *samples(n, seed, opts))


#: Devices on which a job draws the next (n, d, seed)'s tokens on a CPU thread while the device
#: computes the current one. A draw is serial (one generator stream): 1.2 s for n = 65536,
#: d = 1024, during which a GPU would wait; on the CPU it would only take cores from the layer.
DRAW_AHEAD_ON = frozenset({"cuda"})


def draws(keys: list[tuple[int, int, int]], opts: dict[str, Any], ahead: bool) -> Iterator[Draws]:
    """:func:`prepare` of each (n, d, seed) of ``keys`` in order; with ``ahead`` the next one is
    drawn on a worker thread (torch releases the GIL while it draws) while the caller uses this one.
    The draws are the same either way: each comes from its own generator."""
    if not ahead or len(keys) < 2:
        yield from (prepare(*key, opts) for key in keys)
        return
    with ThreadPoolExecutor(1, thread_name_prefix="attnsweep-draw") as pool:
        following = pool.submit(prepare, *keys[0], opts)
        for key in keys[1:]:
            current, following = following, pool.submit(prepare, *key, opts)
            yield current.result()
        yield following.result()


def simulate(job: JobSpec, axes: tuple[Axis, ...], device: torch.device, dtype: torch.dtype,
             progress: bool = True) -> xr.Dataset:
    """One job: every observable at every (n, d, seed, rho, gamma, alpha) of ``job``."""
    grid, opts = job.grid, job.options
    ns, ds, seeds = grid["n"], grid["d"], job.seeds
    rhos, gammas, alphas = grid["rho"], grid["gamma"], grid["alpha"]
    budget = job.block_mib << 20
    shape = (len(ns), len(ds), len(seeds), len(rhos), len(gammas), len(alphas))
    nan = np.nan
    hutchinson = opts["eta_method"] == "hutchinson"
    with_eta = opts["eta_method"] != "none"
    lam = np.full(shape, nan)
    eta = np.full(shape, nan)
    eta_probe = np.full((*shape, opts["probes"] if hutchinson else 0), nan)
    cos_out = np.full((*shape, len(kernel.QUANTILES)), nan)
    n_eff = np.full(shape[:5], nan)
    cos_in = np.full((*shape[:4], len(kernel.QUANTILES)), nan)
    plateau = np.full(shape[:4], nan)
    alpha_t = torch.tensor(alphas, dtype=dtype, device=device)

    systems = list(itertools.product(enumerate(ns), enumerate(ds), enumerate(seeds)))
    keys = [(n, d, seed) for (_, n), (_, d), (_, seed) in systems]
    bar = tqdm(total=math.prod(shape[:4]), desc=NAME, disable=not progress, mininterval=5)
    # draws depend on (n, d, seed) only: common random numbers over rho, gamma, alpha
    for ((a, n), (b, d), (s, _)), drawn in zip(systems, draws(keys, opts, device.type in DRAW_AHEAD_ON)):
        z0, z = drawn.z0.to(device, dtype), drawn.z.to(device, dtype)
        probes = drawn.probes.to(device) if hutchinson else None  # int8
        lambda_pairs = None if drawn.lambda_pairs is None else tuple(t.to(device) for t in drawn.lambda_pairs)
        quantile_tokens = drawn.quantile_tokens.to(device)
        queries = None if drawn.queries is None else drawn.queries.to(device)
        beta = torch.tensor([g * math.log(n) for g in gammas], dtype=dtype, device=device)
        for r, rho in enumerate(rhos):
            x = math.sqrt(rho) * z0 + math.sqrt(1 - rho) * z
            obs = kernel.observe(x, beta, alpha_t, probes, lambda_pairs, quantile_tokens, budget, dim=d,
                                 eta=with_eta, queries=queries)
            lam[a, b, s, r] = obs.lam.double().cpu().numpy()
            eta[a, b, s, r] = obs.eta.double().cpu().numpy()
            if hutchinson:
                eta_probe[a, b, s, r] = obs.eta_probe.double().cpu().numpy()
            cos_out[a, b, s, r] = obs.cos_out.double().cpu().numpy()
            n_eff[a, b, s, r] = obs.n_eff.double().cpu().numpy()
            cos_in[a, b, s, r] = obs.cos_in.double().cpu().numpy()
            plateau[a, b, s, r] = obs.eta_plateau.item()
            bar.update()
    bar.close()

    ds_ = xr.Dataset(
        {
            "lambda": (DIMS, lam),
            "eta": (DIMS, eta),
            "n_eff": (DIMS[:5], n_eff),
            "cos_in_quantile": ((*DIMS[:4], "quantile"), cos_in),
            "cos_out_quantile": ((*DIMS, "quantile"), cos_out),
            "eta_plateau": (DIMS[:4], plateau),
        },
        coords={
            "n": ns, "d": ds, "seed": seeds, "rho": rhos, "gamma": gammas, "alpha": alphas,
            "quantile": list(kernel.QUANTILES),
        },
    )
    if hutchinson:
        ds_["eta_probe"] = ((*DIMS, "probe"), eta_probe)
        ds_.coords["probe"] = np.arange(opts["probes"])
    label(ds_, axes, {"seed": {"long_name": "random seed"}}, VARIABLES)
    ds_.attrs.update(
        noise=opts["noise"],
        noise_convention=NOISE[opts["noise"]],
        lambda_pairs=(
            "all pairs" if opts["pair_samples"] is None
            else f"{opts['pair_samples']} uniform pairs where n > {opts['pair_subsample_n']}, all pairs below"
        ),
        quantile_pairs=(
            "all pairs" if opts["quantile_tokens"] is None
            else f"all pairs among min(n, {opts['quantile_tokens']}) tokens drawn uniformly"
        ),
        query_tokens=(
            "every token" if opts.get("query_tokens") is None
            else f"{opts['query_tokens']} tokens drawn uniformly where n > {opts['query_tokens']} (every token a "
                 "key; lambda over all pairs among them, n_eff over their rows, the quantiles' tokens among them)"
        ),
        eta_method=ETA_METHOD[opts["eta_method"]],
    )
    if hutchinson:
        ds_.attrs["hutchinson_probes"] = opts["probes"]
    return ds_


def samples(n: int, seed: int, opts: dict[str, Any]) -> tuple[
        tuple[torch.Tensor, torch.Tensor] | None, torch.Tensor, torch.Tensor | None]:
    """Sampled pairs for lambda (None: all pairs), the tokens whose pairs give quantiles, and the
    query tokens (None: every token). Under query tokens lambda takes all pairs among them (no
    sampled pairs), and the quantile tokens index into them."""
    queries = None
    if subsampled(n, opts, "query_tokens"):
        gen = rng.generator(NAME, {"n": n}, seed, "query_tokens")
        queries = torch.randperm(n, generator=gen)[: opts["query_tokens"]].sort().values
    m = n if queries is None else queries.numel()
    lambda_pairs = None
    if queries is None and subsampled(n, opts, "pair_subsample_n"):
        gen = rng.generator(NAME, {"n": n}, seed, "lambda_pairs")
        lambda_pairs = kernel.pair_sample(n, opts["pair_samples"], gen)
    tokens = torch.arange(m)
    if subsampled(m, opts, "quantile_tokens"):
        gen = rng.generator(NAME, {"n": n}, seed, "quantile_tokens")
        tokens = torch.randperm(m, generator=gen)[: opts["quantile_tokens"]].sort().values
    return lambda_pairs, tokens, queries
