"""The two store layouts seen from outside, without zarr (the planner and ``attnsweep status``
read them for thousands of jobs): a one-file store (a zip archive of a zarr v3 store, what a
simulate job writes) or a zarr v3 directory store (the aggregates, and run stores of earlier
versions). See :mod:`attnsweep.store`.
"""

from __future__ import annotations

import json
import os
import zipfile
from typing import Any


def is_file_store(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a one-file store (rather than a directory store)."""
    return os.path.isfile(path)


def complete(path: str | os.PathLike) -> bool:
    """Whether a store of either layout stands at ``path`` (a final path only ever holds a whole one)."""
    return is_file_store(path) or os.path.isfile(os.path.join(path, "zarr.json"))


def root_attrs(path: str | os.PathLike) -> dict[str, Any]:
    """The attrs of a store of either layout, from its root ``zarr.json`` alone."""
    if is_file_store(path):
        with zipfile.ZipFile(path) as zf:
            return json.loads(zf.read("zarr.json"))["attributes"]
    with open(os.path.join(path, "zarr.json")) as fh:
        return json.load(fh)["attributes"]
