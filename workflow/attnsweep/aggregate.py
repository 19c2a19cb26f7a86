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

import dask.array as da
import numpy as np
import pandas as pd
import xarray as xr

from attnsweep import registry
from attnsweep.store import open_store, provenance, write_atomic, write_with

# Attrs that differ between runs of one sweep: collect summarises them instead of copying one.
PER_RUN_ATTRS = ("job", "wall_time_s", "peak_rss_mib", "hostname", "device", "device_name", "torch_threads")


def collect(runs: Sequence[str | Path], out: str | Path, grid: dict[str, list] | None = None,
            slab_mib: int = 256) -> Path:
    """Place the run stores' values into ``sweep.zarr``, every axis a dimension.

    ``grid`` maps each axis (and ``seed``) to the configured values: a store holding more
    (reused from a larger grid) gives only these, and a grid point that no store holds is an
    error. Without ``grid``, the union of the stores' coordinates. The output is written in
    slabs of at most ``slab_mib`` along one dimension: memory holds one slab and one store,
    never the whole sweep.
    """
    stores = [open_store(p) for p in runs]
    first = stores[0]
    if grid is None:
        grid = {dim: np.unique(np.concatenate([ds[dim].values for ds in stores])) for dim in _axes(first)}
    coords = {dim: np.asarray(grid[dim]) if dim in grid else first[dim].values for dim in first.dims}
    index = {dim: pd.Index(values) for dim, values in coords.items()}
    slab_dim, size = _slab(first, coords, slab_mib << 20)
    places = [_placement(ds, index) for ds in stores]
    template = xr.Dataset(
        {var: (first[var].dims, da.full(_shape(first[var], coords), np.nan, dtype=first[var].dtype,
                                        chunks=_shape(first[var], coords, {slab_dim: size})), first[var].attrs)
         for var in first.data_vars},
        coords={dim: (dim, values, first[dim].attrs) for dim, values in coords.items()},
    )
    template.attrs.update({k: v for k, v in first.attrs.items() if k not in PER_RUN_ATTRS})
    template.attrs.update(
        runs=len(stores),
        run_wall_time_s_total=round(sum(float(ds.attrs.get("wall_time_s", 0.0)) for ds in stores), 3),
        run_devices=json.dumps(sorted({ds.attrs.get("device", "?") for ds in stores})),
        **provenance(step="collect"),
    )
    filled = np.zeros([len(grid[dim]) for dim in grid], dtype=bool)

    def write(tmp: Path) -> None:
        template.to_zarr(tmp, mode="w", zarr_format=3, consolidated=False, compute=False)
        for lo in range(0, len(coords[slab_dim]), size):
            hi = min(lo + size, len(coords[slab_dim]))
            slab = {var: np.full(_shape(first[var], coords, {slab_dim: hi - lo}), np.nan, first[var].dtype)
                    for var in first.data_vars}
            for ds, place in zip(stores, places):
                src, dst = place[slab_dim]
                inside = (dst >= lo) & (dst < hi)
                if not inside.any():
                    continue
                part = {**place, slab_dim: (src[inside], dst[inside] - lo)}
                values = ds.isel({dim: s for dim, (s, _) in part.items()}).load()
                for var, array in slab.items():
                    array[np.ix_(*(part[d][1] for d in ds[var].dims))] = values[var].values
                filled[np.ix_(*(place[d][1] if d != slab_dim else dst[inside] for d in grid))] = True
            region = xr.Dataset({var: (first[var].dims, array) for var, array in slab.items()})
            region.to_zarr(tmp, region={slab_dim: slice(lo, hi)}, zarr_format=3, consolidated=False)
        if not filled.all():
            where = np.argwhere(~filled)[0]
            point = ", ".join(f"{dim} = {coords[dim][i]}" for dim, i in zip(grid, where))
            raise ValueError(f"{(~filled).sum()} grid points are in no run store, e.g. {point}")

    return write_with(write, out)


def _axes(ds: xr.Dataset) -> list[str]:
    """The grid axes of a run store: the axes of its job spec, and seed."""
    return [*json.loads(ds.attrs["job"])["grid"], "seed"]


def _shape(var: xr.DataArray, coords: dict[str, np.ndarray], override: dict[str, int] | None = None) -> tuple:
    override = override or {}
    return tuple(override.get(dim, len(coords[dim])) for dim in var.dims)


def _placement(ds: xr.Dataset, index: dict[str, pd.Index]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per dimension, the store's positions whose values are on the grid and their grid positions."""
    place = {}
    for dim in ds.dims:
        at = index[dim].get_indexer(ds[dim].values)
        src = np.flatnonzero(at >= 0)
        place[dim] = (src, at[src])
    return place


def _slab(first: xr.Dataset, coords: dict[str, np.ndarray], budget: int) -> tuple[str, int]:
    """The dimension the output is written along, and how many of its values fit in ``budget``."""
    shared = [dim for dim in coords if all(dim in first[var].dims for var in first.data_vars)]
    dim = max(shared, key=lambda d: len(coords[d]))
    per_value = sum(
        first[var].dtype.itemsize * int(np.prod([len(coords[d]) for d in first[var].dims if d != dim]))
        for var in first.data_vars
    )
    return dim, max(1, min(len(coords[dim]), budget // max(per_value, 1)))


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
