"""The structured search at one n, the experiment's theory job: the thresholds of its families,
and beta_c(n).

beta_c(n) from the structured search is the largest family threshold (:mod:`.structured`): the
largest beta on the scan at which some searched cluster configuration is a strict local maximum,
refined by bisection. It bounds the true beta_c(n) from below; the random starts check it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import xarray as xr

from attnsweep.contract import JobSpec
from attnsweep.experiments.circle_synchronization import structured


def thresholds(n: int, options: dict[str, Any]) -> list[structured.Threshold]:
    """Every searched family of n with a stable solution on the scan, its threshold located."""
    betas = structured.scan(options["scan"])
    found = (structured.threshold(m, betas, options["threshold_tol"])
             for m in structured.families(n, options["k_max"], options["spread"]))
    return sorted((t for t in found if t is not None), key=lambda t: -t.beta_low)


def label(masses: tuple[int, ...]) -> str:
    """A family as text: its masses in circular order, e.g. ``2-2-2``."""
    return "-".join(map(str, masses))


def theory(job: JobSpec) -> xr.Dataset:
    """The structured search at the job's n (its options: k_max, spread, scan, threshold_tol): beta_c
    (the largest family threshold, and the unstable side of its bracket), and every family found
    stable on the scan, largest threshold first: its threshold, masses in circular order, and
    whether its branch ends in a fold. ``family`` and ``cluster`` count from 0 (the sweep pads the
    n with fewer with NaN)."""
    (n,) = map(int, job.grid["n"])
    found = thresholds(n, job.options)
    clusters = max([len(t.masses) for t in found], default=0)
    masses = np.full((1, len(found), clusters), np.nan)
    for j, t in enumerate(found):
        masses[0, j, : len(t.masses)] = t.masses
    first = found[0] if found else None
    ds = xr.Dataset(
        {"beta_c_structured": ("n", [first.beta_low if first else np.nan],
                               {"long_name": "largest beta at which a searched cluster configuration is a "
                                             "spurious attractor (stable side)", "units": "1"}),
         "beta_c_structured_high": ("n", [first.beta_high if first else np.nan],
                                    {"long_name": "unstable side of beta_c_structured's bracket", "units": "1"}),
         "family_beta": (("n", "family"), [[t.beta_low for t in found]],
                         {"long_name": "a stable family's threshold (stable side), families by threshold, "
                                       "largest first", "units": "1"}),
         "family_fold": (("n", "family"), [[float(t.end == "fold") for t in found]],
                         {"long_name": "1 where the family's branch ends in a fold, 0 where an eigenvalue "
                                       "crosses 0", "units": "1"}),
         "family_masses": (("n", "family", "cluster"), masses,
                           {"long_name": "the family's cluster masses in circular order", "units": "1"})},
        coords={"n": [n], "family": np.arange(len(found)), "cluster": np.arange(clusters)})
    ds["n"].attrs.update(long_name="number of particles on the circle", units="1")
    ds.attrs.update({key: job.options[key] for key in ("k_max", "spread", "scan", "threshold_tol")})
    return ds
