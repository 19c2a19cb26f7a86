"""causal_clustering: the reduction of a sweep, statistics over seeds, the theory on the same coordinates,
and the boundary."""

from __future__ import annotations

import numpy as np
import pandas as pd
import xarray as xr

from attnsweep.experiments.causal_clustering import SERIES, separation
from attnsweep.experiments.causal_clustering import theory as closed_forms
from attnsweep.reduce.crossing import interval_columns, interval_variables, seed_mean
from attnsweep.reduce.inversion import crossing_interval
from attnsweep.reduce.seeds import presence, seed_statistics

QUANTILES = (0.1, 0.9)  # the band of Fig. 3


COUNTS = ("renyi_count", "strong_count")


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


def reduce(sweep: xr.Dataset) -> xr.Dataset:
    """Seed means and standard errors of every series and count; the 0.1 and 0.9 quantiles over
    seeds of the captured fractions (Fig. 3); the first seed's snapshots; the centre-count closed_forms."""
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
    out.update(theory(sweep, float(sweep.attrs["separation"])))
    out.attrs.update(sweep.attrs)
    out.attrs["seeds"] = k
    return out


def theory(sweep: xr.Dataset, c: float) -> xr.Dataset:
    """Per (n, d, beta): the mean strong-centre count of i.i.d. uniform tokens (Lemma C.1, with
    the d = 3 erratum) and, for d = 2, the saturated Renyi count c_R 2 pi / delta (C.4)."""
    n, d, beta = (sweep[c_].astype(float) for c_ in ("n", "d", "beta"))
    n, d, beta = xr.broadcast(n, d, beta)
    delta = separation(beta.values, c)
    strong = np.vectorize(lambda n_, dl, d_: float(closed_forms.expected_strong_count(int(n_), dl, int(d_))))(
        n.values, delta, d.values)
    renyi = np.where(d.values == 2, closed_forms.renyi_saturated_count(delta), np.nan)
    out = xr.Dataset({"strong_count_theory": (n.dims, strong), "renyi_count_saturated": (n.dims, renyi)},
                     coords=n.coords)
    out["strong_count_theory"].attrs.update(
        long_name="(1 - (1 - p)^n)/p, p the cap measure of radius delta (Lemma C.1)", units="1")
    out["renyi_count_saturated"].attrs.update(
        long_name="c_R 2 pi / delta: Renyi centres of an infinite sequence on the circle (d = 2 only)", units="1")
    return out


def boundary(sweep: xr.Dataset, summary: xr.Dataset) -> tuple[pd.DataFrame, xr.Dataset]:
    """Per (n, d, beta, value, mask): the median collapse time (half the runs down to one
    cluster) with a confidence interval over seeds; the mean persistence of a meta-stable state; the mean
    cluster count at t_max and its fitted beta exponent with a bootstrap interval, against
    (d - 1)/2 (and the exponent at every output time, boundary.zarr only); the centre counts
    against theory; the captured fractions at t_max."""
    dims = ("n", "d", "beta", "value", "causal")
    t = sweep["t"].values
    clusters = sweep["clusters"].transpose(*dims, "seed", "t").values
    collapsed = np.where(np.isnan(clusters), np.nan, clusters <= 1).astype(float)
    # A refined sweep: the seeds each (n, d, beta) holds, broadcast over value and mask.
    held = presence(sweep, ("n", "d", "beta", "seed"))
    held = None if held is None else np.broadcast_to(held[:, :, :, None, None, :], clusters.shape[:-1])
    found = crossing_interval(np.r_[t[0] - 1.0, t], np.concatenate(
        [np.zeros(collapsed.shape[:-1] + (1,)), collapsed], -1), 0.5,
        present=None if held is None else held[..., None])
    out = xr.Dataset(coords={c: sweep[c].values for c in dims})
    out.update(interval_variables("t_collapse", dims, found,
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
                slope[i, j, v, m] = closed_forms.scaling_exponent(beta, counts[i, j, :, v, m])
                continue
            # A refined sweep: the betas (n, d) holds, and the seeds all of them hold (a seed is
            # resampled jointly across beta).
            rows = held[i, j, :, v, m].any(-1)
            common = held[i, j, rows, v, m].all(0)
            if rows.sum() >= 2 and common.any():
                slope[i, j, v, m] = closed_forms.scaling_exponent(beta[rows], counts[i, j, rows, v, m][:, common])
    fit = ("n", "d", "value", "causal")
    named = ("least-squares slope of log clusters_final against log beta",
             "2.5% bootstrap-over-seeds quantile of exponent", "97.5% bootstrap-over-seeds quantile of exponent")
    for name, values, what in zip(("exponent", "exponent_low", "exponent_high"), np.moveaxis(slope, -1, 0), named):
        out[name] = (fit, values, {"long_name": what, "units": "1"})
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
    columns = ["t_collapse", *interval_columns("t_collapse"), "persistence", "clusters_final",
               "collapsed_final", "exponent", "exponent_low", "exponent_high", "exponent_theory", "renyi_count",
               "renyi_count_saturated", "strong_count", "strong_count_theory", "captured_renyi_final",
               "captured_strong_final"]
    table = out[columns].drop_vars([c for c in out.coords if c not in dims]).to_dataframe()
    table = table.reset_index()
    table.insert(len(dims), "V", np.asarray(sweep.attrs["value_names"].split(", "))[table["value"]])
    return table[[*dims, "V", *table.columns.drop([*dims, "V"])]], out
