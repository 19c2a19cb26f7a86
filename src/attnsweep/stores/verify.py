"""Stores checked against what they must hold (``attnsweep verify CONFIG [--quarantine]``).

Results live for months on shared filesystems, where files are cut short, overwritten, mixed up
between trees or lose a chunk; atomic writes (:mod:`attnsweep.stores.io`) protect a store only
until it is written. Each store is checked against what it must hold:

- A run store (one file, a zip archive): the archive opens (its end-of-central-directory record
  and central directory read) and every entry matches its CRC-32, the checksum zipfile writes
  per entry and checks on every read (``ZipFile.testzip``): a checksum run stores always had,
  so none of them changes format. Then its job identity (root attrs ``job``) hashes to the key
  of its file name and of the job the plan expects at its path (the path names the fanned-out
  point, :meth:`attnsweep.plan.experiment_plan.Plan.jobs`); every data variable has ``seed`` as a dimension;
  every axis of the experiment and ``seed`` is a coordinate equal to the job's grid and seeds;
  its data variables, each with its dimensions (variables of one experiment span different
  axes), are the experiment's: the set most of the plan's stores hold. A run store of the
  earlier directory layout gets the same checks but the CRC, which it lacks
  (:func:`attnsweep.stores.legacy.run_problem`).
- An aggregate (``sweep.zarr``, ``summary.zarr``, ``boundary.zarr``, directory stores): every
  chunk (shard, for sharded arrays) its shape and chunk grid imply exists and decodes, and the
  store opens as one dataset. Aggregates carry zarr's ``crc32c`` codec on every (inner) chunk,
  checked as it decodes, and are written with every chunk, fill value or not
  (:func:`attnsweep.stores.io.aggregate_writes`); an aggregate of an earlier version has no
  checksums (a chunk's bytes changed may then go unseen) and may lack chunks that held only
  NaN, which this reports as missing: quarantined, it is rebuilt.

:func:`quarantine` moves bad stores aside, never deleting one: the next ``snakemake`` recomputes
exactly those jobs and the aggregates downstream of them.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import warnings
import zipfile
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import zarr
from zarr.codecs import Crc32cCodec, ShardingCodec

from attnsweep.jobspec import JobSpec
from attnsweep.stores import legacy
from attnsweep.stores.contents import Variables, contents_problem
from attnsweep.stores.io import open_store
from attnsweep.stores.probe import AGGREGATES, describe, entry_text, is_file_store, missing_part, quick_problem
from attnsweep.stores.reader import raw_layout

#: What each aggregate is built into (all of it under ``RESULTS/EXPERIMENT``): quarantined, an
#: aggregate takes these with it, so that the next run rebuilds them from the new one.
DOWNSTREAM = {
    "sweep.zarr": ("summary.zarr", "boundary.zarr", "boundary.csv", "figures"),
    "summary.zarr": ("boundary.zarr", "boundary.csv", "figures"),
    "boundary.zarr": ("boundary.csv", "figures"),
}
NO_CHECKSUMS = "no checksums (written by an earlier version): chunks checked for presence and decoding only"


@dataclass(frozen=True)
class Finding:
    """One store and what is wrong with it (``bad``), or a note on a sound one."""

    path: Path
    problem: str
    bad: bool = True

    def __str__(self) -> str:
        return f"{self.path}: {self.problem}"


# --- run stores ---------------------------------------------------------------------------------

def _file_problem(path: Path, spec: JobSpec, axes: tuple[str, ...]) -> tuple[str | None, Variables]:
    """A one-file run store's problem (None if sound) and its data variables."""
    with zipfile.ZipFile(path) as zf:
        try:
            bad = zf.testzip()
        except (zipfile.BadZipFile, OSError, EOFError, ValueError) as err:
            return f"damaged zip archive: {err}", frozenset()
        if bad is not None:
            return f"{entry_text(bad)} fails its CRC-32", frozenset()
        names = set(zf.namelist())
        raw, metadata = {}, {}
        for name in names:
            if name.endswith("/zarr.json"):
                array = name.removesuffix("/zarr.json")
                raw[array] = zf.read(name)
                try:
                    metadata[array] = json.loads(raw[array])
                except ValueError as err:
                    return f"{entry_text(name)} is not valid JSON ({err})", frozenset()

        def read(array: str) -> np.ndarray:
            layout = raw_layout(raw[array])  # cached: the stores of a sweep repeat their documents
            if layout is not None and f"{array}/{layout[2]}" in names:
                return np.frombuffer(zf.read(f"{array}/{layout[2]}"), layout[0]).reshape(layout[1])
            store = zarr.storage.ZipStore(path, mode="r")  # compressed, or a chunk of fill values left out
            try:
                return zarr.open_array(store, path=array, mode="r")[...]
            finally:
                store.close()

        return contents_problem(metadata, None, read, spec, axes)


def check_run(path: str | Path, spec: JobSpec, axes: tuple[str, ...]) -> tuple[str | None, Variables]:
    """What is wrong with the run store at ``path`` of the job ``spec`` of an experiment with
    ``axes`` (None if nothing), and its data variables (to compare with the other stores')."""
    path = Path(path)
    if path.name != f"{spec.key()}.zarr":
        return f"its name is not the key of the job {spec.key()} of {describe(spec)} the plan expects here", frozenset()
    problem = quick_problem(path, spec)
    if problem is not None:
        return problem, frozenset()
    return (_file_problem if is_file_store(path) else legacy.run_problem)(path, spec, axes)


def check_runs(stores: dict[Path, JobSpec], axes: tuple[str, ...],
               progress: Callable[[Iterable], Iterable] = iter) -> list[Finding]:
    """Every one of ``stores`` (path -> the job the plan expects there) checked, then the
    variable sets of the sound ones compared: the set most of them hold is the experiment's."""
    findings, sets = [], {}
    for path in progress(stores):
        problem, variables = check_run(path, stores[path], axes)
        if problem is not None:
            findings.append(Finding(path, problem))
        else:
            sets[path] = variables
    if sets:
        common, _ = Counter(sets.values()).most_common(1)[0]
        for path, variables in sets.items():
            if variables != common:
                parts = [f"lacks {_listed(common - variables)}"] if common - variables else []
                parts += [f"has {_listed(variables - common)} besides"] if variables - common else []
                problem = f"its variables differ from most stores of the experiment: {'; '.join(parts)}"
                findings.append(Finding(path, problem))
    return sorted(findings, key=lambda f: str(f.path))


def _listed(variables: Variables) -> str:
    return ", ".join(f"`{name}` ({', '.join(dims)})" for name, dims in sorted(variables))


# --- aggregates -----------------------------------------------------------------------------------

def _checksummed(array: zarr.Array) -> bool:
    codecs = array.metadata.codecs
    inner = [c for codec in codecs if isinstance(codec, ShardingCodec) for c in codec.codecs]
    return any(isinstance(c, Crc32cCodec) for c in (*codecs, *inner))


def check_aggregate(path: str | Path) -> list[Finding]:
    """What is wrong with the aggregate at ``path`` (empty if nothing): every chunk (shard) its
    arrays' shapes and chunk grids imply is there and decodes, checksums included where the
    store has them (else a note, not a problem), and the whole opens as one dataset."""
    path = Path(path)
    try:
        with warnings.catch_warnings():  # Snakemake's .snakemake_timestamp, a directory without zarr.json
            warnings.filterwarnings("ignore", message=".*is not recognized as a component")
            group = zarr.open_group(str(path), mode="r", zarr_format=3, use_consolidated=False)
            arrays = sorted(group.arrays())
    except Exception as err:  # noqa: BLE001  (any failure of zarr's to read it is the finding)
        return [Finding(path, f"does not open as a zarr group ({type(err).__name__}: {str(err)[:120]})")]
    missing = missing_part(path)  # an array's metadata or a chunk: what the workflow's start checks too
    if missing:
        return [Finding(path, missing)]
    stale = _stale_copy(path, [name for name, _ in arrays])
    if stale:
        return [Finding(path, f"the copy of `{stale}`'s metadata in its root zarr.json (consolidated, what "
                              f"xr.open_zarr reads) differs from `{stale}/zarr.json`")]
    for name, array in arrays:
        meta = array.metadata
        shape = meta.chunk_grid.chunk_shape
        for coords in meta.chunk_grid.all_chunk_coords(meta.shape):
            key = meta.encode_chunk_key(coords)
            region = tuple(slice(c * s, (c + 1) * s) for c, s in zip(coords, shape))
            try:
                array[region]
            except Exception as err:  # noqa: BLE001  (a checksum that fails, bytes that do not decode)
                what = "fails its CRC-32C" if "checksum" in str(err) else \
                    f"does not decode ({type(err).__name__}: {str(err)[:120]})"
                return [Finding(path, f"chunk {key} of `{name}` {what}")]
    try:
        open_store(path)
    except Exception as err:  # noqa: BLE001  (arrays that do not make one dataset)
        return [Finding(path, f"does not open as a dataset ({type(err).__name__}: {str(err)[:120]})")]
    if not all(_checksummed(array) for _, array in arrays):
        return [Finding(path, NO_CHECKSUMS, bad=False)]
    return []


def _stale_copy(path: Path, arrays: Iterable[str]) -> str | None:
    """The first array whose copy in the root ``zarr.json`` (consolidated metadata) of the store
    at ``path`` is not its own ``zarr.json``, or that only one of them has (None if they agree,
    or if the store has no copy)."""
    copy = json.loads(Path(path, "zarr.json").read_bytes()).get("consolidated_metadata")
    if not copy:
        return None
    held, arrays = copy.get("metadata", {}), set(arrays)

    def own(name: str) -> dict:
        return json.loads(Path(path, name, "zarr.json").read_bytes())

    return next((name for name in sorted(set(held) | arrays) if name not in arrays or held.get(name) != own(name)),
                None)


# --- a results tree -------------------------------------------------------------------------------

def verify_tree(sweep: Any, progress: Callable[[Iterable], Iterable] = iter) -> list[Finding]:
    """Every run and theory store the plans of ``sweep`` (a :class:`attnsweep.plan.config.Sweep`)
    use, and every aggregate, checked; bad ones first, then notes."""
    findings = []
    for name, plan in sweep.plans.items():
        root = Path(sweep.results, name)
        stores = {root / "runs" / f"{job}.zarr": spec for job, spec in plan.jobs(sweep.results).items()}
        findings += check_runs({p: s for p, s in stores.items() if os.path.lexists(p)},
                               plan.experiment.axis_names, progress)
        theory = {root / "theory" / f"{job}.zarr": spec for job, spec in plan.theory_jobs().items()}
        findings += check_runs({p: s for p, s in theory.items() if os.path.lexists(p)},
                               plan.experiment.theory_axes, progress)
        for aggregate in AGGREGATES:
            if os.path.lexists(root / aggregate):
                findings += check_aggregate(root / aggregate)
    return sorted(findings, key=lambda f: not f.bad)


def quarantine(results: str | Path, findings: Iterable[Finding], stamp: str | None = None) -> list[tuple[Path, Path]]:
    """Move each bad store of ``findings`` (and, for an aggregate, what is built from it) to
    ``RESULTS.quarantine/STAMP/`` at its path relative to ``results``; ``STAMP`` is the UTC time
    (``20261126T132322Z``). Nothing is deleted. The moves made, in order."""
    results = Path(results)
    stamp = stamp or time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    aside = results.with_name(f"{results.name}.quarantine") / stamp
    moves = []
    for finding in findings:
        if not finding.bad:
            continue
        paths = [finding.path]
        if finding.path.name in DOWNSTREAM:
            paths += [finding.path.with_name(name) for name in DOWNSTREAM[finding.path.name]]
        for path in paths:
            if not os.path.lexists(path):
                continue
            target = aside / path.relative_to(results)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(path, target)  # a rename on one filesystem; a copy, then removal, across two
            moves.append((path, target))
    return moves
