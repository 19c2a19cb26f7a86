"""Scale of the workflow itself, not of the kernels: planning, reducing and reading the state of
10^3 to 10^5 jobs.

- ``dryrun``: a generated config with ``--jobs`` simulate jobs (n x d x seeds, every other axis
  batched) and ``snakemake --dry-run`` on it in an empty directory, as a user types it (the
  default profile applies). Target: <= 20 s for 10^4 jobs. The printed job count is checked.
- ``reduce``: ``--stores`` run stores (copies of one real job's store at distinct (n, d, seed),
  so the reduction reads real variables and shapes) reduced by the workflow's own steps
  (``collect`` -> ``reduce`` -> ``boundary``) in one fresh process. Targets: <= 20 s and
  <= 2 GB peak resident memory for 10^3 stores, <= 60 s and 4 GB for 10^4.
- ``status``: ``attnsweep status`` on a config of ``--jobs`` simulate jobs whose results tree
  holds every store (each a one-file store whose job spec and fanned-out coordinates are that
  job's, the other values copied from one real job: :func:`make_tree`). Target: <= 5 s for
  10^4 jobs.
- ``verify``: ``attnsweep verify`` on the same tree (every store read and checked; no
  aggregates). Target: <= 60 s for 10^4 run stores.

Each figure is the median of ``--repeats`` runs, timed from outside (``bench_process.run``).

usage: python benchmarks/bench_scale.py dryrun [--jobs 10000] [--repeats 3]
       python benchmarks/bench_scale.py reduce [--stores 1000] [--repeats 3] [--keep DIR]
       python benchmarks/bench_scale.py reduce-in-process DIR   (the step times of one run)
       python benchmarks/bench_scale.py status [--jobs 10000] [--repeats 3]
       python benchmarks/bench_scale.py verify [--jobs 10000] [--repeats 3] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import yaml
from bench_process import median_of

REPO = Path(__file__).resolve().parents[1]
WORKERS = len(os.sched_getaffinity(0))  # collect readers: every core, as the collect rule takes them
RHO = {"start": 0.0, "stop": 0.9, "num": 10}
GAMMA = {"start": 0.5, "stop": 12.0, "num": 12}


def grid_for(count: int) -> dict:
    """n, d and seeds whose product is ``count`` (10 n, 10 d, count/100 seeds)."""
    seeds = count // 100
    if seeds * 100 != count:
        raise SystemExit("--jobs/--stores must be a multiple of 100")
    return {"n": [16 * (k + 1) for k in range(10)], "d": list(range(2, 12)), "rho": RHO, "gamma": GAMMA,
            "seeds": seeds}


def dryrun(jobs: int, repeats: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp, "config.yaml")
        config.write_text(yaml.safe_dump({"device": "cpu", "experiments": {"critical_scaling": grid_for(jobs)}}))
        cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "--directory", tmp,
               "--configfile", str(config), "--cores", "2", "--dry-run"]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
        planned = int(re.search(r"^simulate\s+(\d+)$", out, re.MULTILINE).group(1))
        if planned != jobs:
            raise SystemExit(f"planned {planned} simulate jobs, expected {jobs}")
        wall, low, high, peak = median_of(cmd, repeats)
    print(f"dry run, {jobs} simulate jobs: median {wall:.2f} s (min {low:.2f}, max {high:.2f}), "
          f"peak {peak:.2f} GiB, {repeats} runs")


def make_stores(folder: Path, count: int) -> list[Path]:
    """``count`` run stores: one real job's store copied to distinct (n, d, seed) coordinates."""
    from attnsweep.plan.config import load_sweep
    from attnsweep.run.job import run_job
    from attnsweep.stores.io import open_store, write_file

    grid = grid_for(count)
    plan = load_sweep({"device": "cpu", "experiments": {"critical_scaling": {**grid, "n": [16], "d": [2],
                                                                              "seeds": 1}}}).plans["critical_scaling"]
    (spec,) = plan.jobs().values()
    source = open_store(run_job(spec, folder / "source.zarr", device="cpu", progress=False)).load()
    paths = []
    for index, (n, d, seed) in enumerate((n, d, s) for n in grid["n"] for d in grid["d"]
                                         for s in range(grid["seeds"])):
        job = {**json.loads(source.attrs["job"]), "seeds": [seed]}
        job["grid"] = {**job["grid"], "n": [n], "d": [d]}
        copy = source.assign_coords(n=[n], d=[d], seed=[seed]).assign_attrs(job=json.dumps(job))
        paths.append(write_file(copy, folder / "runs" / f"{index:05d}.zarr"))
    return paths


def reduce_stores(folder: Path) -> None:
    """The workflow's reduction steps on every store in ``folder/runs`` (one timed process); the
    seconds of each step on stderr."""
    import time

    from attnsweep.reduce import aggregate

    start = time.perf_counter()
    runs = sorted((folder / "runs").glob("*.zarr"))
    steps = {
        "collect": lambda: aggregate.collect(runs, folder / "sweep.zarr", workers=WORKERS),
        "reduce": lambda: aggregate.reduce(folder / "sweep.zarr", folder / "summary.zarr"),
        "boundary": lambda: aggregate.boundary(folder / "sweep.zarr", folder / "summary.zarr",
                                               folder / "boundary.csv", folder / "boundary.zarr"),
    }
    for name, step in steps.items():
        begin = time.perf_counter()
        step()
        print(f"{name} {time.perf_counter() - begin:.2f} s", file=sys.stderr)
    print(f"steps {time.perf_counter() - start:.2f} s (imports before them not counted)", file=sys.stderr)


def reduce(stores: int, repeats: int, keep: Path | None) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = keep or Path(tmp)
        if not (folder / "runs").is_dir():
            make_stores(folder, stores)
        cmd = [sys.executable, __file__, "reduce-in-process", str(folder)]
        wall, low, high, peak = median_of(cmd, repeats)
        rows = len(Path(folder, "boundary.csv").read_text().splitlines()) - 1
        files = {name: sum(len(f) for _, _, f in os.walk(folder / name)) for name in ("sweep.zarr", "summary.zarr")}
    print(f"reduce {stores} stores (collect, reduce, boundary; {rows} boundary rows): median {wall:.2f} s "
          f"(min {low:.2f}, max {high:.2f}), peak {peak:.2f} GiB, {repeats} runs; files {files}")


def make_tree(folder: Path, jobs: int) -> Path:
    """A config of ``jobs`` simulate jobs in ``folder`` whose results tree holds every store: one
    real job's store copied under each job's spec, its fanned-out coordinates (n, d, seed) set to
    the job's, entry by entry (a store of its own per job, as ``attnsweep verify`` checks, without
    running zarr 10^4 times). The config's path."""
    from attnsweep.plan.config import load_sweep
    from attnsweep.run.job import run_job

    config = {"device": "cpu", "results": str(folder / "results"), "logs": str(folder / "logs"),
              "experiments": {"critical_scaling": grid_for(jobs)}}
    Path(folder, "config.yaml").write_text(yaml.safe_dump(config))
    sweep = load_sweep(config)
    specs = sweep.plans["critical_scaling"].jobs()
    source = run_job(next(iter(specs.values())), Path(folder, "source.zarr"), device="cpu", progress=False)
    with zipfile.ZipFile(source) as zf:
        entries = {name: zf.read(name) for name in zf.namelist()}
    root = json.loads(entries["zarr.json"])
    dtypes = {axis: json.loads(entries[f"{axis}/zarr.json"])["data_type"] for axis in ("n", "d", "seed")}
    for path, spec in specs.items():  # the source's arrays under each job's own spec and coordinates
        root["attributes"]["job"] = json.dumps(spec.to_dict())
        coords = {f"{axis}/c/0": np.asarray(values, dtypes[axis]).tobytes()
                  for axis, values in (("n", spec.grid["n"]), ("d", spec.grid["d"]), ("seed", spec.seeds))}
        store = Path(sweep.results, "critical_scaling", "runs", f"{path}.zarr")
        store.parent.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(store, "w") as zf:
            for name, data in sorted({**entries, **coords, "zarr.json": json.dumps(root).encode()}.items()):
                zf.writestr(name, data)
    return Path(folder, "config.yaml")


def status(jobs: int, repeats: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        make_tree(Path(tmp), jobs)
        os.chdir(tmp)
        cmd = [sys.executable, "-m", "attnsweep.cli", "status", "config.yaml"]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
        if f"{jobs} jobs: {jobs} done" not in out:
            raise SystemExit(f"status did not count {jobs} done jobs:\n{out}")
        wall, low, high, peak = median_of(cmd, repeats)
    print(f"attnsweep status, {jobs} jobs, all done: median {wall:.2f} s (min {low:.2f}, max {high:.2f}), "
          f"peak {peak:.2f} GiB, {repeats} runs")


def verify(jobs: int, repeats: int, keep: Path | None) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = keep or Path(tmp)
        config = folder / "config.yaml"
        if not config.is_file():
            folder.mkdir(parents=True, exist_ok=True)
            make_tree(folder, jobs)
        cmd = [sys.executable, "-m", "attnsweep.cli", "verify", str(config)]
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode or "every store sound" not in out.stdout:
            raise SystemExit(f"verify found the tree bad:\n{out.stdout[-3000:]}{out.stderr[-3000:]}")
        wall, low, high, peak = median_of(cmd, repeats)
    print(f"attnsweep verify, {jobs} run stores, all sound: median {wall:.2f} s (min {low:.2f}, max {high:.2f}), "
          f"peak {peak:.2f} GiB, {repeats} runs")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    p = sub.add_parser("dryrun")
    p.add_argument("--jobs", type=int, default=10_000)
    p.add_argument("--repeats", type=int, default=3)
    p = sub.add_parser("reduce")
    p.add_argument("--stores", type=int, default=1000)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--keep", type=Path, help="make (or reuse) the run stores in this folder, and keep them")
    p = sub.add_parser("status")
    p.add_argument("--jobs", type=int, default=10_000)
    p.add_argument("--repeats", type=int, default=3)
    p = sub.add_parser("verify")
    p.add_argument("--jobs", type=int, default=10_000)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--keep", type=Path, help="make (or reuse) the results tree in this folder, and keep it")
    p = sub.add_parser("reduce-in-process")  # the timed child of `reduce`
    p.add_argument("folder", type=Path)
    args = parser.parse_args()
    if args.what == "dryrun":
        dryrun(args.jobs, args.repeats)
    elif args.what == "reduce":
        reduce(args.stores, args.repeats, args.keep)
    elif args.what == "status":
        status(args.jobs, args.repeats)
    elif args.what == "verify":
        verify(args.jobs, args.repeats, args.keep)
    else:
        reduce_stores(args.folder)


if __name__ == "__main__":
    main()
