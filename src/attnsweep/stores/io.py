"""Zarr v3 stores that appear only when complete, with provenance attrs.

Two layouts, both opened by :func:`open_store`:

- A run store (one simulate job, ``runs/<job>.zarr``) is one file: a zip archive of a zarr v3
  store, its entries stored as they are (zarr compresses the chunks itself), every array one
  chunk up to :data:`WHOLE_CHUNK_BYTES`. Shared filesystems count files and metadata operations,
  not bytes: a directory store of a job is 25 to 2000 files, the archive one. Outside attnsweep:
  ``xr.open_zarr(zarr.storage.ZipStore(path, mode="r"))``. Run stores written as directories
  by earlier versions are read the same way, in place (:mod:`attnsweep.stores.legacy`).
- The aggregates (``sweep.zarr``, ``summary.zarr``, ``boundary.zarr``) are directory stores:
  they are written region by region and read lazily by dask, which a zip cannot do in parallel.
  Every chunk of theirs carries zarr's own ``crc32c`` checksum (:data:`CHECKED`) and every chunk
  is written, fill value or not (:func:`aggregate_writes`), so that ``attnsweep verify`` can
  tell a chunk lost or changed at rest (:mod:`attnsweep.stores.verify`). Their arrays' metadata is
  also gathered into the root ``zarr.json`` (:func:`consolidate`), so that a plain
  ``xr.open_zarr(path)`` reads it from one document.

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
import zipfile
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr
import zarr
from zarr.codecs import Crc32cCodec, ZstdCodec

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


#: A run store's arrays up to this size (uncompressed) are one chunk each; larger ones keep
#: zarr's default chunks.
WHOLE_CHUNK_BYTES = 256 << 20
#: Chunks under this size are stored raw: zarr decodes a compressed chunk in a thread of its
#: own (~0.2 ms a chunk, most of a small store's read), to save at most this much.
RAW_BYTES = 64 << 10


#: The bytes-to-bytes codecs of every aggregate array: zarr's default compressor (zstd, level 0)
#: as before, then a CRC-32C of each (inner) chunk's bytes, checked by zarr on every read. The
#: values stay what they were; only the encoding gains the checksum.
CHECKED = (ZstdCodec(level=0, checksum=False), Crc32cCodec())


def checked(ds: xr.Dataset, encoding: dict | None = None) -> dict:
    """``encoding`` with :data:`CHECKED` as the compressors of every variable of ``ds``."""
    encoding = encoding or {}
    return {name: {**encoding.get(name, {}), "compressors": CHECKED} for name in ds.variables}


def aggregate_writes() -> Any:
    """A context in which zarr writes every chunk, even one holding only the fill value: an
    aggregate then has every chunk its shape and chunk grid imply, and a missing one is a loss."""
    return zarr.config.set({"array.write_empty_chunks": True})


def write_aggregate(ds: xr.Dataset, path: str | Path, encoding: dict | None = None) -> Path:
    """:func:`write_atomic` for an aggregate: every chunk written, each with its checksum."""
    with aggregate_writes():
        return write_atomic(ds, path, checked(ds, encoding))


def write_atomic(ds: xr.Dataset, path: str | Path, encoding: dict | None = None) -> Path:
    """Write ``ds`` as a zarr v3 directory store at ``path`` via a temporary sibling and a
    rename, its metadata consolidated."""
    def write(tmp: Path) -> None:
        ds.to_zarr(tmp, mode="w", zarr_format=3, consolidated=False, encoding=encoding)
        consolidate(tmp)

    return write_with(write, path)


def consolidate(path: str | Path) -> None:
    """Copy the metadata of every array of the directory store at ``path`` into its root
    ``zarr.json`` (zarr-python's consolidated metadata), once the store is written.

    A reader that uses it (``xr.open_zarr(path)`` does by default) opens the store from that one
    document: no listing of the directory, where Snakemake leaves its ``.snakemake_timestamp``
    (which zarr warns is no zarr node), and no warning from xarray that it fell back to listing.
    Readers that do not know it list the arrays as before; ``attnsweep verify`` checks the copy
    against each array's own ``zarr.json``.
    """
    with warnings.catch_warnings():  # zarr notes that Zarr v3's specification does not define it yet
        warnings.filterwarnings("ignore", message="Consolidated metadata is currently not part")
        zarr.consolidate_metadata(str(path), zarr_format=3)


def write_file(ds: xr.Dataset, path: str | Path) -> Path:
    """Write ``ds`` (in memory) as a one-file store at ``path`` (see the module docstring): the
    zarr store is built in memory, then archived to a temporary sibling that is renamed into place.
    Any encoding ``ds`` carries (one read from a store) gives way to this layout's."""
    entries: dict = {}
    encoding = {}
    ds = ds.copy()
    for name, var in ds.variables.items():
        var.encoding = {}
        size = var.size * var.dtype.itemsize
        encoding[name] = ({"chunks": var.shape} if size <= WHOLE_CHUNK_BYTES else {}) | (
            {"compressors": None} if size < RAW_BYTES else {})
    ds.to_zarr(zarr.storage.MemoryStore(entries), mode="w", zarr_format=3, consolidated=False, encoding=encoding)

    def archive(tmp: Path) -> None:
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_STORED) as zf:
            for key in sorted(entries):
                zf.writestr(key, entries[key].to_bytes())

    return write_with(archive, path)


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
    """Let ``writer`` fill a temporary sibling of ``path`` (a file or a directory), then rename
    it into place, replacing what was there (a store of either layout).

    On any error the temporary sibling is removed (which also frees a full disk) and the final
    path is left as it was; an ``OSError`` is raised again as :class:`StoreWriteError`.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    aside = path.with_name(f".{path.name}.old-{os.getpid()}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        _remove(tmp)
        writer(tmp)
        if path.is_dir():  # a rename replaces a file, never a directory: move it aside first
            os.rename(path, aside)
        elif tmp.is_dir():
            _remove(path)
        os.replace(tmp, path)
        _remove(aside)
    except BaseException as err:
        _remove(tmp, ignore_errors=True)
        if aside.exists() and not path.exists():
            os.rename(aside, path)  # the earlier store back in place
        if isinstance(err, OSError) and not isinstance(err, StoreWriteError):
            raise StoreWriteError(path, err) from err
        raise
    return path


def _remove(path: Path, ignore_errors: bool = False) -> None:
    """Remove a file or a directory tree at ``path``, if any."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=ignore_errors)
    else:
        try:
            path.unlink(missing_ok=True)
        except OSError:
            if not ignore_errors:
                raise


def zarr_store(path: str | Path) -> zarr.storage.StoreLike:
    """What zarr opens a store from: a read-only ``ZipStore`` for a one-file store, else the directory."""
    return zarr.storage.ZipStore(path, mode="r") if os.path.isfile(path) else str(path)


def open_store(path: str | Path, chunks: Any = None) -> xr.Dataset:
    """Open a store of either layout (lazily with dask when ``chunks`` is given)."""
    with warnings.catch_warnings():
        # Snakemake marks directory outputs with a .snakemake_timestamp file, which zarr notes.
        warnings.filterwarnings("ignore", message=".*snakemake_timestamp")
        return xr.open_zarr(zarr_store(path), zarr_format=3, consolidated=False, chunks=chunks)
