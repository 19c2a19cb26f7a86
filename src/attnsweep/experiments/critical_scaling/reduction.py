"""critical_scaling: the reduction of a sweep, statistics over seeds, the theory on the same coordinates,
and the boundary."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from attnsweep.experiments.critical_scaling import theory as closed_forms
from attnsweep.reduce.crossing import interval_columns, interval_variables, max_slope, seed_mean
from attnsweep.reduce.inversion import crossing_interval
from attnsweep.reduce.seeds import presence, seed_statistics

ETA_LEVEL = 0.25  # eta / plateau at gamma_c, docs/papers/000.md §6 (Eq. 20), not 1/2.


def on_grid(func: Any, **coords: xr.DataArray) -> xr.DataArray:
    """Evaluate a numpy function of broadcast coordinates and label the result."""
    arrays = xr.broadcast(*coords.values())
    values = func(**{k: a.values for k, a in zip(coords, arrays)})
    return xr.DataArray(values, coords=arrays[0].coords, dims=arrays[0].dims)


def reduce(sweep: xr.Dataset) -> xr.Dataset:
    k = sweep.sizes["seed"]
    eta_normalized = (sweep["eta"] / sweep["eta_plateau"]).assign_attrs(long_name="eta / eta_plateau", units="1")
    sweep = sweep.assign(eta_normalized=eta_normalized)
    out = seed_statistics(sweep, ("lambda", "eta", "eta_normalized", "n_eff"))
    out.update(seed_statistics(sweep, ("eta_plateau", "cos_in_quantile", "cos_out_quantile"), se=False))
    if "eta_probe" in sweep:
        probe_var = sweep["eta_probe"].var("probe", ddof=1) / sweep.sizes["probe"]
        out["eta_hutchinson_se"] = np.sqrt(probe_var.sum("seed")) / k
        out["eta_hutchinson_se"].attrs.update(long_name="part of eta_se due to the finite probe count", units="1")
    if "simulated" in sweep:
        out["seeds_held"] = sweep["simulated"].sum("seed")
        out["seeds_held"].attrs.update(long_name="seeds simulated at the point (a refined sweep differs "
                                                 "by point; 0: not simulated)", units="1")
    out = out.compute()
    out.update(theory(out))
    out.attrs.update(sweep.attrs)
    out.attrs["seeds"] = k
    return out


def theory(summary: xr.Dataset) -> xr.Dataset:
    """Closed forms on the summary's coordinates (q = 1 simplex; docs/papers/000.md §4)."""
    n, d, rho, gamma, alpha = (summary[c].astype(float) for c in ("n", "d", "rho", "gamma", "alpha"))
    eta_simplex = on_grid(lambda n, d, rho, gamma: closed_forms.simplex_eta(n, d, rho, gamma),
                          n=n, d=d, rho=rho, gamma=gamma)
    out = xr.Dataset(
        {
            "gamma_critical": on_grid(lambda rho: closed_forms.gamma_critical(rho), rho=rho),
            "lambda_critical": on_grid(closed_forms.lambda_critical, rho=rho, alpha=alpha),
            "lambda_simplex": on_grid(closed_forms.simplex_lambda, n=n, rho=rho, gamma=gamma, alpha=alpha),
            "lambda_limit": on_grid(closed_forms.lambda_limit, rho=rho, gamma=gamma, alpha=alpha),
            "eta_simplex": eta_simplex.where(alpha == 0),
            "eta_limit": on_grid(closed_forms.eta_limit, d=d, rho=rho, gamma=gamma).where(alpha == 0),
        }
    )
    attrs = {
        "gamma_critical": "critical scaling gamma_c = 1/(1 - rho) (Theorem 2.1)",
        "lambda_critical": "lambda at gamma_c as n -> inf (Eq. 6; 1/(1+3 rho) for alpha = 0, Eq. 7)",
        "lambda_simplex": "exact finite-n lambda on the simplex, q = 1 (Lemmas A.3-A.4)",
        "lambda_limit": "n -> inf limit of lambda on the simplex (Theorem 2.1, Eqs. 6-7)",
        "eta_simplex": "exact finite-n eta on the simplex, q = 1, alpha = 0 (Eq. 86, Eq. 90 corrected; "
                       "for d < n no simplex exists and this is the formula continued in d)",
        "eta_limit": "n -> inf limit of eta on the simplex, alpha = 0 (Theorem 2.3)",
    }
    for var, long_name in attrs.items():
        out[var].attrs.update(long_name=long_name, units="1")
    return out


def boundary(sweep: xr.Dataset, summary: xr.Dataset) -> tuple[pd.DataFrame, xr.Dataset]:
    """gamma*(rho; n, d, alpha): lambda crossing lambda_c(rho) and eta/plateau crossing 1/4."""
    gamma = sweep["gamma"].values
    order = ("n", "d", "rho", "alpha", "seed", "gamma")
    lam = sweep["lambda"].transpose(*order).values
    level = summary["lambda_critical"].broadcast_like(sweep["lambda"].isel(seed=0, gamma=0))
    level = level.transpose("n", "d", "rho", "alpha").values
    # rho = 0, alpha = 0: lambda_c = 1 is also the supercritical limit, so no crossing exists.
    level = np.where(level < 1 - 1e-9, level, np.nan)
    eta = (sweep["eta"] / sweep["eta_plateau"]).transpose(*order).values
    eta = np.where((sweep["alpha"].values == 0)[None, None, None, :, None, None], eta, np.nan)
    dims = ("n", "d", "rho", "alpha")
    coords = {c: sweep[c].values for c in dims}
    out = xr.Dataset(coords=coords)
    present = presence(sweep, order)  # a refined sweep: rows hold different gamma and seeds
    crossings = (("lambda", lam, level, "seed-mean lambda crosses lambda_critical(rho, alpha)"),
                 ("eta", eta, ETA_LEVEL, f"seed-mean eta/eta_plateau crosses {ETA_LEVEL} (alpha = 0 only)"))
    for obs, samples, lv, what in crossings:
        found = crossing_interval(gamma, samples, lv, present=present)
        mean = seed_mean(samples, present)
        out.update(interval_variables(f"gamma_star_{obs}", dims, found, f"gamma where {what}"))
        out[f"gamma_max_slope_{obs}"] = (dims, max_slope(gamma, mean))
        out[f"gamma_star_{obs}_scaled"] = out[f"gamma_star_{obs}"] * (1 - out["rho"])
        out[f"gamma_star_{obs}_scaled_median"] = out[f"gamma_star_{obs}_scaled"].median("rho")
    out["gamma_critical"] = summary["gamma_critical"]
    n, d, rho, alpha = (out[c].astype(float) for c in ("n", "d", "rho", "alpha"))
    out["gamma_star_lambda_simplex"] = on_grid(
        lambda n, rho, alpha: closed_forms.simplex_gamma_star(n, rho, alpha=alpha), n=n, rho=rho, alpha=alpha)
    out["gamma_star_eta_simplex"] = on_grid(
        lambda n, d, rho: closed_forms.simplex_gamma_star(n, rho, d=d, level=ETA_LEVEL), n=n, d=d, rho=rho
    ).where(alpha == 0)
    for obs in ("lambda", "eta"):
        out[f"gamma_star_{obs}_simplex"].attrs.update(
            long_name=f"gamma* of {obs} on the finite-n simplex, q = 1 (the same level; docs/papers/000.md §4)",
            units="1")
        out[f"gamma_max_slope_{obs}"].attrs.update(long_name=f"gamma of the steepest rise of {obs}", units="1")
        out[f"gamma_star_{obs}_scaled"].attrs.update(long_name="gamma* (1 - rho), -> 1 as n, d grow", units="1")
        out[f"gamma_star_{obs}_scaled_median"].attrs.update(
            long_name="median over rho of gamma* (1 - rho): the finite-size table per (n, d)", units="1")
    out.attrs.update(summary.attrs, eta_level=ETA_LEVEL)
    table = _table(out)
    return table, out


def _table(bnd: xr.Dataset) -> pd.DataFrame:
    rows = []
    for obs in ("lambda", "eta"):
        interval = interval_columns(f"gamma_star_{obs}")
        frame = bnd[[f"gamma_star_{obs}", *interval, f"gamma_max_slope_{obs}", f"gamma_star_{obs}_simplex",
                     "gamma_critical"]].to_dataframe().reset_index()
        frame = frame.rename(columns={**dict(zip(interval, interval_columns("gamma_star"))),
                                      f"gamma_star_{obs}": "gamma_star",
                                      f"gamma_max_slope_{obs}": "gamma_max_slope",
                                      f"gamma_star_{obs}_simplex": "gamma_star_simplex"})
        frame.insert(0, "observable", obs)
        rows.append(frame)
    table = pd.concat(rows, ignore_index=True)
    table["gamma_star_times_1_minus_rho"] = table["gamma_star"] * (1 - table["rho"])
    table = table.dropna(subset=["gamma_star", "gamma_max_slope"], how="all")
    return table[["observable", "n", "d", "rho", "alpha", "gamma_star", *interval_columns("gamma_star"),
                  "gamma_star_times_1_minus_rho", "gamma_max_slope", "gamma_star_simplex", "gamma_critical"]]
