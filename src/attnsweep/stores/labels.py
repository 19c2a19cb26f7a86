"""CF attributes of a job's Dataset, set the same way by every experiment's ``simulate``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from attnsweep.grid import Axis

if TYPE_CHECKING:  # kept out of the planner's imports
    import xarray as xr

#: ``seed`` of a job whose systems are one realisation each.
SEED = {"long_name": "random seed: one realisation"}
#: ``t`` of an integrated flow recorded at multiples of its step.
TIME = {"long_name": "time, multiples of dt", "units": "1"}


def label(result: xr.Dataset, axes: Iterable[Axis], coords: Mapping[str, Mapping[str, object]] = (),
          variables: Mapping[str, Mapping[str, object]] | None = None) -> xr.Dataset:
    """``result`` with each grid axis's ``long_name`` and ``units`` (from its :class:`Axis`), the
    attrs of each coordinate in ``coords`` and, where ``variables`` is given, of each data variable
    (a variable it lacks is an error: every output is described). In place; returns ``result``."""
    for axis in axes:
        result[axis.name].attrs.update(long_name=axis.long_name, units=axis.units)
    for name, attrs in dict(coords).items():
        result[name].attrs.update(attrs)
    if variables is not None:
        for var in result.data_vars:
            result[var].attrs.update(variables[var])
    return result
