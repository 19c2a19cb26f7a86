"""mixture_training: the reduction of a sweep, statistics over seeds, the theory on the same coordinates,
and the boundary."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import xarray as xr

from attnsweep.experiments.mixture_training import MixtureTraining
from attnsweep.experiments.mixture_training import theory as closed_forms
from attnsweep.experiments.mixture_training.resources import SERIES
from attnsweep.reduce.crossing import first_crossing, held_means, interval_variables, resampled_means
from attnsweep.reduce.inversion import crossing_interval
from attnsweep.reduce.seeds import presence, seed_statistics

AVERAGED = (*SERIES, "s_same", "s_cross", "loss_opposing", "align", "score")


LEVEL = math.log(2) / 2  # the loss floor while attention is uniform (docs/papers/002.md §6): t* is its crossing


RESAMPLES = 1000  # bootstrap draws of the seeds (attnsweep.reduce.crossing's default)


def reduce(sweep: xr.Dataset) -> xr.Dataset:
    """Seed means and standard errors; the first seed's attention maps; flow time t = lr step;
    the stage-1 closed form and the loss floor on the same coordinates (``theory``)."""
    k = sweep.sizes["seed"]
    out = seed_statistics(sweep, AVERAGED)
    for var in ("attention", "stage_steps"):
        out[var] = sweep[var].isel(seed=0, drop=True)
        out[var].attrs.update(sweep[var].attrs, cell_methods="first seed")
    out = out.compute()
    out = out.assign_coords(t=sweep["lr"] * sweep["step"])
    out["t"].attrs.update(long_name="flow time lr x step", units="1")
    out.attrs.update(sweep.attrs)
    out.attrs.update(seeds=k, loss_floor=LEVEL)
    out.update(theory(out))
    return out


def theory(summary: xr.Dataset) -> xr.Dataset:
    """Stage 1 at infinite width, L = 3 (docs/papers/002.md §6), on (K, b, lr, step): w_+^T v_k, w^T c_k and
    the population and easy losses while attention is uniform; valid in stage 1 of three_stage and
    early in joint training, on the synthetic data only (none for source digits)."""
    if summary.attrs["source"] == "digits":
        return xr.Dataset()

    K, b, t = xr.broadcast(summary["K"].astype(float), summary["b"], summary["t"])
    fields = {name: np.empty(K.shape) for name in ("a", "c", "loss_pop", "loss_easy")}
    for index in np.ndindex(*K.shape[:-1]):
        curve = closed_forms.stage1(t.values[index], int(K.values[index][0]), float(b.values[index][0]))
        for name, array in fields.items():
            array[index] = curve[name]
    out = xr.Dataset(coords=K.coords)
    names = {"a": "w_+^T v_k", "c": "w_+^T c_k", "loss_pop": "population loss", "loss_easy": "easy loss"}
    for name, text in names.items():
        out[f"stage1_{name}"] = (K.dims, fields[name], {"long_name": f"{text} of the stage-1 closed form "
                                                                    "(infinite width, L = 3, "
                                                                    "docs/papers/002.md §6)",
                                                        "units": "1"})
    return out


def boundary(sweep: xr.Dataset, summary: xr.Dataset) -> tuple[pd.DataFrame, xr.Dataset]:
    """t*: the first flow time at which the seed-mean hard loss falls below (1/2) log 2, linearly
    interpolated between recorded steps, with a confidence interval over seeds (docs/statistics.md)
    (docs/papers/002.md §8; not "hard accuracy crosses 1/2"); a second estimate where the seed-mean s_same of the
    + head reaches 1; and per (L, omega, m, lr, b, mode, engine) the fit t* = B (K - K_0) with
    bootstrap intervals (``closed_forms.bootstrap_fit``)."""
    dims = ("K", "L", "omega", "m", "lr", "b", "mode", "engine")
    step = sweep["step"].values.astype(float)
    hard = sweep["loss_hard"].transpose(*dims, "seed", "step").values
    lr = sweep["lr"].values[None, None, None, None, :, None, None, None]
    held = presence(sweep, (*MixtureTraining().axis_names, "seed"))  # a refined sweep: points hold different seeds
    if held is not None:  # (..., seed) -> (..., mode, engine, seed, step)
        held = np.broadcast_to(held[..., None, None, :, None], hard.shape[:-1] + (1,))
    found = crossing_interval(step, -hard, -LEVEL, present=held)
    est = found.estimate * lr
    same = summary["s_same"].sel(head=0).transpose(*dims, "step").values
    out = xr.Dataset(coords={c: sweep[c].values for c in dims})
    out.update(interval_variables("t_star", dims, found, "first flow time with seed-mean hard loss < (1/2) log 2",
                                  scale=lr))
    out["t_score"] = (dims, first_crossing(step, same, 1.0) * lr)
    if held is None:
        boot = first_crossing(step, -resampled_means(hard), -LEVEL) * lr[..., None]  # (..., R)
    else:  # each row resampled over its own seeds
        boot = np.full((*hard.shape[:-2], RESAMPLES), np.nan)
        for row in np.ndindex(hard.shape[:-2]):
            if held[row].any():
                means, drawn = held_means(hard[row], np.broadcast_to(held[row], hard[row].shape), RESAMPLES)
                boot[row] = first_crossing(step, -means, -LEVEL, drawn)
        boot = boot * lr[..., None]
    fit_dims = dims[1:]
    fits = np.full((*hard.shape[1:-2], 6), np.nan)
    Ks = sweep["K"].values.astype(float)
    if len(Ks) > 1:
        for index in np.ndindex(*fits.shape[:-1]):
            fits[index] = closed_forms.bootstrap_fit(Ks, est[(slice(None), *index)], boot[(slice(None), *index)])
    fitted = {"B": "slope B", "K0": "intercept K_0"}
    for i, name in enumerate(("B", "K0", "B_low", "B_high", "K0_low", "K0_high")):
        symbol, _, end = name.partition("_")
        what = f"{fitted[symbol]} of the fit t* = B (K - K_0) over K"
        quantile = {"low": "2.5%", "high": "97.5%"}.get(end)
        long_name = f"{quantile} bootstrap-over-seeds quantile of the {what}" if quantile else what
        out[f"fit_{name}"] = (fit_dims, fits[..., i], {"long_name": long_name, "units": "1"})
    out["t_score"].attrs.update(long_name="first flow time with seed-mean s_same (+ head) >= 1", units="1")
    out.attrs.update(summary.attrs)
    table = out.to_dataframe().reset_index()
    table["mode"] = [summary.attrs["mode_names"].split()[i] for i in table["mode"]]
    table["engine"] = [summary.attrs["engine_names"].split()[i] for i in table["engine"]]
    return table, out
