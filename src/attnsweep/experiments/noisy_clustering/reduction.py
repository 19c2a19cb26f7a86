"""noisy_clustering: statistics over seeds, the mean-field theory on the same coordinates, and the
coupling where the averaged order parameter crosses the level from each start."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from attnsweep.experiments.noisy_clustering import theory
from attnsweep.experiments.noisy_clustering.resources import STARTS, couplings
from attnsweep.reduce.crossing import interval_variables
from attnsweep.reduce.inversion import crossing_interval
from attnsweep.reduce.seeds import presence, seed_statistics

OBSERVED = ("order", "order_sq", "alignment", "clusters", "energy")
TRACED = ("order", "alignment")
#: Couplings of the mean-field |m| curves, evenly over the K axis' finite span.
CURVE_POINTS = 201


def reduce(sweep: xr.Dataset) -> xr.Dataset:
    out = seed_statistics(sweep, OBSERVED)
    count = sweep["order"].notnull().sum("seed")
    for var in OBSERVED:
        se = sweep[f"{var}_se"]
        out[f"{var}_run_se"] = np.sqrt((se ** 2).sum("seed")) / count
        out[f"{var}_run_se"].attrs.update(long_name=f"standard error of the seed mean of {var} from the runs' "
                                                    "autocorrelation times", units="1")
        out[f"{var}_tau"] = sweep[f"{var}_tau"].mean("seed")
        out[f"{var}_tau"].attrs.update(sweep[f"{var}_tau"].attrs, cell_methods="seed: mean")
    for var in TRACED:
        out[f"{var}_trace"] = sweep[f"{var}_trace"].mean("seed")
        out[f"{var}_trace"].attrs.update(sweep[f"{var}_trace"].attrs, cell_methods="seed: mean")
    out["susceptibility"] = out["order_sq"] * out["n"]
    out["susceptibility"].attrs.update(long_name="n times the squared length of m: 1 for independent uniform tokens",
                                       units="1")
    out = out.compute()
    out.update(mean_field(out, sweep.attrs))
    out.attrs.update(sweep.attrs, seeds=sweep.sizes["seed"])
    return out


def _transitions(ds: np.ndarray, betas: np.ndarray) -> dict[tuple[int, float], theory.Transition | None]:
    """The solver's transition per (d, beta); None at beta = 0 (no clustered branch to trace)."""
    return {(int(d), float(b)): theory.transition(float(b), int(d)) if b > 0 else None for d in ds for b in betas}


def stable_order(branch: theory.Branch, k: np.ndarray, start: str) -> np.ndarray:
    """The mean-field |m| reached at couplings ``k`` from ``start``: from uniform tokens the uniform
    state (0) until it turns unstable at K_#, then the clustered branch; from one point the clustered
    branch wherever it exists (K >= K_s), 0 below. On the branch, its largest r at that K."""
    out = np.zeros(len(k))
    r, kk = branch.r, branch.k
    for i, value in enumerate(k):
        if start == "uniform" and value < branch.k_sharp:
            continue
        above = np.flatnonzero((kk[:-1] - value) * (kk[1:] - value) <= 0)  # segments that hold K
        if len(above):
            j = above[-1]
            x = (value - kk[j]) / (kk[j + 1] - kk[j]) if kk[j + 1] != kk[j] else 0.0
            out[i] = r[j] + x * (r[j + 1] - r[j])
        elif value > kk.max():
            out[i] = np.nan  # past the resolved branch
    return out


def mean_field_crossing(branch: theory.Branch, level: float, start: str) -> float:
    """The K where the mean-field |m| from ``start`` first reaches ``level``: from one point the
    least K of the branch at r >= level (the clustered state there has r >= level; below it the
    state falls to a smaller r or to 0); from uniform tokens the same, but not before K_#."""
    upper = branch.r >= level
    if not upper.any():
        return np.nan
    # K where r first reaches the level, between the two branch points around it (r can fold back at
    # large d, so no interpolation over the whole branch), or a point further on with a smaller K
    j = int(np.argmax(upper))
    at = branch.k[j] if j == 0 else np.interp(level, branch.r[j - 1:j + 1], branch.k[j - 1:j + 1])
    least = min(float(at), float(branch.k[upper].min()))
    return max(least, branch.k_sharp) if start == "uniform" else least


def mean_field(summary: xr.Dataset, attrs: dict[str, Any]) -> xr.Dataset:
    """K in absolute units, K_# and beta_* (closed forms), K_c, K_s and r_c (the solver), the
    Ornstein-Zernike susceptibility 1 / (1 - K/K_#) below K_# and the mean-field |m| from each start.
    USA only: NaN for SA, whose noisy mean-field limit has no free energy here."""
    ds, betas, ks = summary["d"].values, summary["beta"].values, summary["K"].values
    unit = attrs["K_unit"]
    usa = attrs["normalisation"] == "usa"
    shape = (len(ds), len(betas))
    k_abs = np.stack([couplings(ks, betas, int(d), unit).T for d in ds])  # (d, beta, K)
    finite = ks[np.isfinite(ks)]
    curve = np.linspace(finite.min(), finite.max(), CURVE_POINTS) if len(finite) > 1 else finite
    curve_abs = np.stack([couplings(curve, betas, int(d), unit).T for d in ds])  # (d, beta, K_curve)
    k_sharp = np.stack([theory.k_sharp(betas.astype(float), int(d)) for d in ds])
    level = float(attrs["level"])
    k_c, k_s, r_c = (np.full(shape, np.nan) for _ in range(3))
    starts = [STARTS[int(code)] for code in summary["start"].values]  # the sweep's, one or both
    order = np.full((len(starts), *shape, len(curve)), np.nan)
    crossing = np.full((len(starts), *shape), np.nan)
    if usa:
        solved = _transitions(ds, betas)
        for (i, d), (j, b) in itertools.product(enumerate(ds), enumerate(betas)):
            tr = solved[int(d), float(b)]
            if tr is None:
                continue
            k_c[i, j], k_s[i, j], r_c[i, j] = tr.k_c, tr.k_s, tr.r_c
            branch = theory.clustered_branch(float(b), int(d), tr.n_nodes)  # as many nodes as resolved K_c
            for s, start in enumerate(starts):
                order[s, i, j] = stable_order(branch, curve_abs[i, j], start)
                crossing[s, i, j] = mean_field_crossing(branch, level, start)
    scale = k_sharp if unit == "K_sharp" else np.ones(shape)
    ratio = k_abs / k_sharp[..., None]
    chi = 1 / (1 - np.where(ratio < 1, ratio, np.nan))
    if not usa:
        k_sharp, chi = k_sharp * np.nan, chi * np.nan
    db, dbk = ("d", "beta"), ("d", "beta", "K")
    out = xr.Dataset({
        "K_absolute": (dbk, k_abs, {"long_name": "coupling K = 1/sigma^2", "units": "1"}),
        "K_sharp": (db, k_sharp / scale, {"long_name": "K_#: the uniform state's linear-stability threshold "
                                                       "(mean field), in the K axis' unit", "units": "1"}),
        "K_c": (db, k_c / scale, {"long_name": "K_c: the mean-field critical coupling (free energies cross), "
                                               "in the K axis' unit", "units": "1"}),
        "K_s": (db, k_s / scale, {"long_name": "K_s: the clustered branch's spinodal (mean field), in the K "
                                               "axis' unit", "units": "1"}),
        "r_c": (db, r_c, {"long_name": "mean-field order parameter of the clustered state at K_c (0: continuous)",
                          "units": "1"}),
        "beta_star": (("d",), np.array([theory.beta_star(int(d)) for d in ds]) * (1 if usa else np.nan),
                      {"long_name": "beta_*: continuous transition at or below it, discontinuous above",
                       "units": "1"}),
        "susceptibility_theory": (dbk, chi, {"long_name": "mean-field susceptibility below K_#: 1 / (1 - K/K_#)",
                                             "units": "1"}),
        "order_mean_field": (("start", *db, "K_curve"), order, {
            "long_name": "mean-field order parameter reached from the start", "units": "1"}),
        "K_level_mean_field": (("start", *db), crossing / scale, {
            "long_name": "K where the mean-field order parameter from the start reaches the level, in the K axis' unit",
            "units": "1"}),
    }, coords={"d": ds, "beta": betas, "K": ks, "start": summary["start"].values, "K_curve": curve})
    out["K_curve"].attrs.update(long_name="K (the K axis' unit) of the mean-field curves", units="1")
    return out


def boundary(sweep: xr.Dataset, summary: xr.Dataset) -> tuple[pd.DataFrame, xr.Dataset]:
    """Per (n, d, beta) and start: the K where the seed mean of the time-averaged |m| first crosses
    the level, with a confidence interval over seeds, beside its mean-field value."""
    level = float(sweep.attrs["level"])
    dims = ("n", "d", "beta")
    k = sweep["K"].values
    out = xr.Dataset(coords={c: sweep[c].values for c in dims})
    for s, start in enumerate(STARTS):
        if s not in sweep["start"].values:
            continue
        one = sweep.sel(start=s)
        samples = one["order"].transpose(*dims, "seed", "K").values
        present = presence(one, (*dims, "seed", "K"))
        found = crossing_interval(k, samples, level, present=present)
        out.update(interval_variables(f"K_{start}", dims, found,
                                      f"K where the seed-mean order parameter from {start} tokens crosses the level"))
        out[f"K_{start}_mean_field"] = summary["K_level_mean_field"].sel(start=s, drop=True)
        out[f"K_{start}_mean_field"].attrs.update(
            long_name=f"K where the mean-field order parameter from {start} tokens reaches the level, in the K "
                      "axis' unit")
    shape = xr.DataArray(np.zeros([out.sizes[c] for c in dims]), dims=dims, coords=out.coords)
    for var in ("K_sharp", "K_c", "K_s", "r_c"):
        out[var] = summary[var].broadcast_like(shape)
    out.attrs.update(summary.attrs, level=level)
    table = out.to_dataframe().reset_index()
    return table, out
