"""circle_synchronization: basin fractions over the starts, and beta_c(n) from both searches.

Per (n, beta, normalisation) the fraction of starts that end in each class, with its 95%
Clopper-Pearson interval (exact for a binomial count); per n the structured search's family
thresholds (:mod:`.theory`: the theory jobs', joined to the sweep). The boundary: beta_c(n) from the
random starts, bracketed by the largest grid beta with a certified spurious attractor and the next
beta of the grid (refinement adds betas inside the bracket), beside beta_c(n) from the structured
search.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import xarray as xr
from scipy.special import betaincinv

from attnsweep.experiments.circle_synchronization import theory
from attnsweep.experiments.circle_synchronization.critical import KINDS

CONFIDENCE = 0.95
ROW = ("n", "normalisation")
#: The structured search's variables (:func:`.theory.theory`).
STRUCTURED = ("beta_c_structured", "beta_c_structured_high", "family_beta", "family_fold", "family_masses")


def clopper_pearson(count: np.ndarray, total: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The exact two-sided CONFIDENCE interval of a binomial proportion count / total."""
    alpha = (1 - CONFIDENCE) / 2
    with np.errstate(invalid="ignore", divide="ignore"):
        low = np.where(count > 0, betaincinv(count, total - count + 1, alpha), 0.0)
        high = np.where(count < total, betaincinv(count + 1, total - count, 1 - alpha), 1.0)
    empty = total == 0
    return np.where(empty, np.nan, low), np.where(empty, np.nan, high)


def reduce(sweep: xr.Dataset) -> xr.Dataset:
    present = sweep["residual"].notnull()
    total = present.sum("seed")
    out = xr.Dataset({"starts": total.astype(np.int64)})
    out["starts"].attrs.update(long_name="random starts at the point", units="1")
    for k, kind in enumerate(KINDS):
        count = ((sweep["kind"] == k) & present).sum("seed")
        low, high = clopper_pearson(count.values, total.values)
        with np.errstate(invalid="ignore", divide="ignore"):
            out[f"p_{kind}"] = count / total.where(total > 0)
        out[f"p_{kind}_low"] = (count.dims, low)
        out[f"p_{kind}_high"] = (count.dims, high)
        out[f"p_{kind}"].attrs.update(long_name=f"fraction of the starts ending {kind}", units="1")
        for side, q in (("low", (1 - CONFIDENCE) / 2), ("high", (1 + CONFIDENCE) / 2)):
            out[f"p_{kind}_{side}"].attrs.update(long_name=f"{q:.1%} Clopper-Pearson bound of p_{kind}", units="1")
    out.update(sweep[list(STRUCTURED)])  # the theory jobs' (:func:`.theory.theory`), joined to the sweep
    out.attrs.update(sweep.attrs, seeds=sweep.sizes["seed"])
    return out


def boundary(sweep: xr.Dataset, summary: xr.Dataset) -> tuple[pd.DataFrame, xr.Dataset]:
    """beta_c(n, normalisation) from the random starts: the midpoint of the bracket [largest grid beta
    with a certified spurious attractor, next grid beta]; NaN where none was found at any beta (then
    beta_c_high is the grid's smallest beta, the search's reach). Beside it the structured beta_c."""
    beta = summary["beta"].values
    found = (summary["p_spurious"].fillna(0) > 0).transpose(*ROW, "beta").values
    last = np.where(found.any(-1), len(beta) - 1 - np.argmax(found[..., ::-1], -1), -1)
    low = np.where(last >= 0, beta[np.clip(last, 0, None)], np.nan)
    above = np.clip(last + 1, 0, len(beta) - 1)
    high = np.where(last < 0, beta[0], np.where(last == len(beta) - 1, np.inf, beta[above]))
    estimate = np.where(np.isfinite(high) & (last >= 0), (low + high) / 2, np.where(last >= 0, low, np.nan))
    coords = {c: summary[c].values for c in ROW}
    out = xr.Dataset(coords=coords)
    what = "beta_c from random starts: the middle of the bracket of its last certified spurious attractor"
    out["beta_c"] = (ROW, estimate, {"long_name": what, "units": "1"})
    out["beta_c_low"] = (ROW, low, {"long_name": "largest beta with a certified spurious attractor", "units": "1"})
    out["beta_c_high"] = (ROW, high, {"long_name": "the grid's next beta, where none was found", "units": "1"})
    structured = summary["beta_c_structured"].broadcast_like(out["beta_c"]).transpose(*ROW)
    out["beta_c_structured"] = structured
    out["excess"] = (ROW, low - structured.values,
                     {"long_name": "beta_c_low - beta_c_structured: positive where a random start found a "
                                   "spurious attractor the structured search missed", "units": "1"})
    out["normalisation"].attrs.update(sweep["normalisation"].attrs)
    out.attrs.update(summary.attrs)
    table = out.to_dataframe().reset_index()
    flags = sweep["normalisation"].attrs["flag_meanings"].split()
    table["normalisation"] = [flags[int(s)] for s in table["normalisation"]]
    best = {int(n): _family(summary, n) for n in summary["n"].values}
    table["family"] = [best[int(n)] for n in table["n"]]
    columns = ["n", "normalisation", "beta_c", "beta_c_low", "beta_c_high", "beta_c_structured", "family", "excess"]
    return table[columns], out


def _family(summary: xr.Dataset, n: int) -> str:
    masses = summary["family_masses"].sel(n=n).isel(family=0).values
    return theory.label(tuple(int(m) for m in masses[np.isfinite(masses)])) if np.isfinite(masses).any() else ""
