"""The data variables of many run stores, read fast (what ``collect`` places into ``sweep.zarr``).

A one-file store whose arrays are each one raw chunk (every array of a typical run store) is
read from one opening of its archive, each array's metadata parsed by zarr once per distinct
``zarr.json`` (~0.2 ms a store, against ~4 ms through zarr's array API); any other store is read
through zarr's asyncio API, stores concurrently. A store that does not read raises
:class:`~attnsweep.errors.BadStoreError`: no zip archive, or an entry that fails its CRC-32 as
it is read.
"""

from __future__ import annotations

import asyncio
import json
import math
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path

import numpy as np
import zarr.api.asynchronous as zarr_async
from zarr.codecs import BytesCodec
from zarr.core.metadata.v3 import ArrayV3Metadata
from zarr.storage import ZipStore

from attnsweep.errors import BadStoreError
from attnsweep.stores.io import zarr_store
from attnsweep.stores.probe import is_file_store, zip_problem


@contextmanager
def reading(path: Path) -> Iterator[None]:
    """Turn zipfile's errors reading the run store at ``path`` (an entry that fails its CRC-32,
    one cut short) into :class:`BadStoreError`."""
    try:
        yield
    except (zipfile.BadZipFile, EOFError) as err:
        raise BadStoreError(str(path), zip_problem(err, path.stat().st_size)) from err


def read_stores(stores: list[Path], variables: list[str]) -> list[dict[str, np.ndarray]]:
    """Every variable of every store, in order: straight from the archive where
    :func:`read_raw` can, the other stores through zarr (:func:`_read_all`)."""
    values = []
    for path in stores:
        with reading(path):
            values.append(read_raw(path, variables))
    rest = [i for i, v in enumerate(values) if v is None]
    if rest:
        for i, v in zip(rest, asyncio.run(_read_all([stores[i] for i in rest], variables))):
            values[i] = v
    return values


@lru_cache(maxsize=1024)
def raw_layout(metadata: bytes) -> tuple[np.dtype, tuple[int, ...], str] | None:
    """Dtype, shape and chunk key of an array (its ``zarr.json``, parsed by zarr) stored as one
    chunk through zarr's ``bytes`` codec alone; None for any other array. Cached: the stores of a
    sweep repeat a few distinct metadata documents."""
    array = ArrayV3Metadata.from_dict(json.loads(metadata))
    (codec, *others) = array.codecs
    if others or not isinstance(codec, BytesCodec) or array.chunks != array.shape or array.storage_transformers:
        return None
    dtype = array.dtype.to_native_dtype()
    if codec.endian is not None:
        dtype = dtype.newbyteorder(codec.endian.value)
    return dtype, array.shape, array.encode_chunk_key((0,) * array.ndim)


def read_raw(path: Path, variables: list[str]) -> dict[str, np.ndarray] | None:
    """Every variable of a one-file store from one opening of its archive (read-only arrays),
    or None where one is not a single raw chunk (compressed, several chunks, an absent chunk
    that zarr fills, an absent array): zarr reads that store, and says what is wrong."""
    if not is_file_store(path):
        return None  # a directory run store (attnsweep.stores.legacy): zarr reads it
    values = {}
    with zipfile.ZipFile(path) as zf:
        for var in variables:
            try:
                layout = raw_layout(zf.read(f"{var}/zarr.json"))
                if layout is None:
                    return None
                dtype, shape, key = layout
                data = zf.read(f"{var}/{key}")
            except (KeyError, ValueError):  # an absent entry, metadata zarr refuses
                return None
            if len(data) != dtype.itemsize * math.prod(shape):
                return None
            values[var] = np.frombuffer(data, dtype).reshape(shape)
    return values


async def _read_all(stores: list[Path], variables: list[str]) -> list[dict[str, np.ndarray]]:
    """Every variable of every store through zarr's asyncio API, read concurrently (one event
    loop for all the I/O)."""
    async def read(path: Path) -> dict[str, np.ndarray]:
        store = zarr_store(path)
        try:
            arrays = await asyncio.gather(*(zarr_async.open_array(store=store, path=v, mode="r") for v in variables))
            values = await asyncio.gather(*(a.getitem(...) for a in arrays))
        except Exception as err:  # noqa: BLE001  (whatever zarr cannot read of it: an entry, a variable)
            problem = zip_problem(err, path.stat().st_size) if isinstance(err, zipfile.BadZipFile) else \
                f"does not read ({type(err).__name__}: {str(err)[:120]})"
            raise BadStoreError(str(path), problem) from err
        if isinstance(store, ZipStore):
            store.close()
        return dict(zip(variables, values))

    return await asyncio.gather(*(read(store) for store in stores))
