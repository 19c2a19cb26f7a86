"""Statistics over seeds of a sweep whose points may hold different seeds (a refined sweep).

``sweep.zarr`` marks the (point, seed) pairs simulated in its boolean ``simulated``; values of
the others are NaN. On a product grid every pair is simulated and these reduce to the plain
mean and standard error.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import xarray as xr


def presence(sweep: xr.Dataset, dims: tuple[str, ...]) -> np.ndarray | None:
    """``simulated`` as a boolean array in ``dims`` order, None where every pair is simulated
    (or the sweep predates the mask)."""
    if "simulated" not in sweep:
        return None
    mask = sweep["simulated"].transpose(*dims).values.astype(bool)
    return None if mask.all() else mask


def standard_error(da: xr.DataArray, sweep: xr.Dataset) -> xr.DataArray:
    """Standard error of the seed mean of ``da`` at each point: std (ddof 1) over its seeds
    divided by the square root of their count; NaN where a point holds fewer than two seeds."""
    k = sweep.sizes["seed"]
    mask = sweep.get("simulated")
    if mask is None or bool(mask.all()):
        return da.std("seed", ddof=1) / np.sqrt(k) if k > 1 else xr.full_like(da.isel(seed=0, drop=True), np.nan)
    count = mask.sum("seed")
    return (da.std("seed", ddof=1) / np.sqrt(count).astype(da.dtype)).where(count > 1)


def seed_statistics(sweep: xr.Dataset, names: Iterable[str], se: bool = True,
                    cell_methods: str = "seed: mean") -> xr.Dataset:
    """The seed mean of each variable ``names`` of ``sweep``, with its attrs and ``cell_methods``,
    and with ``se`` its standard error ``<name>_se`` (:func:`standard_error`, in its units)."""
    out = xr.Dataset()
    for name in names:
        values = sweep[name]
        out[name] = values.mean("seed")
        out[name].attrs.update(values.attrs, cell_methods=cell_methods)
        if se:
            out[f"{name}_se"] = standard_error(values, sweep)
            out[f"{name}_se"].attrs.update(long_name=f"standard error of the seed mean of {name}",
                                           units=values.attrs.get("units", "1"))
    return out
