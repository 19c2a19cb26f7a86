"""A store probed from its files alone, without zarr (the planner and ``attnsweep status``
read them for thousands of jobs): a one-file store (a zip archive of a zarr v3 store, what a
simulate job writes) or a zarr v3 directory store (the aggregates). See :mod:`attnsweep.stores.io`;
run stores of earlier versions, directories too: :mod:`attnsweep.stores.legacy`.
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import re
import zipfile
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from attnsweep.stores import legacy

if TYPE_CHECKING:
    from attnsweep.jobspec import JobSpec


#: The aggregates of an experiment (directory stores), in the order they are built from each other.
AGGREGATES = ("sweep.zarr", "summary.zarr", "boundary.zarr")

def is_file_store(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a one-file store (rather than a directory store)."""
    return os.path.isfile(path)


def complete(path: str | os.PathLike) -> bool:
    """Whether a run store stands at ``path`` (a final path only ever holds a whole one)."""
    return is_file_store(path) or legacy.complete(path)


def root_attrs(path: str | os.PathLike) -> dict[str, Any]:
    """The attrs of a run store, from its root ``zarr.json`` alone."""
    root = archived_root(path) if is_file_store(path) else legacy.root_json(path)
    return json.loads(root)["attributes"]


def archived_root(path: str | os.PathLike) -> bytes:
    """The root ``zarr.json`` of a one-file store, read once per version of the file (its path,
    mtime and size): the planner and ``attnsweep status`` both read it, for 10^4 stores."""
    info = os.stat(path)
    return _archived_root(os.fspath(path), info.st_mtime_ns, info.st_size)


@functools.lru_cache(maxsize=1 << 15)
def _archived_root(path: str, mtime_ns: int, size: int) -> bytes:
    with zipfile.ZipFile(path) as zf:
        return zf.read("zarr.json")


def describe(spec: JobSpec) -> str:
    """A job's values on its single-valued axes and seed, e.g. ``n=16, d=8, seed=1``."""
    from attnsweep.grid import format_value  # numpy: only for a bad store's message

    one = {**spec.grid, "seed": spec.seeds}
    return ", ".join(f"{axis}={format_value(values[0])}" for axis, values in one.items() if len(values) == 1)


def entry_text(name: str) -> str:
    """A zip entry named for a reader: ``entry c/0/0 of `lambda``` (``zarr.json`` of the root: ``entry zarr.json``)."""
    array, sep, key = name.rpartition("/c/") if "/c/" in name else name.rpartition("/")
    if not sep:
        return f"entry {name}"
    return f"entry {'c/' if sep == '/c/' else ''}{key} of `{array}`"


def zip_problem(err: Exception, size: int) -> str:
    """What zipfile's ``err`` says of an archive of ``size`` bytes, in a reader's words."""
    text = str(err)
    if text == "File is not a zip file":
        return f"not a zip archive ({size} bytes; no end-of-central-directory record: cut short?)"
    if text.startswith("Bad CRC-32 for file "):
        return f"{entry_text(text.removeprefix('Bad CRC-32 for file ').strip(chr(39)))} fails its CRC-32"
    return f"damaged zip archive ({size} bytes): {type(err).__name__}: {text[:120]}"


def quick_problem(path: str | os.PathLike, expected: JobSpec | None = None) -> str | None:
    """What is wrong with the run store at ``path`` (the store of the job ``expected``, if given,
    and of the job whose key names the file, if a key does: 12 hex digits), found
    without reading its data: an empty file, a file that is no zip archive (no
    end-of-central-directory record: cut short, or overwritten), a directory without
    ``zarr.json``, a root ``zarr.json`` that does not read, or a job identity (root attrs
    ``job``) other than the one its path names. None when these hold (:mod:`attnsweep.stores.verify`
    checks the rest)."""
    from attnsweep.jobspec import KEY_DIGITS, JobSpec  # numpy: only when a store is checked

    if not os.path.lexists(path):
        return "missing"
    root, problem = (_archived_root_or_problem if is_file_store(path) else legacy.root_or_problem)(path)
    if problem is not None:
        return problem
    try:
        spec = JobSpec.from_dict(json.loads(json.loads(root)["attributes"]["job"]))
    except (ValueError, TypeError, KeyError, AttributeError) as err:
        return f"no job identity in its root zarr.json ({type(err).__name__}: {str(err)[:100]})"
    if expected is not None and spec.identity() != expected.identity():
        return (f"holds job {spec.key()} of {describe(spec)}, expected {expected.key()} of {describe(expected)} "
                "(swapped or copied from another tree?)")
    named = os.path.basename(path).removesuffix(".zarr")
    if re.fullmatch(f"[0-9a-f]{{{KEY_DIGITS}}}", named) and spec.key() != named:
        return f"holds job {spec.key()} of {describe(spec)}, expected {named} (swapped or copied from another tree?)"
    return None


def _archived_root_or_problem(path: str | os.PathLike) -> tuple[bytes | None, str | None]:
    """The root ``zarr.json`` of the one-file store at ``path``, or what keeps it from reading."""
    size = os.path.getsize(path)
    if size == 0:
        return None, "not a zip archive (0 bytes)"
    try:
        return archived_root(path), None
    except KeyError:
        return None, "no zarr.json in the archive: not a zarr store"
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as err:
        return None, zip_problem(err, size)


def chunk_keys(meta: dict[str, Any]) -> Iterator[str]:
    """The key of every chunk (for a sharded array, every shard) that the ``zarr.json`` ``meta``
    of a zarr v3 array implies, as zarr names them (``encode_chunk_key`` over the chunk grid's
    ``all_chunk_coords``): its regular chunk grid over its shape, each chunk named by its chunk key
    encoding (``default`` or ``v2``, the two of the zarr v3 spec)."""
    grid, encoding = meta["chunk_grid"], meta["chunk_key_encoding"]
    if grid["name"] != "regular" or encoding["name"] not in ("default", "v2"):
        raise ValueError(f"chunk grid {grid['name']!r}, chunk key encoding {encoding['name']!r}")
    separator = (encoding.get("configuration") or {}).get("separator", "/" if encoding["name"] == "default" else ".")
    counts = [-(-size // chunk) for size, chunk in zip(meta["shape"], grid["configuration"]["chunk_shape"])]
    for coords in itertools.product(*map(range, counts)):
        if encoding["name"] == "default":
            yield separator.join(map(str, ("c", *coords)))
        else:
            yield separator.join(map(str, coords)) or "0"


def missing_part(path: str | os.PathLike) -> str | None:
    """What the directory store at ``path`` (an aggregate) lacks, found from the names of its
    files alone (None if nothing): its root ``zarr.json``, an array's ``zarr.json``, or a chunk
    (shard) that an array's ``zarr.json`` implies (:func:`chunk_keys`). One ``stat`` a chunk and
    no data read: cheap enough for the start of every run (the workflow rebuilds an aggregate that
    lacks one, ``rules/common.smk``); :mod:`attnsweep.stores.verify` also decodes every chunk."""
    if not os.path.isfile(os.path.join(path, "zarr.json")):
        return "no zarr.json: not a whole store"
    for entry in sorted(os.scandir(path), key=lambda e: e.name):
        if entry.name.startswith(".") or not entry.is_dir():  # Snakemake's .snakemake_timestamp
            continue
        try:
            with open(os.path.join(entry.path, "zarr.json"), "rb") as fh:
                meta = json.load(fh)
            if meta.get("node_type") != "array":
                continue
            keys = list(chunk_keys(meta))
        except FileNotFoundError:
            return f"`{entry.name}` has no zarr.json (its metadata lost)"
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            what = f"{type(err).__name__}: {str(err)[:100]}"
            return f"`{entry.name}/zarr.json` does not read as an array's metadata ({what})"
        for key in keys:
            if not os.path.isfile(os.path.join(entry.path, key)):
                return f"chunk {key} of `{entry.name}` is missing"
    return None
