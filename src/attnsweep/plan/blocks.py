"""Jobs as blocks of the grid, and the reuse of blocks already computed.

A simulate job is one fanned-out point (``n~256/d~16/seed~0``) and one *block*: a rectangle
(a product of value lists) of the batched axes. Its store is ``<point>/<key>.zarr`` where
``key`` hashes the job's identity (:meth:`attnsweep.jobspec.JobSpec.identity`: experiment,
numerics version, grid, seeds, result options, dtype). So:

- a complete store whose identity the config would produce again is reused: its values are
  not recomputed, whatever block they came in;
- the grid points of a fanned-out point that no reusable store covers are cut into as few
  rectangles as :func:`rectangles` finds (one, when a single axis grew), each a new job;
- a change of anything in the identity gives new keys: exactly the jobs it affects rerun, and
  the stores of the old identity stay on disk, unused (nothing computed is deleted).
"""

from __future__ import annotations

import json
import os
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from attnsweep.jobspec import JobSpec
from attnsweep.stores.probe import root_attrs

Point = tuple[Any, ...]


def rectangles(axes: dict[str, list[Any]], covered: set[Point]) -> list[dict[str, list[Any]]]:
    """Cut the points of ``product(*axes.values())`` not in ``covered`` into disjoint rectangles.

    Axis by axis: values of the first axis whose covered sub-points are the same share one
    rectangle of the rest. A grid grown along one axis leaves one rectangle, along two axes two.
    """
    if not covered:
        return [dict(axes)]
    if not axes:
        return []
    first, *rest = axes
    groups: dict[frozenset[Point], list[Any]] = {}
    for value in axes[first]:
        below = frozenset(point[1:] for point in covered if point[0] == value)
        groups.setdefault(below, []).append(value)
    rest_axes = {axis: axes[axis] for axis in rest}
    return [
        {first: values, **rect}
        for below, values in groups.items()
        for rect in rectangles(rest_axes, set(below))
    ]


def stored_jobs(folder: Path) -> Iterator[tuple[str, JobSpec]]:
    """``(key, spec)`` of every complete run store in ``folder``, read from its root attrs.

    Complete means present at its final path (stores are renamed into place when whole); a
    store without a readable job spec (another program's, or damaged) is skipped.
    """
    try:
        entries = list(os.scandir(folder))
    except (FileNotFoundError, NotADirectoryError):
        return
    for entry in entries:
        if entry.name.startswith(".") or not entry.name.endswith(".zarr"):
            continue
        try:
            spec = JobSpec.from_dict(json.loads(root_attrs(entry.path)["job"]))
        except (OSError, ValueError, KeyError, TypeError, zipfile.BadZipFile):
            continue
        yield entry.name.removesuffix(".zarr"), spec
