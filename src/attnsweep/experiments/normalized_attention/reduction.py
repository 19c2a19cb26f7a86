"""normalized_attention: statistics over seeds and the boundaries.

p(t, beta) is the probability that a pair of tokens is clustered at time t, estimated from all
pairs of every realisation (the seed mean of ``clustered``: 001's Fig. 3 per scheme). Its level
1/2 is read two ways: t*(beta), the time to clustering, along t; and beta*, the inverse
temperature where p(t_max, beta) crosses 1/2, along beta (p falls with beta where clustering slows).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import xarray as xr

from attnsweep.reduce.crossing import interval_columns, interval_variables
from attnsweep.reduce.inversion import crossing_interval
from attnsweep.reduce.seeds import presence, seed_statistics

LEVEL = 0.5
ROW = ("n", "d", "heads", "scheme")
OBSERVED = ("clustered", "clusters", "boolean_rank", "min_cosine", "radius", "radius_max")


def reduce(sweep: xr.Dataset) -> xr.Dataset:
    out = seed_statistics(sweep, [v for v in OBSERVED if v in sweep]).compute()
    out.attrs.update(sweep.attrs, seeds=sweep.sizes["seed"])
    return out


def boundary(sweep: xr.Dataset, summary: xr.Dataset) -> tuple[pd.DataFrame, xr.Dataset]:
    """t*(n, d, heads, scheme, beta) along t and beta*(n, d, heads, scheme) at t_max along beta,
    each with a 95% confidence interval over realisations."""
    dims = (*ROW, "beta")
    t, beta = sweep["t"].values, sweep["beta"].values
    clustered = sweep["clustered"]
    # A refined sweep: grid points hold different seeds, the same for every scheme.
    present = presence(sweep, ("n", "d", "heads", "beta", "seed"))
    present = None if present is None else np.expand_dims(present, ROW.index("scheme"))
    samples = clustered.transpose(*dims, "seed", "t").values
    at_time = crossing_interval(t, samples, LEVEL, present=None if present is None else present[..., None])
    # 1 - p at t_max rises through 1/2 where p falls through it: the first such beta.
    last = 1 - clustered.isel(t=-1).transpose(*ROW, "seed", "beta").values
    held = None if present is None else np.swapaxes(present, -1, -2)  # (..., seed, beta)
    at_beta = crossing_interval(beta, last, LEVEL, present=held)
    out = xr.Dataset(coords={c: sweep[c].values for c in dims})
    out.update(interval_variables("beta_star", ROW, at_beta,
                                  f"beta where the probability of a clustered pair at t_max crosses {LEVEL}"))
    out.update(interval_variables("t_star", dims, at_time,
                                  f"time where the probability of a clustered pair crosses {LEVEL} "
                                  "(the time to clustering)"))
    out["scheme"].attrs.update(sweep["scheme"].attrs)
    out.attrs.update(summary.attrs, level=LEVEL, t_max=float(t[-1]))
    table = out.to_dataframe().reset_index()
    flags = sweep["scheme"].attrs["flag_meanings"].split()
    table["scheme"] = [flags[int(s)] for s in table["scheme"]]
    columns = ["n", "d", "heads", "scheme", "beta", "t_star", *interval_columns("t_star"), "beta_star",
               *interval_columns("beta_star")]
    return table[columns], out
