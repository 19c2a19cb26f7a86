"""Zarr v3 stores that appear only when complete, with provenance attrs.

A store is written to a hidden temporary sibling (``.name.zarr.tmp-<pid>``) and renamed into
place: ``rename`` within one directory is atomic on POSIX filesystems, so a killed job leaves
at most a temporary sibling, never a final path that looks finished.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import platform
import shutil
import subprocess
import warnings
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

import attnsweep


@cache
def git_commit() -> str:
    """Commit of the source tree the package runs from (``unknown`` outside git)."""
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(
            ["git", "-C", str(here), "describe", "--always", "--dirty", "--abbrev=40"],
            capture_output=True, text=True, timeout=10, check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() or "unknown"


def provenance(**extra: Any) -> dict[str, Any]:
    """Versions and host, plus ``extra``; values are JSON scalars or JSON text."""
    attrs = {
        "attnsweep_version": attnsweep.__version__,
        "git_commit": git_commit(),
        "torch_version": importlib.metadata.version("torch"),  # the reductions never import torch
        "numpy_version": np.__version__,
        "xarray_version": xr.__version__,
        "python_version": platform.python_version(),
        "hostname": platform.node(),
    }
    for key, value in extra.items():
        attrs[key] = value if isinstance(value, (str, int, float, bool)) else json.dumps(value)
    return attrs


def write_atomic(ds: xr.Dataset, path: str | Path) -> Path:
    """Write ``ds`` as a zarr v3 store at ``path`` via a temporary sibling and a rename."""
    return write_with(lambda tmp: ds.to_zarr(tmp, mode="w", zarr_format=3, consolidated=False), path)


class StoreWriteError(OSError):
    """A store could not be written: disk full, read-only or missing directory, no permission.

    ``str()`` is one line, ``cannot write PATH: REASON`` (e.g. ``No space left on device``);
    ``errno`` is the underlying error's.
    """

    def __init__(self, path: str | Path, err: OSError) -> None:
        reason = err.strerror or str(err)
        super().__init__(err.errno, f"cannot write {path}: {reason}")
        self.path = str(path)

    def __str__(self) -> str:
        return str(self.strerror)


def write_with(writer: Callable[[Path], Any], path: str | Path) -> Path:
    """Let ``writer`` fill a temporary sibling of ``path``, then rename it into place.

    On any error the temporary sibling is removed (which also frees a full disk) and the final
    path is left as it was; an ``OSError`` is raised again as :class:`StoreWriteError`.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if tmp.exists():
            shutil.rmtree(tmp)
        writer(tmp)
        if path.exists():
            shutil.rmtree(path)
        os.rename(tmp, path)
    except BaseException as err:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(err, OSError) and not isinstance(err, StoreWriteError):
            raise StoreWriteError(path, err) from err
        raise
    return path


def open_store(path: str | Path, chunks: Any = None) -> xr.Dataset:
    """Open a store written by :func:`write_atomic` (lazily with dask when ``chunks`` is given)."""
    with warnings.catch_warnings():
        # Snakemake marks directory outputs with a .snakemake_timestamp file, which zarr notes.
        warnings.filterwarnings("ignore", message=".*snakemake_timestamp")
        return xr.open_zarr(path, zarr_format=3, consolidated=False, chunks=chunks)
