"""What a run store must hold for its job, checked on its arrays whatever its layout: every data
variable has ``seed`` as a dimension, every chunk is present (where the layout can lose one), and
every axis of the experiment and ``seed`` is a coordinate equal to the job's grid and seeds
(:mod:`attnsweep.stores.verify` reads the arrays)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from zarr.core.metadata.v3 import ArrayV3Metadata

from attnsweep.grid import SEED, format_value
from attnsweep.jobspec import JobSpec

#: A store's data variables, each with its dimensions.
Variables = frozenset[tuple[str, tuple[str, ...]]]


def contents_problem(metadata: dict[str, dict], exists: Callable[[str, str], bool] | None,
                     read: Callable[[str], np.ndarray], spec: JobSpec,
                     axes: tuple[str, ...]) -> tuple[str | None, Variables]:
    """What is wrong with a run store's arrays (``metadata``: name -> its ``zarr.json``) for the
    job ``spec`` of an experiment with ``axes`` (None if nothing; :func:`_arrays_problem`), and
    its data variables."""
    dims = {name: tuple(meta.get("dimension_names") or ()) for name, meta in metadata.items()}
    shared = {d for names in dims.values() for d in names}
    variables = frozenset((name, dims[name]) for name in metadata if name not in shared)
    try:
        return _arrays_problem(metadata, exists, read, spec, axes), variables
    except Exception as err:  # noqa: BLE001  (metadata zarr refuses, a coordinate that does not decode)
        return f"arrays do not read ({type(err).__name__}: {str(err)[:120]})", variables


def _arrays_problem(metadata: dict[str, dict], exists: Callable[[str, str], bool] | None,
                    read: Callable[[str], np.ndarray], spec: JobSpec, axes: tuple[str, ...]) -> str | None:
    """The checks common to both layouts: dimensions, chunks present (``exists(array, key)``; None
    for an archive, whose entries cannot go missing at rest without its central directory
    changing, and which, as zarr writes, leaves out a chunk of fill values alone), coordinates
    (``read``)."""
    dims = {name: tuple(meta.get("dimension_names") or ()) for name, meta in metadata.items()}
    data = [name for name in metadata if name not in {d for ds in dims.values() for d in ds}]
    seeded = spec.step != "theory"  # a theory store holds its theory axes alone
    wanted = (*axes, SEED) if seeded else axes
    for name in sorted(data):
        if seeded and SEED not in dims[name]:
            return f"`{name}` lacks the dimension seed"
        if exists is None:
            continue
        array = ArrayV3Metadata.from_dict(metadata[name])
        for coords in array.chunk_grid.all_chunk_coords(array.shape):
            key = array.encode_chunk_key(coords)
            if not exists(name, key):
                return f"chunk {key} of `{name}` is missing"
    held = {**spec.grid, SEED: spec.seeds}
    for axis in wanted:
        if axis not in metadata:
            return f"no coordinate `{axis}`"
        values = read(axis)
        if values.shape != (len(held[axis]),) or not np.array_equal(values, np.asarray(held[axis], values.dtype)):
            shown, expected = (", ".join(map(format_value, v)) for v in (values.ravel()[:8], held[axis]))
            return f"coordinate `{axis}` holds [{shown}], expected the job's [{expected}]"
    return None
