"""The reduction steps after simulate: collect, reduce, boundary, figure.

``collect`` places each run store into its block of one array per variable, allocated once
over the full grid: one read per store and no alignment of thousands of datasets (the cost
that makes ``open_mfdataset`` slow on many files, xarray #7697). ``reduce`` and ``boundary``
work on the dask-backed ``sweep.zarr``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from attnsweep import registry
from attnsweep.store import open_store, provenance, write_atomic

# Attrs that differ between runs of one sweep: collect summarises them instead of copying one.
PER_RUN_ATTRS = ("job", "wall_time_s", "peak_rss_mib", "hostname", "device", "device_name", "torch_threads")


def collect(runs: Sequence[str | Path], out: str | Path) -> Path:
    """Combine run stores into ``sweep.zarr`` with every axis a dimension."""
    stores = [open_store(p) for p in runs]
    first = stores[0]
    coords = {
        dim: np.unique(np.concatenate([ds[dim].values for ds in stores])) for dim in first.dims
    }
    data = {
        var: np.full(tuple(len(coords[d]) for d in first[var].dims), np.nan, dtype=first[var].dtype)
        for var in first.data_vars
    }
    index = {dim: pd.Index(values) for dim, values in coords.items()}
    wall = 0.0
    devices = set()
    for ds in stores:
        ds = ds.load()
        where = {dim: index[dim].get_indexer(ds[dim].values) for dim in ds.dims}
        for var, array in data.items():
            array[np.ix_(*(where[d] for d in ds[var].dims))] = ds[var].values
        wall += float(ds.attrs.get("wall_time_s", 0.0))
        devices.add(ds.attrs.get("device", "?"))
    sweep = xr.Dataset(
        {var: (first[var].dims, array, first[var].attrs) for var, array in data.items()},
        coords={dim: (dim, values, first[dim].attrs) for dim, values in coords.items()},
    )
    shared = {k: v for k, v in first.attrs.items() if k not in PER_RUN_ATTRS}
    sweep.attrs.update(shared)
    sweep.attrs.update(runs=len(stores), run_wall_time_s_total=round(wall, 3),
                       run_devices=json.dumps(sorted(devices)))
    sweep.attrs.update(provenance(step="collect"))
    return write_atomic(sweep, out)


def reduce(sweep_path: str | Path, out: str | Path) -> Path:
    """Seed statistics and theory: ``summary.zarr``."""
    sweep = open_store(sweep_path, chunks={})
    experiment = registry.get(sweep.attrs["experiment"])
    summary = experiment.reduce(sweep)
    summary.attrs.update(provenance(step="reduce"))
    return write_atomic(summary, out)


def boundary(sweep_path: str | Path, summary_path: str | Path, csv: str | Path, out: str | Path) -> None:
    """Phase boundaries: ``boundary.csv`` and ``boundary.zarr``."""
    sweep = open_store(sweep_path, chunks={}).load()
    summary = open_store(summary_path).load()
    experiment = registry.get(sweep.attrs["experiment"])
    table, bnd = experiment.boundary(sweep, summary)
    bnd.attrs.update(provenance(step="boundary"))
    write_atomic(bnd, out)
    Path(csv).parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(csv).with_name(f".{Path(csv).name}.tmp")
    table.to_csv(tmp, index=False, float_format="%.6g")
    tmp.replace(csv)


def figure(name: str, summary_path: str | Path, boundary_path: str | Path, png: str | Path,
           pdf: str | Path) -> None:
    """Draw one figure to PNG and PDF."""
    summary = open_store(summary_path).load()
    bnd = open_store(boundary_path).load()
    experiment = registry.get(summary.attrs["experiment"])
    fig = experiment.draw(name, summary, bnd)
    for path in (png, pdf):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=150)
