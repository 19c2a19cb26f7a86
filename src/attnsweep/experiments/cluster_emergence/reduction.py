"""cluster_emergence: the reduction of a sweep, statistics over seeds, the theory on the same coordinates,
and the boundary."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import xarray as xr

from attnsweep.experiments.cluster_emergence import theory as closed_forms
from attnsweep.experiments.cluster_emergence.good_triples import VARIABLES as HEAD_VARIABLES
from attnsweep.reduce.crossing import first_crossing, interval_columns, interval_variables, seed_mean
from attnsweep.reduce.inversion import FLAGS, crossing_interval
from attnsweep.reduce.seeds import presence, seed_statistics

LEVEL = 0.5  # the boundary: the seed-mean Boolean defect falls below 1/2


BAND = (0.9, 0.1)  # the defect levels that show how long the transition to a Boolean P takes


SERIES = ("rank", "defect", "leaders", "clusters", "resolved")


THEORY = ("limit_fraction", "vertex_fraction", "hull_excess", "hypotheses", "rank_bound", "levels",
          "orthant_fraction", "contraction")


FIRST_SEED = ("coordinate_mean", "coordinate_var", "eigenvalue_real", "eigenvalue_imag", "eigenvector",
              "dual_functional", "multiplicity", "phi1_score", "qk_definite", "snapshot", "coordinate_snapshot",
              "attention_snapshot", "query_snapshot", "key_snapshot", *HEAD_VARIABLES)


def _forward_fill(a: np.ndarray) -> np.ndarray:
    """NaN entries along the last axis replaced by the last finite value before them."""
    index = np.where(np.isnan(a), 0, np.arange(a.shape[-1]))
    return np.take_along_axis(a, np.maximum.accumulate(index, axis=-1), -1)


def reduce(sweep: xr.Dataset) -> xr.Dataset:
    k = sweep.sizes["seed"]
    out = seed_statistics(sweep, SERIES, cell_methods="seed: mean (flagged runs left out)")
    out["valid"] = sweep["defect"].notnull().sum("seed")
    out["valid"].attrs.update(long_name="runs not flagged for scores above 1e300 (rd.LOGIT_LIMIT)", units="1")
    for var in FIRST_SEED:
        if var in sweep:
            out[var] = sweep[var].isel(seed=0)  # one realisation shown (V and Q^T K vary by seed)
            out[var].attrs.update(sweep[var].attrs, cell_methods="first seed")
    out = out.compute()
    out.update(theory(sweep))
    out.attrs.update(sweep.attrs)
    out.attrs["seeds"] = k
    out.attrs["first_seed"] = int(sweep["seed"].values[0])
    return out


def theory(sweep: xr.Dataset) -> xr.Dataset:
    """The limit-set checks of ``closed_forms.py`` on the first and last snapshots, per (n, d, scale):
    seed means of ``limit_fraction`` (Thms 3.1, 4.2, 5.2), ``vertex_fraction`` (Thm 3.1),
    the seed maximum of ``hull_excess`` (Prop. 8.2, Eq. 9.3) and of ``levels`` (Thm 4.2),
    the fraction of seeds meeting the Q, K hypotheses, the rank bound of Thm 2.1, and the
    observations of Fig. 18 (``orthant_fraction``, ``contraction``, seed means). NaN where a
    check does not apply."""
    dims = ("n", "d", "scale", "seed")
    shape = tuple(sweep.sizes[dim] for dim in dims)
    checks = {name: np.full(shape, np.nan) for name in THEORY}
    multiplicity = sweep["multiplicity"].transpose(*dims).values
    score = sweep["phi1_score"].transpose(*dims).values
    definite = sweep["qk_definite"].transpose(*dims).values
    d = np.broadcast_to(sweep["d"].values[None, :, None, None], shape)
    k = np.nan_to_num(multiplicity).astype(int)
    checks["hypotheses"] = np.where(k == 0, np.nan, np.where(k == 1, score > 0, definite > 0))
    checks["rank_bound"] = np.where((d == 1) & (k == 1) & (definite > 0), closed_forms.RANK_BOUND_D1, np.nan)
    if "coordinate_snapshot" in sweep and sweep.sizes["snapshot_t"] > 1:
        snaps = sweep["coordinate_snapshot"].transpose(*dims, "snapshot_t", "token", "mode").values
        tokens = sweep["snapshot"].transpose(*dims, "snapshot_t", "token", "coord").values
        radius = float(sweep.attrs["cluster_radius"])
        for at in np.ndindex(shape):
            if d[at] <= tokens.shape[-1] and np.isfinite(tokens[at][-1, :, :d[at]]).all():
                start, end = tokens[at][0, :, :d[at]], tokens[at][-1, :, :d[at]]
                size = np.linalg.norm(start[:, None] - start[None], axis=-1).max()
                checks["orthant_fraction"][at] = closed_forms.orthant_fraction(end, radius * size)
                checks["contraction"][at] = closed_forms.contraction(end, start)
            first, last = snaps[at][0], snaps[at][-1]
            if not 1 <= k[at] <= first.shape[-1] or not np.isfinite(last[:, :k[at]]).all():
                continue
            start, end = first[:, :k[at]], last[:, :k[at]]
            size = np.linalg.norm(start[:, None] - start[None], axis=-1).max()  # diameter
            checks["limit_fraction"][at] = closed_forms.limit_fraction(end, radius * size)
            checks["hull_excess"][at] = closed_forms.hull_excess(end, start) / size
            if k[at] == 1:
                checks["levels"][at] = closed_forms.levels(end[:, 0], radius * size)
            if k[at] == d[at]:
                checks["vertex_fraction"][at] = closed_forms.vertex_fraction(end, radius * size)
    out = xr.Dataset(coords={dim: sweep[dim].values for dim in dims[:-1]})
    for name, values in checks.items():
        data = xr.DataArray(values, dims=dims)
        out[name] = data.max("seed") if name in ("hull_excess", "levels") else data.mean("seed")
    held = presence(sweep, dims)  # a refined sweep: the minimum over the seeds each point holds
    if held is None:
        out["rank_bound"] = xr.DataArray(checks["rank_bound"], dims=dims).min("seed", skipna=False)
    else:
        least = np.where(held, checks["rank_bound"], np.inf).min(-1)
        out["rank_bound"] = xr.DataArray(np.where(held.any(-1), least, np.nan), dims=dims[:-1])
    long_names = {
        "limit_fraction": "seed mean fraction of tokens whose F-coordinates end within cluster_radius diam of "
                          "the boundary of their hull or 0 (Thms 3.1, 4.2, 5.2 predict 1)",
        "vertex_fraction": "seed mean fraction of tokens ending within cluster_radius diam of a vertex of "
                           "conv z (V = lambda I: Thm 3.1, generic limit, predicts 1)",
        "hull_excess": "seed max distance of the last F-coordinates outside the hull of the first, in units "
                       "of their diameter (Prop. 8.2, Eq. 9.3 predict <= 0)",
        "hypotheses": "fraction of seeds with <Q phi_1, K phi_1> > 0 (k = 1) or Q^T K > 0 (k > 1)",
        "rank_bound": "rank of the Boolean limit of P (Thm 2.1, d = 1, V > 0, QK > 0; almost every start)",
        "levels": "seed max number of levels of phi_1^*(z_i) at the last snapshot, cluster_radius diam apart "
                  "(k = 1; Thm 4.2 and Fig. 18 top predict <= 3)",
        "orthant_fraction": "seed mean fraction of tokens in the closed positive orthant at the last snapshot "
                            "(d <= 3; Fig. 18 top predicts 1)",
        "contraction": "seed mean of max_i |z_i| at the last snapshot over that at the first (d <= 3; Fig. 18 "
                       "middle and bottom predict -> 0)",
    }
    for name, long_name in long_names.items():
        out[name].attrs.update(long_name=long_name, units="1")
    return out


def boundary(sweep: xr.Dataset, summary: xr.Dataset) -> tuple[pd.DataFrame, xr.Dataset]:
    """t*(n, d, scale): the seed-mean Boolean defect falls below 1/2, with a confidence interval over seeds;
    the 0.9 and 0.1 crossings; the seed means at t_max; the theory checks.

    Each curve is preceded by b = 1 at t = 0^- (b < 1 always), so a run already Boolean at
    t = 0 crosses at t* = 0 (then with no lower end); a flagged run keeps its last recorded
    defect. Crossings are upward crossings of -b (``attnsweep.reduce.inversion``)."""
    dims = ("n", "d", "scale")
    t = sweep["t"].values
    defect = _forward_fill(sweep["defect"].transpose(*dims, "seed", "t").values)
    x = np.concatenate([t[:1], t])
    curves = -np.concatenate([np.ones(defect.shape[:-1] + (1,)), defect], -1)
    present = presence(sweep, (*dims, "seed"))  # a refined sweep: points hold different seeds
    present = None if present is None else present[..., None]
    mean = seed_mean(curves, present)
    # Read on the outputs themselves (a cubic cannot span the jump at 0^-); a mean already below
    # the level at t = 0 crosses there, and nothing bounds it from below.
    found = crossing_interval(t, curves[..., 1:], -LEVEL, present=present)
    boolean = mean[..., 1] >= -LEVEL
    found = dataclasses.replace(found, estimate=np.where(boolean, t[0], found.estimate),
                                flag=np.where(boolean, FLAGS.index("reaches_grid_start"), found.flag))
    out = xr.Dataset(coords={c: sweep[c].values for c in dims})
    out.update(interval_variables("t_star", dims, found,
                                  "time where the seed-mean Boolean defect falls below 1/2"))
    for level in BAND:
        out[f"t_{int(level * 100)}"] = (dims, first_crossing(x, mean, -level))
    lost = summary["resolved"].transpose(*dims, "t").values < 1
    out["t_unresolved"] = (dims, np.where(lost.any(-1), t[lost.argmax(-1)], np.nan))
    final = summary.isel(t=-1)
    for var in SERIES:
        out[f"{var}_final"] = final[var].transpose(*dims)
    for var in THEORY:
        out[var] = summary[var].transpose(*dims)
    attrs = {
        "t_90": "time where the seed-mean Boolean defect falls below 0.9",
        "t_10": "time where the seed-mean Boolean defect falls below 0.1",
        "t_unresolved": "first output time at which the scores of some realisation no longer fix P "
                        "(rounding, attention.resolved); later numbers are not to be trusted",
        **{f"{var}_final": f"seed mean of {var} at t_max" for var in SERIES},
    }
    for var, long_name in attrs.items():
        out[var].attrs.update(long_name=long_name, units="1")
    out.attrs.update(summary.attrs, level=LEVEL)
    table = out.to_dataframe().reset_index()
    columns = ["n", "d", "scale", "t_star", *interval_columns("t_star"), "t_90", "t_10", "t_unresolved",
               *(f"{v}_final" for v in SERIES),
               *THEORY]
    return table[columns], out
