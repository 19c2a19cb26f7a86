"""sphere_clustering: the reduction of a sweep, statistics over seeds, the theory on the same coordinates,
and the boundary."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from attnsweep.experiments.sphere_clustering import beta_eff
from attnsweep.experiments.sphere_clustering import theory as closed_forms
from attnsweep.reduce.crossing import first_crossing, interval_columns, interval_variables
from attnsweep.reduce.inversion import crossing_interval
from attnsweep.reduce.seeds import presence, seed_statistics

LEVEL = 0.5  # the boundary: the clustered-pair fraction crosses 1/2 (docs/papers/001.md §6)


BAND = (0.1, 0.9)  # level sets that show the width of the metastable zone


def reduce(sweep: xr.Dataset) -> xr.Dataset:
    k = sweep.sizes["seed"]
    out = seed_statistics(sweep, [v for v in ("clustered", "clusters", "boolean_rank", "min_cosine", "energy")
                                  if v in sweep])
    if "snapshot" in sweep:
        out["snapshot"] = sweep["snapshot"].isel(seed=0)  # one trajectory per beta (Fig. 4)
    out = out.compute()
    out.update(theory(out, sweep.attrs))
    out.attrs.update(sweep.attrs)
    out.attrs["seeds"] = k
    return out


def theory(summary: xr.Dataset, attrs: dict[str, Any]) -> xr.Dataset:
    """gamma_beta(t) (Theorem 6.8) and the hitting time t*(beta) of 1 - delta (Gamma_{inf,delta},
    Eq. 6.12) at beta_eff; only for Q = K = V = I (NaN otherwise)."""
    model = "usa" if "usa" in attrs.get("normalisation", "sa") else "sa"
    delta = float(attrs.get("delta", 1e-3))
    identity = attrs.get("matrices") == "identity"
    n, beta, gamma = (summary[c].astype(float) for c in ("n", "beta", "gamma"))
    b = beta_eff(beta, gamma, n)
    b, n_ = xr.broadcast(b, n)
    times = summary["t"].values
    t_star = np.full(b.shape, np.nan)
    curve = np.full((*b.shape, len(times)), np.nan)
    for at in np.ndindex(b.shape):  # the closed forms hold up to beta = 700 (float64 range)
        if b.values[at] <= closed_forms.BETA_MAX:
            t_star[at] = closed_forms.hitting_time(b.values[at], int(n_.values[at]), delta, model)
            curve[at] = closed_forms.gamma_curve(times, b.values[at], int(n_.values[at]), model)
    out = xr.Dataset({
        "t_star_theory": (b.dims, t_star),
        "gamma_curve": ((*b.dims, "t"), curve),
    }, coords={**b.coords, "t": times})
    if not identity:
        out = out * np.nan
    out["t_star_theory"].attrs.update(
        long_name=f"time where gamma_beta reaches 1 - delta: Gamma_inf,delta (Eq. 6.12), {model.upper()}",
        units="1")
    out["gamma_curve"].attrs.update(
        long_name=f"common pairwise cosine gamma_beta(t) for orthogonal tokens (Theorem 6.8), {model.upper()}",
        units="1")
    return out


def boundary(sweep: xr.Dataset, summary: xr.Dataset) -> tuple[pd.DataFrame, xr.Dataset]:
    """t*(beta; n, d): the seed-mean clustered fraction crosses 1/2, with a confidence interval over seeds;
    the 0.1 and 0.9 crossings; and the distance to Gamma_inf,delta."""
    dims = ("n", "d", "rho", "beta", "gamma")
    t = sweep["t"].values
    samples = sweep["clustered"].transpose(*dims, "seed", "t").values
    present = presence(sweep, (*dims, "seed"))  # a refined sweep: points hold different seeds
    found = crossing_interval(t, samples, LEVEL, present=None if present is None else present[..., None])
    mean = summary["clustered"].transpose(*dims, "t").values
    out = xr.Dataset(coords={c: sweep[c].values for c in dims})
    out.update(interval_variables("t_star", dims, found,
                                  "time where the seed-mean clustered fraction crosses 1/2"))
    for level in BAND:
        out[f"t_{int(level * 100)}"] = (dims, first_crossing(t, mean, level))
    out["t_star_theory"] = summary["t_star_theory"].broadcast_like(out["t_star"])
    out["t_star_minus_theory"] = out["t_star"] - out["t_star_theory"]
    out["beta_eff"] = beta_eff(out["beta"], out["gamma"], out["n"]).broadcast_like(out["t_star"])
    attrs = {
        "t_10": "time where the seed-mean clustered fraction crosses 0.1",
        "t_90": "time where the seed-mean clustered fraction crosses 0.9",
        "t_star_theory": "Gamma_inf,delta: hitting time of 1 - delta by gamma_beta (Eq. 6.12)",
        "t_star_minus_theory": "t_star - t_star_theory: finite-d distance to Gamma_inf,delta",
        "beta_eff": "beta + gamma log n",
    }
    for var, long_name in attrs.items():
        out[var].attrs.update(long_name=long_name, units="1")
    out.attrs.update(summary.attrs, level=LEVEL)
    table = out.to_dataframe().reset_index()
    columns = ["n", "d", "rho", "beta", "gamma", "beta_eff", "t_star", *interval_columns("t_star"),
               "t_10", "t_90", "t_star_theory", "t_star_minus_theory"]
    return table[columns], out
