"""Run stores of the earlier layout: zarr v3 directory stores.

Earlier versions wrote a run store (``runs/<job>.zarr``) as a directory, a ``zarr.json`` per
node and a file per chunk (25 to 2000 files a job), where a run store is now one file
(:mod:`attnsweep.stores.io`). Results trees keep months of such jobs, so they are still read in
place: the planner reuses them, ``collect`` reads them through zarr, ``attnsweep status`` and
``attnsweep verify`` check them, and ``attnsweep pack`` rewrites them as one file each
(:func:`pack`). The aggregates are directory stores by design; they are not this module's.

The rest of the package knows one-file run stores only and turns to this module at one marked
line each (``git grep -n legacy src``: :mod:`~attnsweep.stores.probe`, :mod:`~attnsweep.stores.verify`,
:mod:`~attnsweep.stores.reader`, :mod:`~attnsweep.cli`). Deleting this module, those lines and
``attnsweep pack`` drops the layout. The planner imports this module: zarr and xarray are
imported where they are used.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

    from attnsweep.jobspec import JobSpec
    from attnsweep.stores.contents import Variables


def complete(path: str | os.PathLike) -> bool:
    """Whether a directory run store stands at ``path``: its root ``zarr.json`` (a final path
    only ever holds a whole store)."""
    return os.path.isfile(os.path.join(path, "zarr.json"))


def root_json(path: str | os.PathLike) -> bytes:
    """The root ``zarr.json`` of the directory run store at ``path``."""
    return Path(path, "zarr.json").read_bytes()


def root_or_problem(path: str | os.PathLike) -> tuple[bytes | None, str | None]:
    """The root ``zarr.json`` of the directory run store at ``path``, or what keeps it from reading."""
    if not complete(path):
        return None, "a directory without zarr.json: not a whole store"
    return root_json(path), None


def run_problem(path: Path, spec: JobSpec, axes: tuple[str, ...]) -> tuple[str | None, Variables]:
    """A directory run store's problem (None if sound) and its data variables: the checks of a
    one-file store but the CRC-32, which it lacks. Every array reads, and every chunk its chunk
    grid implies is present (a chunk of fill values alone, which zarr leaves out, reads as
    missing: quarantined, the job runs again)."""
    import zarr  # heavy

    from attnsweep.stores.contents import contents_problem

    try:
        with warnings.catch_warnings():  # Snakemake's .snakemake_timestamp in a directory output
            warnings.filterwarnings("ignore", message=".*snakemake_timestamp")
            group = zarr.open_group(str(path), mode="r", zarr_format=3, use_consolidated=False)
            arrays = dict(group.arrays())
        metadata = {name: array.metadata.to_dict() for name, array in arrays.items()}
    except Exception as err:  # noqa: BLE001  (any failure of zarr's to read it is the finding)
        return f"does not open as a zarr group ({type(err).__name__}: {str(err)[:120]})", frozenset()

    def read(array: str) -> np.ndarray:
        return arrays[array][...]

    problem, variables = contents_problem(metadata, lambda array, key: Path(path, array, key).is_file(), read,
                                          spec, axes)
    if problem is None:
        for name, array in sorted(arrays.items()):
            try:
                array[...]
            except Exception as err:  # noqa: BLE001  (idem)
                return f"`{name}` does not read ({type(err).__name__}: {str(err)[:120]})", variables
    return problem, variables


def run_stores(results: str | Path) -> list[Path]:
    """The directory run stores of the results tree ``results`` (``EXPERIMENT/runs/...``), sorted."""
    return sorted(p for p in Path(results).glob("*/runs/**/*.zarr") if p.is_dir() and not p.name.startswith("."))


def pack(path: str | Path) -> Path:
    """The directory run store at ``path`` rewritten in place as a one-file store, the same
    values, attrs and the mtime Snakemake saw (its ``.snakemake_timestamp`` if any), so that
    nothing downstream looks out of date. The directory stays until the file is whole."""
    from attnsweep.stores.io import open_store, write_file  # heavy: xarray, zarr

    path = Path(path)
    stamp = path / ".snakemake_timestamp"
    mtime_ns = (stamp if stamp.exists() else path).stat().st_mtime_ns
    write_file(open_store(path).load(), path)
    os.utime(path, ns=(mtime_ns, mtime_ns))
    return path
