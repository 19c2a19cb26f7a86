"""The reduction steps after simulate: collect, reduce, boundary, figure.

``collect`` places each run store into ``sweep.zarr`` by the grid values its job spec names:
no alignment of thousands of datasets (the cost that makes ``open_mfdataset`` slow on many
files, xarray #7697). The stores' variables are read by :func:`attnsweep.stores.reader.read_stores`
(straight from each archive, ~0.2 ms a store); ``workers`` processes read at once (the reading
is Python work that one process does serially).
``reduce`` and ``boundary`` work on the dask-backed ``sweep.zarr``.

Every step refuses a bad input with :class:`~attnsweep.errors.BadStoreError` (one line: the
file, what is wrong, the command that heals the tree): ``collect`` a run store that is no zip
archive, holds another job than its name says or has an entry that fails its CRC-32 as it is
read; the others an aggregate that fails :func:`attnsweep.stores.verify.check_aggregate`, checked
before it is read (a lost chunk would read back as NaN). The aggregates are written with a
checksum on every chunk and every chunk written (:func:`attnsweep.stores.io.write_aggregate`), their
metadata consolidated (:func:`attnsweep.stores.io.consolidate`).
"""

from __future__ import annotations

import json
import multiprocessing
from collections.abc import Sequence
from concurrent.futures import Executor, ProcessPoolExecutor
from contextlib import nullcontext
from pathlib import Path

import dask.array as da
import numpy as np
import pandas as pd
import xarray as xr

from attnsweep import registry
from attnsweep.errors import BadStoreError
from attnsweep.reduce.inversion import FLAGS
from attnsweep.stores.io import (
    aggregate_writes,
    checked,
    consolidate,
    open_store,
    provenance,
    write_aggregate,
    write_with,
)
from attnsweep.stores.probe import quick_problem, root_attrs
from attnsweep.stores.reader import read_raw, read_stores, reading
from attnsweep.stores.verify import check_aggregate

# Attrs that differ between runs of one sweep: collect summarises them instead of copying one.
PER_RUN_ATTRS = ("job", "wall_time_s", "peak_rss_mib", "hostname", "device", "device_name", "torch_threads",
                 "cpu_paths")

#: Stores a reader process is worth (it costs ~1.5 s of imports) when they are read straight from
#: their archives (~0.2 ms a store) or through zarr (~4 ms a store, more with compressed chunks).
STORES_PER_READER = {"archive": 8192, "zarr": 128}


#: The steps the aggregate rules run in the warm server or their own process (attnsweep.run.worker):
#: collect through ``attnsweep collect FILE`` (its list of stores can outgrow a command line), the
#: others through ``attnsweep aggregate STEP ARGS``.
STEPS = ("collect", "reduce", "boundary", "figure")

def collect(runs: Sequence[str | Path], out: str | Path, grid: dict[str, list] | None = None,
            points: Sequence[dict[str, list]] | None = None, slab_mib: int = 256, workers: int = 1,
            stores_per_worker: int | None = None) -> Path:
    """Place the run stores' values into ``sweep.zarr``, every axis a dimension.

    ``grid`` maps each axis (and ``seed``) to the configured values: a store holding more
    (reused from a larger grid) gives only these. Without ``grid``, the union of the stores'
    values. ``points`` are the rectangles (axis -> values) the sweep holds, a refined sweep
    being a union of them (default: the whole ``grid``): a point of them that no store holds is
    an error, and the grid's points that no store holds stay NaN. The boolean ``simulated``
    (axes x seed) says which points hold values. Each variable is one file per slab (a zarr
    shard) in chunks of one fanned-out point (:func:`_sharded`). Where each store goes is read
    from its job spec (root attrs); its data variables are read (:func:`read_stores`) by up to
    ``workers`` processes (one per ``stores_per_worker`` stores, by default
    :data:`STORES_PER_READER` of the first store's kind), a slab of at most ``slab_mib`` along
    one dimension at a time, so memory holds one slab and its stores, never the whole sweep.
    With ``workers`` > 1 the caller's main module is imported again by the readers, as
    multiprocessing does: its work must sit under ``if __name__ == "__main__"``.
    """
    runs = [Path(p) for p in runs]
    attrs = [_job_attrs(p) for p in runs]
    held = [{**job["grid"], "seed": job["seeds"]} for job in (json.loads(a["job"]) for a in attrs)]
    if grid is None:
        grid = {axis: sorted(set().union(*(h[axis] for h in held))) for axis in held[0]}
    with reading(runs[0]):
        first = open_store(runs[0])
    experiment = registry.get(first.attrs["experiment"])
    extents = [experiment.extents(h) for h in held]  # dims whose length follows the grid
    union = experiment.extents(grid)
    coords = {dim: np.asarray(grid[dim] if dim in grid else union[dim]) if dim in grid or dim in union
              else first[dim].values for dim in first.dims}
    index = {dim: pd.Index(values) for dim, values in coords.items()}
    every = {dim: (np.arange(len(values)),) * 2 for dim, values in coords.items()}  # fixed non-axis dims
    placed = {dim: _placements([h[dim] for h in held], index[dim]) if dim in grid else
              _placements([e[dim] for e in extents], index[dim]) if dim in union else [every[dim]] * len(runs)
              for dim in first.dims}
    places = [{dim: placed[dim][i] for dim in first.dims} for i in range(len(runs))]
    slab_dim, size = _slab(first, coords, slab_mib << 20)
    var_dims = {var: first[var].dims for var in first.data_vars}
    fanned = [dim for dim in experiment.default_wildcards if dim not in ("seed", slab_dim)]
    encoding = {var: _sharded(first[var], coords, slab_dim, size, fanned) for var in first.data_vars}
    template = xr.Dataset(
        {var: (first[var].dims, da.full(_shape(first[var], coords), np.nan, dtype=first[var].dtype,
                                        chunks=_shape(first[var], coords, {slab_dim: size})), first[var].attrs)
         for var in first.data_vars},
        coords={dim: (dim, values, first[dim].attrs) for dim, values in coords.items()},
    )
    order = [dim for dim in (*experiment.axis_names, "seed") if dim in grid]
    template["simulated"] = (order, da.zeros([len(coords[dim]) for dim in order], dtype=bool, chunks=-1), {
        "long_name": "whether the point holds simulated values (a refined sweep is a union of blocks)",
        "units": "1"})
    template.attrs.update({k: v for k, v in first.attrs.items() if k not in PER_RUN_ATTRS})
    template.attrs.update(
        runs=len(runs),
        run_wall_time_s_total=round(sum(float(a.get("wall_time_s", 0.0)) for a in attrs), 3),
        run_devices=json.dumps(sorted({a.get("device", "?") for a in attrs})),
        **provenance(step="collect"),
    )
    filled = np.zeros([len(grid[dim]) for dim in grid], dtype=bool)
    if stores_per_worker is None:
        with reading(runs[0]):
            raw = read_raw(runs[0], list(first.data_vars)) is not None
        stores_per_worker = STORES_PER_READER["archive" if raw else "zarr"]
    workers = max(1, min(workers, len(runs) // stores_per_worker))

    def write(tmp: Path, pool: Executor | None) -> None:
        template.to_zarr(tmp, mode="w", zarr_format=3, consolidated=False, compute=False,
                         encoding=checked(template, encoding))
        for lo in range(0, len(coords[slab_dim]), size):
            hi = min(lo + size, len(coords[slab_dim]))
            slab = {var: np.full(_shape(first[var], coords, {slab_dim: hi - lo}), np.nan, first[var].dtype)
                    for var in first.data_vars}
            parts = []
            for path, place in zip(runs, places):
                src, dst = place[slab_dim]
                inside = (dst >= lo) & (dst < hi)
                if inside.any():
                    parts.append((path, {**place, slab_dim: (src[inside], dst[inside] - lo)}))
            for (_, part), values in zip(parts, _read([p for p, _ in parts], list(slab), pool, 4 * workers)):
                at = {dims: (np.ix_(*(part[d][1] for d in dims)), np.ix_(*(part[d][0] for d in dims)))
                      for dims in set(var_dims.values())}
                for var, array in slab.items():
                    dst, src = at[var_dims[var]]
                    array[dst] = values[var][src]
                filled[np.ix_(*(part[d][1] + (lo if d == slab_dim else 0) for d in grid))] = True
            region = xr.Dataset({var: (first[var].dims, array) for var, array in slab.items()})
            region.to_zarr(tmp, region={slab_dim: slice(lo, hi)}, zarr_format=3, consolidated=False)
        wanted = _wanted(points, index, list(grid))
        missing = wanted & ~filled
        if missing.any():
            where = np.argwhere(missing)[0]
            point = ", ".join(f"{dim} = {coords[dim][i]}" for dim, i in zip(grid, where))
            raise ValueError(f"{missing.sum()} grid points are in no run store, e.g. {point}")
        # Every placed value counts, wanted or not: a reused store may hold more of the union's
        # points than the rectangles ask for, and its values are real (same identity, same numbers).
        simulated = xr.DataArray(filled, dims=list(grid)).transpose(*order)
        xr.Dataset({"simulated": simulated}).to_zarr(tmp, region={dim: slice(None) for dim in order},
                                                     zarr_format=3, consolidated=False)
        consolidate(tmp)

    with _readers(workers) as pool, aggregate_writes():
        return write_with(lambda tmp: write(tmp, pool), out)


def _job_attrs(path: Path) -> dict:
    """The root attrs of a run store; :class:`BadStoreError` where they do not read or name
    another job than its file name does (:func:`attnsweep.stores.probe.quick_problem`)."""
    problem = quick_problem(path)
    if problem:
        raise BadStoreError(str(path), problem)
    return root_attrs(path)


def _wanted(points: Sequence[dict[str, list]] | None, index: dict[str, pd.Index], dims: list[str]) -> np.ndarray:
    """Boolean mask over ``dims`` of the union of the rectangles ``points`` (all of it for None)."""
    shape = [len(index[dim]) for dim in dims]
    if points is None:
        return np.ones(shape, dtype=bool)
    mask = np.zeros(shape, dtype=bool)
    for rect in points:
        at = [index[dim].get_indexer(rect[dim]) for dim in dims]
        mask[np.ix_(*(a[a >= 0] for a in at))] = True
    return mask


def _readers(workers: int) -> ProcessPoolExecutor | nullcontext:
    """``workers`` reader processes, forked from a server that has imported this module (not
    from this process, whose zarr I/O thread is running); none for one worker."""
    if workers <= 1:
        return nullcontext()
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([__name__])
    return ProcessPoolExecutor(workers, mp_context=context)


def _read(stores: list[Path], variables: list[str], pool: Executor | None,
          parts: int) -> list[dict[str, np.ndarray]]:
    """Every variable of every store, in order: in this process, or in ``parts`` batches over ``pool``."""
    if pool is None or len(stores) < 2:
        return read_stores(stores, variables)
    batches = [list(b) for b in np.array_split(np.array(stores, dtype=object), parts) if len(b)]
    return [values for batch in pool.map(read_stores, batches, [variables] * len(batches)) for values in batch]


def _shape(var: xr.DataArray, coords: dict[str, np.ndarray], override: dict[str, int] | None = None) -> tuple:
    override = override or {}
    return tuple(override.get(dim, len(coords[dim])) for dim in var.dims)


def _sharded(var: xr.DataArray, coords: dict[str, np.ndarray], slab_dim: str, size: int,
             fanned: list[str]) -> dict[str, tuple]:
    """Zarr encoding of a sweep variable: one shard (one file) per slab that collect writes, in
    chunks of one value along the fanned-out axes ``fanned`` (one (n, d) point of a figure, all
    its seeds and batched values), so that selecting a point reads its chunks alone."""
    shard = _shape(var, coords, {slab_dim: size})
    return {"shards": shard, "chunks": tuple(1 if dim in fanned else s for dim, s in zip(var.dims, shard))}


def _placements(values: list[list], index: pd.Index) -> list[tuple[np.ndarray, np.ndarray]]:
    """:func:`_placement` of each of ``values``, computed once per distinct list (a sweep's stores
    repeat a few: ~60 us of pandas each)."""
    distinct = {key: _placement(list(key), index) for key in {tuple(v) for v in values}}
    return [distinct[tuple(v)] for v in values]


def _placement(values: list, index: pd.Index) -> tuple[np.ndarray, np.ndarray]:
    """Positions in a store of its values that are on the grid, and their positions on the grid."""
    at = index.get_indexer(values)
    src = np.flatnonzero(at >= 0)
    return src, at[src]


def _slab(first: xr.Dataset, coords: dict[str, np.ndarray], budget: int) -> tuple[str, int]:
    """The dimension the output is written along, and how many of its values fit in ``budget``."""
    shared = [dim for dim in coords if all(dim in first[var].dims for var in first.data_vars)]
    dim = max(shared, key=lambda d: len(coords[d]))
    per_value = sum(
        first[var].dtype.itemsize * int(np.prod([len(coords[d]) for d in first[var].dims if d != dim]))
        for var in first.data_vars
    )
    return dim, max(1, min(len(coords[dim]), budget // max(per_value, 1)))


def require_sound(*paths: str | Path) -> None:
    """:class:`BadStoreError` for the first of the aggregates ``paths`` that is bad
    (:func:`attnsweep.stores.verify.check_aggregate`): a lost chunk would read back as NaN."""
    for path in paths:
        for finding in check_aggregate(path):
            if finding.bad:
                raise BadStoreError(str(path), finding.problem)


def reduce(sweep_path: str | Path, out: str | Path, theory: Sequence[str | Path] = ()) -> Path:
    """Seed statistics and theory: ``summary.zarr``, each variable one chunk (one file): the
    figures and ``boundary`` load it whole. The ``theory`` stores (one per point of the
    experiment's theory axes, :func:`theory_dataset`) join the sweep first; ValueError unless they
    hold every value of the sweep along each theory axis (none, for an experiment without theory,
    takes no store)."""
    require_sound(sweep_path)
    sweep = open_store(sweep_path, chunks={})
    experiment = registry.get(sweep.attrs["experiment"])
    axes = experiment.theory_axes
    if theory and not axes:
        raise ValueError(f"experiment {experiment.name!r} has no theory axes, yet {len(theory)} theory "
                         "store(s) were given")
    if axes:
        held = theory_dataset(theory)
        for axis in axes:
            have = set(held[axis].values.tolist()) if axis in held.dims else set()
            lacking = [v for v in sweep[axis].values.tolist() if v not in have]
            if lacking:
                raise ValueError(f"experiment {experiment.name!r}: no theory store holds {axis} = "
                                 f"{', '.join(map(str, lacking))} (one theory job per point of "
                                 f"{', '.join(axes)})")
        sweep = xr.merge([sweep, held], join="left", combine_attrs="override")
    summary = experiment.reduce(sweep).chunk(-1)
    summary.attrs.update(provenance(step="reduce"))
    encoding = {name: {"chunks": var.shape} for name, var in summary.variables.items()}
    return write_aggregate(summary, out, encoding=encoding)


def theory_dataset(paths: Sequence[str | Path]) -> xr.Dataset:
    """The theory stores ``paths`` as one Dataset: each holds its own point of the theory axes,
    so an outer merge places them side by side, NaN where their own dimensions are shorter than
    another's; :class:`BadStoreError` for a store that does not read or holds another job than
    its name says."""
    parts = []
    for path in paths:
        problem = quick_problem(path)
        if problem:
            raise BadStoreError(str(path), problem)
        with reading(Path(path)):
            parts.append(open_store(path).load())
    return xr.merge(parts, join="outer", compat="no_conflicts", combine_attrs="override")


def boundary(sweep_path: str | Path, summary_path: str | Path, csv: str | Path, out: str | Path,
             options: dict[str, object] | None = None) -> None:
    """Phase boundaries: ``boundary.csv`` and ``boundary.zarr``. ``options``: the experiment's
    :meth:`~attnsweep.contract.Experiment.boundary_options`, set in the sweep's attrs for its
    ``boundary`` to read and kept in ``boundary.zarr``'s."""
    require_sound(sweep_path, summary_path)
    sweep = open_store(sweep_path, chunks={})  # the experiment loads the variables it needs
    sweep.attrs.update(options or {})
    summary = open_store(summary_path).load()
    experiment = registry.get(sweep.attrs["experiment"])
    table, found = experiment.boundary(sweep, summary)
    found.attrs.update(options or {}, **provenance(step="boundary"))
    table = readable(table, found)
    write_aggregate(found, out)
    Path(csv).parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(csv).with_name(f".{Path(csv).name}.tmp")
    table.to_csv(tmp, index=False, float_format="%.6g")
    tmp.replace(csv)


def readable(table: pd.DataFrame, found: xr.Dataset) -> pd.DataFrame:
    """``boundary.csv`` as a reader wants it: each interval's flag (``<name>_flag``) by its
    meaning, and the intervals' method in a column ``interval_method``."""
    table = table.copy()
    for column in table.columns:
        if column.endswith("_flag"):
            table[column] = table[column].map(dict(enumerate(FLAGS)))
    methods = {v.attrs["interval_method"] for v in found.data_vars.values() if "interval_method" in v.attrs}
    if methods:
        table["interval_method"] = "; ".join(sorted(methods))
    return table


def figure(draw: str, params: dict, summary_path: str | Path, boundary_path: str | Path, png: str | Path,
           pdf: str | Path) -> None:
    """Draw one figure to PNG and PDF: the experiment's figure function ``draw`` with ``params``
    (a :class:`~attnsweep.contract.FigureSpec`'s)."""
    require_sound(summary_path, boundary_path)
    summary = open_store(summary_path).load()
    found = open_store(boundary_path).load()
    experiment = registry.get(summary.attrs["experiment"])
    fig = experiment.draw(draw, params, summary, found)
    for path in (png, pdf):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=150)
        # The layout the PNG's draw computed holds for the PDF (same size in inches): keep it, and
        # spare the second draw a second constrained-layout solve (a quarter of a figure's saving).
        fig.set_layout_engine("none")
