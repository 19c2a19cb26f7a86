"""Growing a sweep reruns only the new work (attnsweep.plan.blocks, plan.Plan.jobs, aggregate.collect);
a boundary option (Experiment.boundary_options) reruns the boundary alone.

Independent truth: a brute-force set of uncovered grid points for :func:`rectangles`; the job
counts of ``snakemake --dry-run`` after each extension, derived by hand from the grids; and a
from-scratch run of the final config, which the grown sweep must equal exactly (float64).
"""

from __future__ import annotations

import itertools
import json
import os
import random
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
import yaml
from helpers import processes
from helpers.project import template_experiment
from helpers.workflow_runs import crossing

from attnsweep.plan.blocks import rectangles
from attnsweep.plan.config import load_sweep
from attnsweep.reduce.aggregate import collect
from attnsweep.run.job import run_job
from attnsweep.stores import reader
from attnsweep.stores.io import open_store, write_file

REPO = Path(__file__).resolve().parents[2]


def points(rect: dict[str, list]) -> set[tuple]:
    return set(itertools.product(*rect.values()))


@pytest.mark.parametrize("seed", range(20))
def test_rectangles_tile_exactly_the_uncovered_points(seed: int) -> None:
    gen = random.Random(seed)
    axes = {"rho": [0.1, 0.2, 0.3, 0.4][: gen.randint(1, 4)], "gamma": [1, 2, 3][: gen.randint(1, 3)],
            "seed": [0, 1][: gen.randint(1, 2)]}
    every = points(axes)
    covered = {p for p in every if gen.random() < 0.5}
    rects = rectangles(axes, covered)
    tiles = [points(r) for r in rects]
    assert set().union(*tiles) == every - covered
    assert sum(len(t) for t in tiles) == len(every - covered)  # disjoint
    for rect in rects:
        assert list(rect) == list(axes) and all(rect[a] for a in axes)


def test_rectangles_of_a_grown_axis() -> None:
    old = {"rho": [0.2, 0.5], "gamma": [1, 4]}
    grown = {"rho": [0.2, 0.5, 0.8], "gamma": [1, 2, 4]}
    assert rectangles(grown, set()) == [grown]
    rects = rectangles({"rho": grown["rho"], "gamma": old["gamma"]}, points(old))
    assert rects == [{"rho": [0.8], "gamma": [1, 4]}]
    rects = rectangles(grown, points(old))
    assert sorted(map(json.dumps, rects)) == sorted(map(json.dumps, [
        {"rho": [0.2, 0.5], "gamma": [2]}, {"rho": [0.8], "gamma": [1, 2, 4]}]))
    assert rectangles(old, points(grown)) == []


SECTION = {"n": [16], "d": [3], "rho": [0.2, 0.5], "gamma": [1.0, 4.0], "seeds": 2}


def plan_of(section: dict, **top) -> object:
    return load_sweep({"dtype": "float64", **top, "experiments": {"critical_scaling": section}}).plans[
        "critical_scaling"]


def run_missing(plan, results: Path) -> list[str]:
    """Run the jobs of ``plan`` whose stores are missing; their paths."""
    ran = []
    for path, spec in plan.jobs(results).items():
        store = results / "critical_scaling" / "runs" / f"{path}.zarr"
        if not store.exists():
            run_job(spec, store, device="cpu", progress=False)
            ran.append(path)
    return ran


def test_plan_reuses_stores_and_reruns_exactly_what_changed(tmp_path: Path) -> None:
    results = tmp_path / "results"
    assert len(run_missing(plan_of(SECTION), results)) == 2

    grown = {**SECTION, "rho": [0.2, 0.5, 0.8], "gamma": [1.0, 2.0, 4.0]}
    new = plan_of(grown).jobs(results)
    ran = run_missing(plan_of(grown), results)
    assert len(new) == 2 * 3 and len(ran) == 2 * 2  # per seed: the old block and two new ones
    specs = [new[p] for p in ran]
    assert sorted((s.grid["rho"], s.grid["gamma"]) for s in specs if s.seeds == [0]) == [
        ([0.2, 0.5], [2.0]), ([0.8], [1.0, 2.0, 4.0])]

    # The grown sweep equals a fresh single-block run of the same grid, exactly.
    plan = plan_of(grown)
    grid = {**plan.grid, "seed": plan.seeds}
    stores = [results / "critical_scaling" / "runs" / f"{p}.zarr" for p in plan.jobs(results)]
    grown_sweep = open_store(collect(stores, tmp_path / "grown.zarr", grid)).load()
    fresh = run_missing(plan_of(grown), tmp_path / "fresh")
    fresh_sweep = open_store(collect([tmp_path / "fresh" / "critical_scaling" / "runs" / f"{p}.zarr" for p in fresh],
                                     tmp_path / "fresh.zarr", grid)).load()
    for var in fresh_sweep.data_vars:
        np.testing.assert_array_equal(grown_sweep[var].values, fresh_sweep[var].values, err_msg=var)
    assert not np.isnan(grown_sweep["lambda"].values).any()

    # A smaller grid reuses the big stores and collect keeps only its values.
    small = plan_of({**SECTION, "rho": [0.5]})
    assert run_missing(small, results) == []
    small_stores = [results / "critical_scaling" / "runs" / f"{p}.zarr" for p in small.jobs(results)]
    sub = open_store(collect(small_stores, tmp_path / "small.zarr", {**small.grid, "seed": small.seeds})).load()
    np.testing.assert_array_equal(sub["eta"].values, fresh_sweep["eta"].sel(rho=[0.5], gamma=[1.0, 4.0]).values)

    # Options without effect on these jobs rerun nothing; options with effect rerun every job.
    for section, top in (({**grown, "probes": 3}, {}), (grown, {"block_mib": 1}),
                         ({**grown, "pair_subsample_n": 17}, {}), ({**grown, "quantile_tokens": 16}, {})):
        assert all((results / "critical_scaling" / "runs" / f"{p}.zarr").exists()
                   for p in plan_of(section, **top).jobs(results)), (section, top)
    changed = plan_of({**grown, "noise": "standard"}).jobs(results)
    assert len(changed) == 2 and not any((results / "critical_scaling" / "runs" / f"{p}.zarr").exists()
                                         for p in changed)


def test_option_reruns_only_the_jobs_it_affects() -> None:
    """pair_subsample_n matters only through which n exceed it: only those jobs change identity."""
    section = {"n": [16, 64], "d": [3], "rho": [0.5], "gamma": [1.0], "seeds": 1}
    base = plan_of({**section, "pair_subsample_n": 32}).jobs()
    assert set(plan_of({**section, "pair_subsample_n": 48}).jobs()) == set(base)  # same n subsampled
    lower = plan_of({**section, "pair_subsample_n": 8}).jobs()  # now n = 16 is subsampled too
    assert {p.split("/")[0] for p in set(lower) - set(base)} == {"n~16"}
    assert len(lower) == 2
    batched = {**section, "wildcards": ["d", "seed"]}  # both n in one job: any change of the set counts
    assert set(plan_of({**batched, "pair_subsample_n": 32}).jobs()) != set(
        plan_of({**batched, "pair_subsample_n": 8}).jobs())


# ------------------------------------------------------------------ snakemake end to end


def snakemake(workdir: Path, config: dict, *args: str) -> subprocess.CompletedProcess:
    (workdir / "config.yaml").write_text(yaml.safe_dump(config))
    cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory", str(workdir),
           "--configfile", str(workdir / "config.yaml"), "--cores", "2",
           "results/critical_scaling/sweep.zarr", *args]
    result = processes.run(cmd, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def simulate_jobs(run: subprocess.CompletedProcess) -> int:
    """The simulate jobs in a run's job stats (stdout of a dry run, stderr of a real one)."""
    match = re.search(r"^simulate\s+(\d+)$", run.stdout + run.stderr, re.MULTILINE)
    return int(match.group(1)) if match else 0


def planned_simulate_jobs(workdir: Path, config: dict) -> int:
    return simulate_jobs(snakemake(workdir, config, "--dry-run"))


@pytest.mark.slow
def test_snakemake_runs_only_the_new_values(tmp_path: Path) -> None:
    config = {"device": "cpu", "dtype": "float64", "experiments": {"critical_scaling": dict(SECTION)}}
    section = config["experiments"]["critical_scaling"]
    work = tmp_path / "grown"
    work.mkdir()
    snakemake(work, config)
    runs = work / "results" / "critical_scaling" / "runs"
    first = {p: p.stat().st_mtime_ns for p in runs.rglob("*.zarr")}
    assert len(first) == 2

    # (change, simulate jobs expected): per point (n, d, seed), one block per new rectangle.
    steps = [
        ({"rho": [0.2, 0.5, 0.8]}, 2),            # 2 points x 1 block
        ({"gamma": [1.0, 2.0, 4.0]}, 2),          # 2 points x 1 block (all three rho)
        ({"seeds": 3}, 1),                        # 1 new point
        ({"d": [3, 5]}, 3),                       # 3 new points
    ]
    for change, expected in steps:
        section.update(change)
        assert simulate_jobs(snakemake(work, config)) == expected, change
    assert "Nothing to be done" in snakemake(work, config, "--dry-run").stdout
    assert {p: p.stat().st_mtime_ns for p in first} == first, "an old store was rewritten"

    # Settings that do not change numbers rerun nothing; a result option reruns every job.
    assert planned_simulate_jobs(work, {**config, "block_mib": 1, "threads": 2}) == 0
    assert planned_simulate_jobs(work, {**config, "experiments": {"critical_scaling": {
        **section, "probes": 4}}}) == 0
    assert planned_simulate_jobs(work, {**config, "experiments": {"critical_scaling": {
        **section, "noise": "standard"}}}) == 2 * 3

    # The grown sweep holds every value and equals a from-scratch run exactly.
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    snakemake(fresh, config)
    grown = open_store(work / "results" / "critical_scaling" / "sweep.zarr").load()
    scratch = open_store(fresh / "results" / "critical_scaling" / "sweep.zarr").load()
    assert dict(grown["lambda"].sizes) == {"n": 1, "d": 2, "seed": 3, "rho": 3, "gamma": 3, "alpha": 1}
    assert grown.attrs["runs"] == 2 + 2 + 2 + 1 + 3 and scratch.attrs["runs"] == 6
    for var in scratch.data_vars:
        np.testing.assert_array_equal(grown[var].values, scratch[var].values, err_msg=var)


@pytest.mark.slow
def test_a_boundary_option_reruns_the_boundary_alone(tmp_path: Path) -> None:
    """The template experiment of docs/extending.md, whose ``level`` is a boundary option
    (Experiment.boundary_options): another level reruns the boundary and its figure, and no
    simulate, collect or reduce job; no run store is rewritten, and beta* is where the seed mean
    of sweep.zarr crosses the new level (read here by helpers.workflow_runs.crossing), below the
    old beta* (the sharpness rises with beta)."""
    site, work = template_experiment(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(site)}
    config = work / "config" / "toy.yaml"
    cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--cores", "2", "--configfile",
           str(config)]

    def snakemake(*args: str) -> str:
        done = processes.run([*cmd, *args], cwd=work, env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout + done.stderr

    snakemake()
    results = work / "results" / "toy_attention"
    runs = {p: p.stat().st_mtime_ns for p in (results / "runs").rglob("*.zarr")}
    assert len(runs) == 2  # one job per n
    before = open_store(results / "boundary.zarr").load()
    assert before.attrs["level"] == 0.5  # the default
    section = yaml.safe_load(config.read_text())
    section["experiments"]["toy_attention"]["level"] = 0.4
    config.write_text(yaml.safe_dump(section))
    again = snakemake()
    ran = sorted(line.split()[1].rstrip(":") for line in again.splitlines() if line.startswith("localrule "))
    assert ran == ["all", "boundary", "figure"], again[-3000:]
    assert {p: p.stat().st_mtime_ns for p in runs} == runs, "a run store was rewritten"
    assert "Nothing to be done" in snakemake("--dry-run")

    sweep = open_store(results / "sweep.zarr").load()
    boundary = open_store(results / "boundary.zarr").load()
    assert "level" not in sweep.attrs and boundary.attrs["level"] == 0.4
    mean = sweep["sharpness"].mean("seed")
    for n in sweep["n"].values:
        want = crossing(sweep["beta"].values, mean.sel(n=n).values, 0.4)
        assert float(boundary["beta_star"].sel(n=n)) == pytest.approx(want, rel=1e-6), n
        assert boundary["beta_star"].sel(n=n) < before["beta_star"].sel(n=n), n


def test_collect_in_slabs_or_processes_equals_one_slab_and_refuses_holes(tmp_path: Path) -> None:
    """Truth: one slab read by this process; slabs of one value, and stores read by two
    reader processes, give the same arrays bit for bit."""
    plan = plan_of({**SECTION, "n": [16, 24], "d": [3, 4], "seeds": 3})  # seed the longest: the slab dimension
    results = tmp_path / "results"
    stores = [results / "critical_scaling" / "runs" / f"{p}.zarr" for p in run_missing(plan, results)]
    grid = {**plan.grid, "seed": plan.seeds}
    whole = open_store(collect(stores, tmp_path / "whole.zarr", grid)).load()
    sliced = open_store(collect(stores, tmp_path / "sliced.zarr", grid, slab_mib=0)).load()  # 1 value a slab
    pooled = open_store(collect(stores, tmp_path / "pooled.zarr", grid, slab_mib=0, workers=2,
                                stores_per_worker=1)).load()
    assert whole["lambda"].encoding["chunks"] != sliced["lambda"].encoding["chunks"]
    # one shard (one file) a slab, in chunks of one (n, d) point: the seed slab is whole here
    assert whole["lambda"].dims[:3] == ("n", "d", "seed")
    assert whole["lambda"].encoding["shards"] == whole["lambda"].shape
    assert whole["lambda"].encoding["chunks"] == (1, 1, *whole["lambda"].shape[2:])
    assert len(list((tmp_path / "whole.zarr" / "lambda").rglob("c/*/*/*/*/*/*"))) == 1
    for var in whole.data_vars:
        np.testing.assert_array_equal(whole[var].values, sliced[var].values, err_msg=var)
        np.testing.assert_array_equal(whole[var].values, pooled[var].values, err_msg=var)
    with pytest.raises(ValueError, match="grid points are in no run store"):
        collect(stores[1:], tmp_path / "holed.zarr", grid)
    assert not (tmp_path / "holed.zarr").exists()


def test_collect_reads_each_archive_as_zarr_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Truth: zarr. Collect's reader gives every variable of a real run store, of a store with a
    compressed array, NaN padding, an absent chunk (zarr's fill value) and several dtypes, and of
    one with an array in two chunks, exactly as zarr reads it (dtype, shape, bits); the raw
    one-chunk arrays straight from the archive (not zarr), the others through zarr; and a sweep
    collected with zarr alone is identical."""
    plan = plan_of({**SECTION, "seeds": 2})
    results = tmp_path / "results"
    stores = [results / "critical_scaling" / "runs" / f"{p}.zarr" for p in run_missing(plan, results)]
    padded = np.full((3, 5), np.nan)
    padded[:, :2] = np.arange(6.0).reshape(3, 2)
    mixed = write_file(xr.Dataset({
        "padded": (("x", "y"), padded), "single": ("x", np.float32([1.5, -2, np.inf])),
        "count": ("x", np.int64([1, -2, 3])), "flag": ("x", [True, False, True]), "scalar": ((), 7.25),
        "empty": ("x", np.full(3, np.nan)), "big": ("z", np.linspace(0, 1, 20_000)),
    }), tmp_path / "mixed.zarr")
    with zipfile.ZipFile(mixed) as zf:
        assert "empty/c/0" not in zf.namelist() and zf.getinfo("big/c/0").compress_type == zipfile.ZIP_STORED
        assert zf.getinfo("big/c/0").file_size < 20_000 * 8  # zarr's zstd
    folder, tiled = tmp_path / "tiled", tmp_path / "tiled.zarr"  # a (2, 3) array in two chunks of (3, 2)
    xr.Dataset({"tiled": (("x", "y"), np.arange(6.0).reshape(2, 3))}).to_zarr(
        folder, zarr_format=3, consolidated=False, encoding={"tiled": {"chunks": (3, 2), "compressors": None}})
    with zipfile.ZipFile(tiled, "w") as zf:
        for file in (f for f in folder.rglob("*") if f.is_file()):
            zf.write(file, file.relative_to(folder).as_posix())
    raw = ["padded", "single", "count", "flag", "scalar"]
    for store in (*stores, mixed, tiled):
        ds = open_store(store).load()
        names = list(ds.data_vars)
        read = reader.read_stores([store], names)[0]
        for name in names:
            assert read[name].dtype == ds[name].dtype and read[name].shape == ds[name].shape, name
            assert read[name].tobytes() == ds[name].values.tobytes(), name
    assert reader.read_raw(stores[0], list(open_store(stores[0]).data_vars)) is not None
    assert reader.read_raw(mixed, raw) is not None
    for other in ("big", "empty"):
        assert reader.read_raw(mixed, [*raw, other]) is None
    assert reader.read_raw(tiled, ["tiled"]) is None

    grid = {**plan.grid, "seed": plan.seeds}
    fast = open_store(collect(stores, tmp_path / "fast.zarr", grid)).load()
    monkeypatch.setattr(reader, "read_raw", lambda path, variables: None)
    xr.testing.assert_identical(fast, open_store(collect(stores, tmp_path / "zarr.zarr", grid)).load())


def as_earlier_layout(store: Path) -> None:
    """Rewrite a run store as attnsweep wrote it before run stores were one file: a zarr v3
    directory store, zarr's default chunks, at the same path, with the ``.snakemake_timestamp``
    that Snakemake put in a directory output, both at the store's mtime."""
    ds = open_store(store).load()
    for var in ds.variables.values():
        var.encoding = {}
    stat = store.stat()
    store.unlink()
    ds.to_zarr(store, mode="w", zarr_format=3, consolidated=False)
    (store / ".snakemake_timestamp").touch()
    for path in (store / ".snakemake_timestamp", store):
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


@pytest.mark.slow
def test_a_tree_of_the_earlier_layout_reads_and_grows_without_recomputing(tmp_path: Path) -> None:
    """Run stores written as directories (the earlier layout) are read in place: Snakemake
    reruns none of them, collect gives the same sweep bit for bit, and a grown grid adds
    one-file stores beside them. ``attnsweep pack`` then rewrites them as one file each, with
    their values and mtimes: Snakemake has nothing to redo."""
    config = {"device": "cpu", "dtype": "float64", "experiments": {"critical_scaling": dict(SECTION)}}
    snakemake(tmp_path, config)
    out = tmp_path / "results" / "critical_scaling"
    before = open_store(out / "sweep.zarr").load()
    runs = sorted((out / "runs").rglob("*.zarr"))
    assert len(runs) == 2 and all(p.is_file() for p in runs)
    for store in runs:
        as_earlier_layout(store)
    shutil.rmtree(out / "sweep.zarr")
    again = snakemake(tmp_path, config)
    assert simulate_jobs(again) == 0 and "collect" in again.stderr
    assert all(p.is_dir() for p in runs)
    after = open_store(out / "sweep.zarr").load()
    for var in before.data_vars:
        np.testing.assert_array_equal(after[var].values, before[var].values, err_msg=var)

    config["experiments"]["critical_scaling"]["rho"] = [0.2, 0.5, 0.8]
    assert simulate_jobs(snakemake(tmp_path, config)) == 2
    stores = sorted(p for p in (out / "runs").rglob("*.zarr"))
    assert sum(p.is_dir() for p in stores) == 2 and sum(p.is_file() for p in stores) == 2
    grown = open_store(out / "sweep.zarr").load()
    for var in before.data_vars:
        np.testing.assert_array_equal(grown[var].sel(rho=[0.2, 0.5]).values, before[var].values, err_msg=var)
        assert np.isfinite(grown[var].sel(rho=0.8).values).any(), var

    old = {p: (open_store(p).load(), (p / ".snakemake_timestamp").stat().st_mtime_ns) for p in stores if p.is_dir()}
    packed = processes.run([sys.executable, "-m", "attnsweep.cli", "pack", "results"], cwd=tmp_path,
                            capture_output=True, text=True)
    assert packed.returncode == 0, packed.stderr
    assert "2 directory run stores packed into one file each" in packed.stdout
    for path, (ds, mtime_ns) in old.items():
        assert path.is_file() and path.stat().st_mtime_ns == mtime_ns
        xr.testing.assert_identical(open_store(path).load(), ds)
    assert "Nothing to be done" in snakemake(tmp_path, config, "--dry-run").stdout
