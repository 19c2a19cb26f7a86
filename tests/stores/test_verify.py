"""Stores that go bad at rest are found (`attnsweep verify`), named in one line by the steps that
read them, moved aside (`--quarantine`), and never read back as other values in silence.

A small tree (three run stores and the aggregates, made in this process) is built once per
session and copied per test; each test damages its copy as a filesystem would.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import subprocess
import sys
import warnings
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
import yaml
import zarr
from helpers import processes

from attnsweep import status
from attnsweep.errors import BadStoreError
from attnsweep.plan.config import load_sweep
from attnsweep.reduce import aggregate
from attnsweep.run.job import run_job
from attnsweep.stores.io import open_store, write_aggregate, write_atomic, write_file
from attnsweep.stores.probe import chunk_keys
from attnsweep.stores.verify import NO_CHECKSUMS, check_aggregate, quarantine, verify_tree

EXP = "critical_scaling"
SECTION = {"n": [16], "d": [8], "rho": [0.2, 0.8], "gamma": {"start": 0.5, "stop": 8.0, "num": 4}, "seeds": 3}


def config_for(root: Path) -> dict:
    return {"results": str(root / "results"), "logs": str(root / "logs"), "device": "cpu", "dtype": "float64",
            "experiments": {EXP: dict(SECTION)}}


def build(root: Path) -> None:
    """The run stores of the config's plan, then collect, reduce and boundary as the rules call them."""
    sweep = load_sweep(config_for(root))
    plan = sweep.plans[EXP]
    out = root / "results" / EXP
    runs = [run_job(spec, out / "runs" / f"{job}.zarr", device="cpu", threads=1, progress=False)
            for job, spec in plan.jobs().items()]
    aggregate.collect(runs, out / "sweep.zarr", grid=plan.coords())
    aggregate.reduce(out / "sweep.zarr", out / "summary.zarr")
    aggregate.boundary(out / "sweep.zarr", out / "summary.zarr", out / "boundary.csv", out / "boundary.zarr")


@pytest.fixture(scope="session")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("verify-tree")
    build(root)
    return root


@pytest.fixture
def tree(pristine: Path, tmp_path: Path) -> Path:
    shutil.copytree(pristine / "results", tmp_path / "results")
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config_for(tmp_path)))
    return tmp_path


def findings(root: Path) -> list[str]:
    """The bad stores verify names, as ``PATH relative to results: problem``."""
    results = root / "results"
    return [f"{f.path.relative_to(results)}: {f.problem}" for f in verify_tree(load_sweep(config_for(root)))
            if f.bad]


def attnsweep(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    return processes.run([sys.executable, "-m", "attnsweep.cli", *args], capture_output=True, text=True, cwd=workdir)


def run_stores(root: Path) -> list[Path]:
    return sorted((root / "results" / EXP / "runs").rglob("*.zarr"))


def chunk(store: Path, array: str) -> Path:
    return next(p for p in sorted((store / array / "c").rglob("*")) if p.is_file())


# --- each fault, named ----------------------------------------------------------------------

def test_a_sound_tree_has_no_finding(tree: Path) -> None:
    assert findings(tree) == []
    assert all(f.bad is False for f in verify_tree(load_sweep(config_for(tree))))


def test_a_store_cut_short(tree: Path) -> None:
    store = run_stores(tree)[0]
    data = store.read_bytes()
    store.write_bytes(data[: len(data) // 2])
    (found,) = findings(tree)
    assert found.endswith(f"not a zip archive ({len(data) // 2} bytes; no end-of-central-directory record: cut short?)")
    assert found.startswith(str(store.relative_to(tree / "results")))


def test_bytes_overwritten_inside_an_entry(tree: Path) -> None:
    store = run_stores(tree)[1]
    with zipfile.ZipFile(store) as zf:
        info = zf.getinfo(next(name for name in zf.namelist() if name.startswith("lambda/c/")))
    data = bytearray(store.read_bytes())
    at = info.header_offset + 30 + len(info.filename) + len(info.extra) + 3
    data[at : at + 4] = b"\xff\x00\xff\x00"
    store.write_bytes(bytes(data))
    (found,) = findings(tree)
    assert found.endswith(f"entry {info.filename.removeprefix('lambda/')} of `lambda` fails its CRC-32")


def test_a_store_replaced_by_an_empty_file(tree: Path) -> None:
    store = run_stores(tree)[2]
    store.write_bytes(b"")
    assert findings(tree) == [f"{store.relative_to(tree / 'results')}: not a zip archive (0 bytes)"]


def test_two_stores_swapped(tree: Path) -> None:
    a, b = run_stores(tree)[:2]
    data_a, data_b = a.read_bytes(), b.read_bytes()
    a.write_bytes(data_b)
    b.write_bytes(data_a)
    found = findings(tree)
    assert len(found) == 2
    key_a, key_b = a.stem, b.stem
    assert f"holds job {key_b} of " in found[0] and f"expected {key_a} of " in found[0]
    assert "(swapped or copied from another tree?)" in found[0]


def test_a_store_with_other_coordinates(tree: Path) -> None:
    store = run_stores(tree)[0]
    ds = open_store(store).load()
    write_file(ds.assign_coords(gamma=ds["gamma"].values * 2), store)
    (found,) = findings(tree)
    assert "coordinate `gamma` holds [1, " in found and "expected the job's [0.5, " in found


def test_a_store_lacking_a_variable(tree: Path) -> None:
    store = run_stores(tree)[0]
    write_file(open_store(store).load().drop_vars("eta"), store)
    (found,) = findings(tree)
    assert found.endswith("its variables differ from most stores of the experiment: lacks `eta` "
                          "(n, d, seed, rho, gamma, alpha)")


@pytest.mark.parametrize("aggregate_name,array", [("sweep.zarr", "lambda"), ("summary.zarr", "lambda_se")])
def test_a_chunk_of_an_aggregate_deleted(tree: Path, aggregate_name: str, array: str) -> None:
    store = tree / "results" / EXP / aggregate_name
    lost = chunk(store, array)
    lost.unlink()
    key = lost.relative_to(store / array).as_posix()
    assert findings(tree) == [f"{EXP}/{aggregate_name}: chunk {key} of `{array}` is missing"]


def test_a_chunk_of_an_aggregate_changed(tree: Path) -> None:
    store = tree / "results" / EXP / "sweep.zarr"
    changed = chunk(store, "lambda")
    data = bytearray(changed.read_bytes())
    data[len(data) // 3] ^= 0x10
    changed.write_bytes(bytes(data))
    key = changed.relative_to(store / "lambda").as_posix()
    assert findings(tree) == [f"{EXP}/sweep.zarr: chunk {key} of `lambda` fails its CRC-32C"]


def test_the_earlier_directory_layout(tree: Path) -> None:
    store = run_stores(tree)[0]
    write_atomic(open_store(store).load(), store)  # the directory layout of earlier versions, in place
    assert store.is_dir() and findings(tree) == []
    lost = chunk(store, "lambda")
    lost.unlink()
    key = lost.relative_to(store / "lambda").as_posix()
    assert findings(tree) == [f"{store.relative_to(tree / 'results')}: chunk {key} of `lambda` is missing"]


def test_aggregates_of_an_earlier_version_still_read(tree: Path) -> None:
    """Without checksums (as written before): a note, not a problem."""
    summary = tree / "results" / EXP / "summary.zarr"
    ds = open_store(summary).load()
    for var in ds.variables.values():
        var.encoding = {}
    write_atomic(ds, summary)  # zarr's default encoding, as before: no crc32c
    notes = [f for f in verify_tree(load_sweep(config_for(tree))) if not f.bad]
    assert [(n.path.name, n.problem) for n in notes] == [("summary.zarr", NO_CHECKSUMS)]


def test_aggregates_carry_checksums_and_every_chunk(pristine: Path) -> None:
    for name in ("sweep.zarr", "summary.zarr", "boundary.zarr"):
        for meta in (pristine / "results" / EXP / name).glob("*/zarr.json"):
            assert "crc32c" in meta.read_text(), f"{name}/{meta.parent.name} has no crc32c codec"


def test_aggregates_open_with_plain_xarray_and_no_warning(pristine: Path, tmp_path: Path) -> None:
    """What the README promises: ``xr.open_zarr(path)``, nothing else, reads an aggregate as
    attnsweep does, even with the marker file Snakemake leaves in a directory output (which zarr
    warns is no zarr node when it lists the store) and without xarray's fallback warning."""
    for name in ("sweep.zarr", "summary.zarr", "boundary.zarr"):
        store = tmp_path / name
        shutil.copytree(pristine / "results" / EXP / name, store)
        (store / ".snakemake_timestamp").touch()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            plain = xr.open_zarr(store).load()
        xr.testing.assert_identical(plain, open_store(store).load())


def test_chunk_keys_read_without_zarr_are_zarrs(pristine: Path, tmp_path: Path) -> None:
    """The chunk keys the cheap check (the start of every run, status, and verify's presence step)
    reads from a ``zarr.json`` without zarr are those zarr names: every array of the aggregates
    (sharded ones included), a 0-d array, an empty one and one of the v2 chunk key encoding."""
    paths = [meta.parent for name in ("sweep.zarr", "summary.zarr", "boundary.zarr")
             for meta in sorted((pristine / "results" / EXP / name).glob("*/zarr.json"))]
    zarr.create_array(tmp_path / "scalar", shape=(), dtype="f8")
    zarr.create_array(tmp_path / "empty", shape=(0, 4), chunks=(2, 2), dtype="f8")
    zarr.create_array(tmp_path / "v2", shape=(5, 3), chunks=(2, 2), dtype="f8",
                      chunk_key_encoding={"name": "v2", "separator": "."})
    paths += [tmp_path / "scalar", tmp_path / "empty", tmp_path / "v2"]
    for path in paths:
        meta = zarr.open_array(path, mode="r").metadata
        want = [meta.encode_chunk_key(coords) for coords in meta.chunk_grid.all_chunk_coords(meta.shape)]
        assert list(chunk_keys(json.loads((path / "zarr.json").read_text()))) == want, path


def test_an_aggregate_array_that_lost_its_metadata(tree: Path) -> None:
    """Found from the store itself, not hidden by the copy in the root zarr.json."""
    (tree / "results" / EXP / "sweep.zarr" / "lambda" / "zarr.json").unlink()
    assert findings(tree) == [f"{EXP}/sweep.zarr: `lambda` has no zarr.json (its metadata lost)"]


def test_a_consolidated_copy_that_differs_is_named(tree: Path) -> None:
    """The root zarr.json's copy of the arrays' metadata is what plain xarray reads: a copy that no
    longer matches an array's own zarr.json (changed in place, as zarr's own ``attrs`` updates
    do, which leave the copy as it was) is found. (xarray's appends drop the copy instead.)"""
    summary = tree / "results" / EXP / "summary.zarr"
    zarr.open_array(summary / "lambda", mode="r+").attrs["units"] = "m"
    assert findings(tree) == [f"{EXP}/summary.zarr: the copy of `lambda`'s metadata in its root zarr.json "
                              "(consolidated, what xr.open_zarr reads) differs from `lambda/zarr.json`"]


def test_a_chunk_of_only_nan_is_written_too(pristine: Path, tmp_path: Path) -> None:
    """A grid point no store holds (d = 9 here) is NaN in sweep.zarr, and its chunk is still
    written: verify can then require every chunk."""
    plan = load_sweep(config_for(pristine)).plans[EXP]
    out = tmp_path / "sweep.zarr"
    aggregate.collect(run_stores(pristine), out, grid={**plan.coords(), "d": [8, 9]}, points=[plan.base()])
    assert np.isnan(open_store(out)["lambda"].sel(d=9).values).all()
    assert check_aggregate(out) == []
    nan = tmp_path / "nan.zarr"  # one chunk of NaN alone (a summary variable no point defines)
    write_aggregate(xr.Dataset({"x": ("i", np.full(3, np.nan))}), nan)
    assert (nan / "x" / "c" / "0").is_file() and check_aggregate(nan) == []


# --- quarantine -------------------------------------------------------------------------------

def test_quarantine_moves_bad_stores_and_what_is_built_from_them(tree: Path) -> None:
    store = run_stores(tree)[0]
    store.write_bytes(b"")
    sweep_chunk = chunk(tree / "results" / EXP / "sweep.zarr", "eta")
    sweep_chunk.unlink()
    bad = [f for f in verify_tree(load_sweep(config_for(tree))) if f.bad]
    moves = quarantine(tree / "results", bad, stamp="20261126T000000Z")
    aside = tree / "results.quarantine" / "20261126T000000Z"
    assert {target.relative_to(aside).as_posix() for _, target in moves} == {
        store.relative_to(tree / "results").as_posix(),
        f"{EXP}/sweep.zarr", f"{EXP}/summary.zarr", f"{EXP}/boundary.zarr", f"{EXP}/boundary.csv"}
    assert (aside / store.relative_to(tree / "results")).read_bytes() == b""  # kept, not deleted
    assert not store.exists() and not (tree / "results" / EXP / "sweep.zarr").exists()
    assert len(run_stores(tree)) == 2


def test_verify_command(tree: Path) -> None:
    store = run_stores(tree)[0]
    store.write_bytes(b"")
    config = str(tree / "config.yaml")
    result = attnsweep(tree, "verify", config)
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert lines[0] == f"{store}: not a zip archive (0 bytes)"
    assert lines[-1] == (f"{config}: 1 bad stores: `attnsweep verify {config} --quarantine`, then `snakemake` "
                         "recomputes them")
    result = attnsweep(tree, "verify", config, "--quarantine")
    assert result.returncode == 1 and f"moved {store} -> " in result.stdout
    assert result.stdout.splitlines()[-1] == f"{config}: 1 bad stores, quarantined: `snakemake` recomputes them"
    result = attnsweep(tree, "verify", config)
    assert result.returncode == 0 and result.stdout.splitlines() == [f"{config}: every store sound"]
    assert "Traceback" not in result.stderr


# --- the steps refuse a bad input in one line --------------------------------------------------

def test_collect_refuses_a_bad_store_in_one_line(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATTNSWEEP_CONFIG", "my.yaml")
    stores = run_stores(tree)
    data = stores[1].read_bytes()
    stores[1].write_bytes(data[: len(data) - 30])
    with pytest.raises(BadStoreError) as err:
        aggregate.collect(stores, tree / "new.zarr")
    assert str(err.value) == (f"bad store {stores[1]}: not a zip archive ({len(data) - 30} bytes; no "
                              "end-of-central-directory record: cut short?); heal the results with "
                              "`attnsweep verify my.yaml --quarantine`, then `snakemake`")
    shutil.copy(stores[2], stores[1])  # another job's store under this one's name
    with pytest.raises(BadStoreError, match=f"holds job {stores[2].stem} of .*, expected {stores[1].stem}"):
        aggregate.collect(stores, tree / "new.zarr")


def test_collect_refuses_an_entry_that_fails_its_crc(tree: Path) -> None:
    stores = run_stores(tree)
    with zipfile.ZipFile(stores[0]) as zf:
        info = zf.getinfo(next(name for name in zf.namelist() if name.startswith("eta/c/")))
    data = bytearray(stores[0].read_bytes())
    data[info.header_offset + 30 + len(info.filename) + len(info.extra)] ^= 1
    stores[0].write_bytes(bytes(data))
    args = tree / "collect.json"
    args.write_text(json.dumps({"runs": [str(p) for p in stores], "out": str(tree / "new.zarr")}))
    result = processes.run([sys.executable, "-m", "attnsweep.cli", "collect", str(args)],
                           capture_output=True, text=True)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        f"attnsweep: bad store {stores[0]}: entry {info.filename.removeprefix('eta/')} of `eta` fails its CRC-32; "
        "heal the results with `attnsweep verify CONFIG --quarantine`, then `snakemake`")
    assert "Traceback" not in result.stderr


def test_reduce_refuses_a_sweep_with_a_lost_chunk(tree: Path) -> None:
    sweep = tree / "results" / EXP / "sweep.zarr"
    chunk(sweep, "lambda").unlink()
    with pytest.raises(BadStoreError, match=r"sweep.zarr: chunk c/.* of `lambda` is missing"):
        aggregate.reduce(sweep, tree / "summary.zarr")
    with pytest.raises(BadStoreError, match="sweep.zarr: chunk"):
        aggregate.boundary(sweep, tree / "results" / EXP / "summary.zarr", tree / "b.csv", tree / "b.zarr")


# --- status -----------------------------------------------------------------------------------

def test_status_names_bad_stores_and_aggregates_not_done(tree: Path) -> None:
    stores = run_stores(tree)
    stores[0].write_bytes(b"")
    shutil.rmtree(tree / "results" / EXP / "sweep.zarr")
    os.utime(tree / "results" / EXP / "boundary.csv", (0, 0))
    text = status.report(load_sweep(config_for(tree)))
    assert text.splitlines()[0] == f"{EXP}: 3 jobs: 2 done, 0 running, 0 interrupted, 0 failed, 0 pending, 1 bad"
    assert "  not done: sweep.zarr is missing (a reduction that failed?); `snakemake` makes it" in text
    assert "  not done: boundary.csv is older than summary.zarr; `snakemake` makes it again" in text
    assert "not a zip archive (0 bytes)" in text and stores[0].stem in text


def test_status_names_an_aggregate_that_lost_a_chunk(tree: Path) -> None:
    """The cheap check a run starts with (names only) sees what verify sees of a lost chunk."""
    summary = tree / "results" / EXP / "summary.zarr"
    lost = chunk(summary, "lambda_se")
    lost.unlink()
    key = lost.relative_to(summary / "lambda_se").as_posix()
    sweep = load_sweep(config_for(tree))
    assert status.damaged_aggregates(sweep) == [(summary, f"chunk {key} of `lambda_se` is missing")]
    assert (f"  not done: summary.zarr: chunk {key} of `lambda_se` is missing; `snakemake` rebuilds it and what "
            "is built from it") in status.report(sweep)


# --- random faults: found, or provably harmless ------------------------------------------------

def read_all(results: Path) -> dict[str, dict]:
    """Every array of every store under ``results``: its dims and bytes (attrs aside)."""
    arrays = {}
    for store in sorted(results.rglob("*.zarr")):
        if store.parent.suffix == ".zarr" or any(p.suffix == ".zarr" for p in store.relative_to(results).parents):
            continue
        ds = open_store(store).load()
        for name, var in ds.variables.items():
            arrays[f"{store.relative_to(results)}/{name}"] = (var.dims, var.dtype.str, var.values.tobytes())
    return arrays


def store_files(results: Path) -> list[Path]:
    """The files of the stores under ``results``: run store archives, the aggregates' files."""
    return sorted(p for p in results.rglob("*") if p.is_file() and ".zarr" in p.as_posix())


@pytest.mark.slow  # ~15 s of faults planted one by one; the fast tier keeps the named faults above
def test_random_faults_are_found_or_harmless(pristine: Path, tmp_path: Path) -> None:
    """Seeded random faults (cut short, bytes overwritten, a file deleted) at random places of
    the tree, one at a time: verify names a bad store, or every array reads back bit for bit as
    before (a fault in bytes no reader uses, such as a zip entry's timestamp), or a whole run
    store was deleted (one file: a store that is missing, which the next run makes again, and
    every other array as before). An array that reads back otherwise, or fails to read, while
    verify finds nothing is a failure."""
    shutil.copytree(pristine / "results", tmp_path / "results")
    results = tmp_path / "results"
    want = read_all(results)
    rng = random.Random(20261126)
    found = harmless = missing = 0
    for case in range(80):
        target = rng.choice(store_files(results))
        original = target.read_bytes()
        kind = rng.choice(["truncate", "overwrite", "delete"])
        if kind == "truncate":
            target.write_bytes(original[: rng.randrange(len(original))])
        elif kind == "overwrite":
            at = rng.randrange(len(original))
            length = rng.randint(1, 16)
            target.write_bytes(original[:at] + rng.randbytes(length) + original[at + length :])
        else:
            target.unlink()
        what = f"case {case}: {kind} {target.relative_to(results)}"
        if findings(tmp_path):
            found += 1
        elif kind == "delete" and target.suffix == ".zarr":  # a whole run store: missing, not damaged
            gone = f"{target.relative_to(results)}/"  # (its job runs again: test_resilience)
            assert read_all(results) == {k: v for k, v in want.items() if not k.startswith(gone)}, what
            missing += 1
        else:
            try:
                got = read_all(results)
            except Exception as err:  # noqa: BLE001
                pytest.fail(f"{what}: verify found nothing, yet the tree does not read: {err}")
            assert got == want, f"{what}: verify found nothing, yet arrays read back otherwise"
            harmless += 1
        target.write_bytes(original)
    assert found > harmless  # most faults matter; the rest were shown harmless


# --- the heal path, end to end (slow) -----------------------------------------------------------

REPO = Path(__file__).resolve().parents[2]
# Attrs that record how and where a store was made, not what it holds.
PROVENANCE = {"wall_time_s", "peak_rss_mib", "git_commit", "hostname", "run_wall_time_s_total"}


def snakemake(workdir: Path, *args: str) -> tuple[int, str]:
    cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory", str(workdir),
           "--configfile", str(workdir / "config.yaml"), "--cores", "2", *args]
    done = processes.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return done.returncode, done.stdout


def jobs_run(output: str) -> list[str]:
    """The rules of the jobs a Snakemake run started, in order."""
    return [line.split()[1].rstrip(":") for line in output.splitlines() if line.startswith("localrule ")]


def snapshot(results: Path) -> dict[str, tuple]:
    """Every store's arrays (dims, dtype, bytes) and attrs less provenance, boundary.csv's bytes."""
    found = {}
    for store in sorted(results.rglob("*.zarr")):
        if any(p.suffix == ".zarr" for p in store.relative_to(results).parents) or store.name.startswith("."):
            continue
        ds = open_store(store).load()
        attrs = {k: v for k, v in ds.attrs.items() if k not in PROVENANCE}
        found[store.relative_to(results).as_posix()] = (
            attrs, {name: (var.dims, var.dtype.str, var.values.tobytes()) for name, var in ds.variables.items()})
    found["boundary.csv"] = (results / EXP / "boundary.csv").read_bytes()
    return found


def mtimes(results: Path) -> dict[str, int]:
    return {p.relative_to(results).as_posix(): p.stat().st_mtime_ns for p in (results / EXP / "runs").rglob("*.zarr")}


@pytest.mark.slow
def test_bad_stores_are_refused_then_healed(tmp_path: Path, tiny_run: Callable[[str], Path]) -> None:
    """The issue's sequence on the tiny sweep (a copy of the shared tiny run, Snakemake's records
    included): a run store cut short after the sweep finished makes collect fail in one line, and a
    second run fails again rather than say "Nothing to be done"; status says why; `verify
    --quarantine` then `snakemake` recomputes that job and the aggregates alone, to stores equal to
    the untouched run's. Then a chunk of sweep.zarr changed: the aggregates alone are rebuilt, no job."""
    # (the copy's records are whole: the first run below plans collect alone, no job)
    shutil.copytree(tiny_run(EXP), tmp_path, dirs_exist_ok=True, ignore=shutil.ignore_patterns("*.out", "locks"))
    results = tmp_path / "results"
    want, before = snapshot(results), mtimes(results)
    config = str(tmp_path / "config.yaml")

    bad = sorted((results / EXP / "runs").rglob("*.zarr"))[1]
    data = bad.read_bytes()
    bad.write_bytes(data[: len(data) // 2])
    line = (f"attnsweep: bad store {bad.relative_to(tmp_path)}: not a zip archive ({len(data) // 2} bytes; "
            f"no end-of-central-directory record: cut short?); heal the results with `attnsweep verify {config} "
            "--quarantine`, then `snakemake`")
    for attempt in range(2):  # the second run redoes the collect the first one lost, and fails as well
        code, out = snakemake(tmp_path)
        assert code != 0 and line in out.splitlines(), out[-3000:]
        assert "Traceback" not in out and "Nothing to be done" not in out
        assert jobs_run(out) == ["collect"], f"run {attempt}: {jobs_run(out)}"
    text = attnsweep(tmp_path, "status", config).stdout
    assert "1 bad" in text and "not done: sweep.zarr is missing" in text

    healing = attnsweep(tmp_path, "verify", config, "--quarantine")
    assert healing.returncode == 1 and f"{bad.relative_to(tmp_path)}: not a zip archive" in healing.stdout
    code, out = snakemake(tmp_path)
    assert code == 0, out[-3000:]
    assert sorted(jobs_run(out)) == sorted(["simulate", "collect", "reduce", "boundary", "figure", "figure",
                                            "figure", "all"])
    after = mtimes(results)
    assert [p for p in after if after[p] != before[p]] == [bad.relative_to(results).as_posix()]
    assert snapshot(results) == want
    assert attnsweep(tmp_path, "verify", config).returncode == 0

    # A chunk's bytes changed (a lost chunk the run's start finds and rebuilds itself: the next test).
    changed = chunk(results / EXP / "sweep.zarr", "lambda")
    data = bytearray(changed.read_bytes())
    data[len(data) // 3] ^= 0x10
    changed.write_bytes(bytes(data))
    (results / EXP / "boundary.csv").unlink()  # boundary runs again, and refuses the sweep (through the warm worker)
    code, out = snakemake(tmp_path)
    key = changed.relative_to(results / EXP / "sweep.zarr" / "lambda").as_posix()
    line = (f"attnsweep: bad store results/{EXP}/sweep.zarr: chunk {key} of `lambda` fails its CRC-32C; heal "
            f"the results with `attnsweep verify {config} --quarantine`, then `snakemake`")  # as the run names it
    assert code != 0 and "Traceback" not in out, out[-3000:]
    assert line in out.splitlines(), out[-3000:]
    healing = attnsweep(tmp_path, "verify", config, "--quarantine")
    assert "of `lambda` fails its CRC-32C" in healing.stdout
    code, out = snakemake(tmp_path)
    assert code == 0, out[-3000:]
    assert sorted(jobs_run(out)) == sorted(["collect", "reduce", "boundary", "figure", "figure", "figure", "all"])
    assert mtimes(results) == after and snapshot(results) == want
    code, out = snakemake(tmp_path)
    assert code == 0 and "Nothing to be done" in out


@pytest.mark.slow
def test_a_lost_chunk_of_an_aggregate_is_rebuilt_by_a_plain_run(tmp_path: Path,
                                                                tiny_run: Callable[[str], Path]) -> None:
    """A chunk of sweep.zarr lost at rest after the sweep finished (a copy of the shared tiny run).
    Snakemake judges sweep.zarr by its timestamp alone, so a plain `snakemake` used to say "Nothing to
    be done" while xr.open_zarr read NaN there. The run's start finds the loss from the files' names,
    removes sweep.zarr in one line and rebuilds it and what is built from it, equal bit for bit to
    the untouched run's, no run store touched; a dry run before it removes nothing and says so."""
    shutil.copytree(tiny_run(EXP), tmp_path, dirs_exist_ok=True, ignore=shutil.ignore_patterns("*.out", "locks"))
    results = tmp_path / "results"
    runs = sorted((results / EXP / "runs").rglob("*.zarr"))
    want, before, run_bytes = snapshot(results), mtimes(results), [p.read_bytes() for p in runs]
    store = results / EXP / "sweep.zarr"
    lost = chunk(store, "eta")
    lost.unlink()
    key = lost.relative_to(store / "eta").as_posix()
    found = f"attnsweep: results/{EXP}/sweep.zarr: chunk {key} of `eta` is missing"

    # The dry run with the --forcerun its line names: nothing removed, and the rebuild planned.
    code, out = snakemake(tmp_path, "--dry-run", "--forcerun", f"results/{EXP}/sweep.zarr")
    assert code == 0, out[-3000:]
    assert (f"{found}; a run rebuilds it and what is built from it (this dry run removes nothing and its plan "
            f"leaves them out: `--forcerun results/{EXP}/sweep.zarr` shows them)") in out.splitlines(), out[-3000:]
    planned = dict(re.findall(r"^(\w+)\s+(\d+)$", out, re.MULTILINE))
    assert planned == {"all": "1", "boundary": "1", "collect": "1", "figure": "3", "reduce": "1", "total": "7"}, out
    assert (store / "zarr.json").is_file() and not lost.exists()

    code, out = snakemake(tmp_path)
    assert code == 0, out[-3000:]
    assert f"{found}; removed, to be rebuilt with what is built from it" in out.splitlines(), out[-3000:]
    assert sorted(jobs_run(out)) == sorted(["collect", "reduce", "boundary", "figure", "figure", "figure", "all"])
    assert lost.is_file() and snapshot(results) == want
    assert mtimes(results) == before and [p.read_bytes() for p in runs] == run_bytes
