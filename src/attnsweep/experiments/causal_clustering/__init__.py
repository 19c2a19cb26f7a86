"""causal_clustering: paper 003, *Clustering in causal attention masking*.

n tokens on S^{d-1} follow the attention dynamics of 001 (SA, Q = K = I) under the causal mask
(CSA, Section 2: token k attends to j <= k, itself included), side by side with full attention
on the same tokens: the ``masks`` option gives the ``causal`` dimension (1: CSA, 0: SA). V is one
of the Table 1 classes (``values``, the ``value`` dimension). Per (n, d, beta, seed, value, mask)
the job records, at every output time, the fraction of tokens captured by the Renyi and by the
strong Renyi centres of x(0) (Section 5.1; "captured" is defined below), the number of clusters,
and how far token 1 and the strong centres have moved. Theory (``theory.py``): Lemma 3.1 (the
first token), the two-token ODE, Lemma C.1 (strong-centre count), Renyi's constant, and the
beta^{(d-1)/2} scaling of the number of meta-stable clusters.

Captured (the paper leaves it open, docs/papers/003.md §6): a token is captured by a kind of centre at
time t when its geodesic distance to the current position of the nearest such centre is at most
r = capture beta^{-1/2} (default capture = 1, the interaction length ~ tau*_beta, and 2 = delta/2
for the default separation c = 4, which cannot count a token twice while centres stay delta
apart). A centre captures itself.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from attnsweep.contract import Experiment, FigureSpec, JobSpec, Target, options_file
from attnsweep.dynamics.times import check_times
from attnsweep.experiments.causal_clustering import captions, resources
from attnsweep.grid import Axis
from attnsweep.reduce.crossing import bootstrap_crossing, interval_variables, seed_mean
from attnsweep.reduce.seeds import presence, seed_statistics

QUANTILES = (0.1, 0.9)  # the band of Fig. 3
SERIES = ("captured_renyi", "captured_strong", "clusters", "first_drift", "strong_drift")
COUNTS = ("renyi_count", "strong_count")


def separation(beta: Any, c: float) -> Any:
    """delta = c beta^{-1/2} (radians; Figs. 2, 3 use c = 4)."""
    return c / np.sqrt(beta)


class CausalClustering(Experiment):
    name = "causal_clustering"
    title = "Causal attention masking: Renyi centres, meta-stable clusters, causal vs full (Figures 1-3)"
    paper = "arXiv:2411.04990 (Karagodin, Polyanskiy, Rigollet: Clustering in causal attention masking)"
    axes = (
        Axis("n", "int", "number of tokens", low=2, default=[200], note="Figs. 2, 3 use 200, Fig. 1 uses 32"),
        Axis("d", "int", "token dimension (tokens live on the sphere S^{d-1})", low=2, default=[2]),
        Axis("beta", "float", "inverse temperature beta (CSA)", low=0, low_open=True, default=[64.0],
             note="64 in Figs. 2 and 3, 9 in Fig. 1"),
    )
    options_schema = options_file(__file__)
    # One job per (n, d): betas, seeds, value matrices and masks batched in it.
    default_wildcards = ("n", "d")
    version = 2  # 2: chunks side by side on CPU threads, numpy products, the fused SA kernel
    # The median collapse time is located along the output time (more seeds narrow it), a curve
    # of beta (Fig. 3, the boundary figure). Rows also run over the value matrix and the mask.
    targets = (Target("t_collapse", crossing=None, curves=("beta",)),)

    def check(self, options: dict[str, Any], grid: dict[str, list[float]], prefix: str) -> None:
        check_times(options, grid, prefix)


    def job_memory_bytes(self, job: JobSpec) -> int:
        return resources.memory_bytes(job)

    def job_seconds(self, job: JobSpec) -> float:
        return resources.seconds(job)

    def records(self, options: dict[str, Any]) -> dict[str, int]:
        return {"outputs": options["outputs"], "snapshot_times": len(options["snapshot_times"])}


    # ------------------------------------------------------------------ reduce
    def reduce(self, sweep: xr.Dataset) -> xr.Dataset:
        """Seed means and standard errors of every series and count; the 0.1 and 0.9 quantiles over
        seeds of the captured fractions (Fig. 3); the first seed's snapshots; the centre-count theory."""
        k = sweep.sizes["seed"]
        out = seed_statistics(sweep, (*SERIES, *COUNTS))
        for var in ("captured_renyi", "captured_strong"):
            for q in QUANTILES:
                name = f"{var}_q{int(q * 100)}"
                out[name] = sweep[var].chunk({"seed": -1}).quantile(q, "seed").drop_vars("quantile")
                out[name].attrs.update(long_name=f"{q} quantile over seeds of {var}", units="1")
        for var in ("snapshot", "renyi_centre", "strong_centre"):
            if var in sweep:
                out[var] = sweep[var].isel(seed=0, drop=True)
                out[var].attrs.update(sweep[var].attrs, cell_methods="first seed")
        out["value_spectrum"] = sweep["value_spectrum"]
        out = out.compute()
        out.update(self.theory(sweep, float(sweep.attrs["separation"])))
        out.attrs.update(sweep.attrs)
        out.attrs["seeds"] = k
        return out

    @staticmethod
    def theory(sweep: xr.Dataset, c: float) -> xr.Dataset:
        """Per (n, d, beta): the mean strong-centre count of i.i.d. uniform tokens (Lemma C.1, with
        the d = 3 erratum) and, for d = 2, the saturated Renyi count c_R 2 pi / delta (C.4)."""
        from attnsweep.experiments.causal_clustering import theory  # scipy: only the reduction needs it

        n, d, beta = (sweep[c_].astype(float) for c_ in ("n", "d", "beta"))
        n, d, beta = xr.broadcast(n, d, beta)
        delta = separation(beta.values, c)
        strong = np.vectorize(lambda n_, dl, d_: float(theory.expected_strong_count(int(n_), dl, int(d_))))(
            n.values, delta, d.values)
        renyi = np.where(d.values == 2, theory.renyi_saturated_count(delta), np.nan)
        out = xr.Dataset({"strong_count_theory": (n.dims, strong), "renyi_count_saturated": (n.dims, renyi)},
                         coords=n.coords)
        out["strong_count_theory"].attrs.update(
            long_name="(1 - (1 - p)^n)/p, p the cap measure of radius delta (Lemma C.1)", units="1")
        out["renyi_count_saturated"].attrs.update(
            long_name="c_R 2 pi / delta: Renyi centres of an infinite sequence on the circle (d = 2 only)", units="1")
        return out

    # ------------------------------------------------------------------ boundary
    def boundary(self, sweep: xr.Dataset, summary: xr.Dataset) -> tuple[pd.DataFrame, xr.Dataset]:
        """Per (n, d, beta, value, mask): the median collapse time (half the runs down to one
        cluster) with a bootstrap interval; the mean persistence of a meta-stable state; the mean
        cluster count at t_max and its fitted beta exponent with a bootstrap interval, against
        (d - 1)/2 (and the exponent at every output time, boundary.zarr only); the centre counts
        against theory; the captured fractions at t_max."""
        from attnsweep.experiments.causal_clustering import theory  # scipy: only the reduction needs it

        dims = ("n", "d", "beta", "value", "causal")
        t = sweep["t"].values
        clusters = sweep["clusters"].transpose(*dims, "seed", "t").values
        collapsed = np.where(np.isnan(clusters), np.nan, clusters <= 1).astype(float)
        # A refined sweep: the seeds each (n, d, beta) holds, broadcast over value and mask.
        held = presence(sweep, ("n", "d", "beta", "seed"))
        held = None if held is None else np.broadcast_to(held[:, :, :, None, None, :], clusters.shape[:-1])
        est, low, high = bootstrap_crossing(np.r_[t[0] - 1.0, t], np.concatenate(
            [np.zeros(collapsed.shape[:-1] + (1,)), collapsed], -1), 0.5,
            present=None if held is None else held[..., None])
        out = xr.Dataset(coords={c: sweep[c].values for c in dims})
        out.update(interval_variables("t_collapse", dims, est, low, high,
                                      "median time to a single cluster: half the runs have one cluster"))
        tokens = sweep["n"].values.reshape(-1, *([1] * (clusters.ndim - 1)))
        out["persistence"] = (dims, _over_seeds(_longest_plateau(t, clusters, tokens), held))
        counts = clusters[..., -1]  # (n, d, beta, value, causal, seed): the meta-stable count at t_max
        out["clusters_final"] = (dims, _over_seeds(counts, held))
        out["collapsed_final"] = (dims, _over_seeds(counts <= 1, held))
        slope = np.full((*counts.shape[:2], *counts.shape[3:5], 3), np.nan)
        beta = sweep["beta"].values
        if len(beta) > 1:
            for i, j, v, m in np.ndindex(*counts.shape[:2], *counts.shape[3:5]):
                if held is None:
                    slope[i, j, v, m] = theory.scaling_exponent(beta, counts[i, j, :, v, m])
                    continue
                # A refined sweep: the betas (n, d) holds, and the seeds all of them hold (a seed is
                # resampled jointly across beta).
                rows = held[i, j, :, v, m].any(-1)
                common = held[i, j, rows, v, m].all(0)
                if rows.sum() >= 2 and common.any():
                    slope[i, j, v, m] = theory.scaling_exponent(beta[rows], counts[i, j, rows, v, m][:, common])
        fit = ("n", "d", "value", "causal")
        out.update(interval_variables("exponent", fit, *np.moveaxis(slope, -1, 0),
                                      "least-squares slope of log clusters_final against log beta"))
        out["exponent_theory"] = (out["d"] - 1) / 2
        means = summary["clusters"].transpose("n", "d", "beta", "value", "causal", "t").values
        if held is None:
            exponent_t = _log_slope(beta, means)
        else:  # a refined sweep: per (n, d), over the betas it holds
            exponent_t = np.full((*means.shape[:2], *means.shape[3:]), np.nan)
            for i, j in np.ndindex(*means.shape[:2]):
                rows = held[i, j, :, 0, 0].any(-1)
                exponent_t[i, j] = _log_slope(beta[rows], means[i:i + 1, j:j + 1, rows])[0, 0]
        out["exponent_t"] = ((*fit, "t"), exponent_t)
        for var in (*COUNTS, "strong_count_theory", "renyi_count_saturated"):
            out[var] = summary[var].isel(value=0, causal=0, drop=True) if var in COUNTS else summary[var]
        for var in ("captured_renyi", "captured_strong"):
            out[f"{var}_final"] = summary[var].isel(t=-1, capture=0, drop=True)
        attrs = {
            "persistence": "seed mean of the longest stretch of time with a constant cluster count in (1, n)",
            "clusters_final": "seed mean of the number of clusters at t_max (the meta-stable clusters)",
            "collapsed_final": "fraction of runs down to a single cluster at t_max",
            "exponent_theory": "(d - 1)/2: the predicted beta exponent of the meta-stable cluster count (Section 5)",
            "exponent_t": "slope of log (seed-mean clusters) against log beta at each output time",
            "captured_renyi_final": "seed mean of captured_renyi at t_max, first capture radius",
            "captured_strong_final": "seed mean of captured_strong at t_max, first capture radius",
        }
        for var, long_name in attrs.items():
            out[var].attrs.update(long_name=long_name, units="1")
        out.attrs.update(summary.attrs)
        columns = ["t_collapse", "t_collapse_low", "t_collapse_high", "persistence", "clusters_final",
                   "collapsed_final", "exponent", "exponent_low", "exponent_high", "exponent_theory", "renyi_count",
                   "renyi_count_saturated", "strong_count", "strong_count_theory", "captured_renyi_final",
                   "captured_strong_final"]
        table = out[columns].drop_vars([c for c in out.coords if c not in dims]).to_dataframe()
        table = table.reset_index().rename(columns={"t_collapse_low": "ci_low", "t_collapse_high": "ci_high"})
        table.insert(len(dims), "V", np.asarray(sweep.attrs["value_names"].split(", "))[table["value"]])
        return table[[*dims, "V", *table.columns.drop([*dims, "V"])]], out

    # ------------------------------------------------------------------ figures
    def figures(self, grid: dict[str, list[float]], options: dict[str, Any]) -> list[FigureSpec]:
        specs = [FigureSpec("captured", captions.caption_captured(grid, options)),
                 FigureSpec("clusters", captions.caption_clusters(grid, options)),
                 FigureSpec("boundary", captions.caption_boundary(grid, options))]
        if len(grid["beta"]) > 1:
            specs.append(FigureSpec("scaling", captions.caption_scaling(grid, options)))
        if options["snapshot_times"]:
            specs += [FigureSpec("final_positions", captions.caption_final_positions(grid, options)),
                      FigureSpec("centres", captions.caption_centres(grid, options))]
        return specs



def _log_slope(beta: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Least-squares slope of log counts against log beta, counts (n, d, beta, ...): (n, d, ...);
    NaN with fewer than two beta."""
    if len(beta) < 2:
        return np.full(counts.shape[:2] + counts.shape[3:], np.nan)
    x = np.log(beta) - np.log(beta).mean()
    y = np.log(np.moveaxis(counts, 2, -1))
    return ((y - y.mean(-1, keepdims=True)) * x).sum(-1) / (x * x).sum()


def _over_seeds(values: np.ndarray, held: np.ndarray | None) -> np.ndarray:
    """Mean over the last axis (seeds) of ``values``; over the seeds ``held`` (same shape, a refined
    sweep) where given, NaN where none is."""
    if held is None:
        return values.mean(-1)
    return seed_mean(values[..., None], held[..., None])[..., 0]


def _longest_plateau(t: np.ndarray, counts: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Longest time (on the output grid) over which ``counts`` (..., T) stays at one value
    strictly between 1 and the token count ``n`` (broadcast against counts[..., 0]), from the
    first output time at that value to the first at another; (...). NaN where counts are."""
    same = (counts[..., 1:] == counts[..., :-1]) & (counts[..., :-1] > 1) & (counts[..., :-1] < n)
    dt = np.diff(t)
    best = np.zeros(counts.shape[:-1])
    run = np.zeros(counts.shape[:-1])
    for k in range(same.shape[-1]):
        run = np.where(same[..., k], run + dt[k], 0.0)
        best = np.maximum(best, run)
    return np.where(np.isnan(counts).any(-1), np.nan, best)
