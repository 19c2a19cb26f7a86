"""What the jobs of one piece of a sweep cost, grouped by axes: the table of a piece in RESULTS.md.

A piece is a stretch of ``attnsweep refine`` (or ``snakemake``) between two stops; its jobs are the
run stores of ``RESULTS/EXPERIMENT/runs`` written at or after ``--since`` (the file's time; all of
them without it). Per value of the ``--by`` axes (each store's job spec holds its grid): jobs,
points (a job's grid sizes times its seeds), job time (the store's ``wall_time_s``: the job's own
clock, from its start to its store written) median and total, and total job time per point.

usage: python benchmarks/piece_stats.py RESULTS EXPERIMENT [--since 2026-11-27T11:05Z] [--by n d]
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import statistics
import sys
from collections import defaultdict
from datetime import datetime
from pathlib import Path

from attnsweep.stores.probe import root_attrs


def jobs(runs: Path, since: datetime | None) -> list[dict]:
    """Each finished run store under ``runs`` (written at or after ``since``): grid, seeds, wall time."""
    found = []
    for path in sorted(runs.rglob("*.zarr")):
        if path.name.startswith(".") or since and path.stat().st_mtime < since.timestamp():
            continue  # a dotted name is a job still running (or killed): not finished
        attrs = root_attrs(path)  # the root zarr.json alone, either layout
        spec = json.loads(attrs["job"])
        found.append({"grid": spec["grid"], "seeds": len(spec["seeds"]), "wall_time_s": float(attrs["wall_time_s"])})
    return found


def table(found: list[dict], by: list[str]) -> list[str]:
    """Markdown rows, one per value of the ``by`` axes (a job of several values counts under each)."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for job in found:
        missing = [axis for axis in by if axis not in job["grid"]]
        if missing:
            raise SystemExit(f"piece_stats: --by {' '.join(missing)}: not an axis of these jobs "
                             f"({', '.join(job['grid'])})")
        for key in itertools.product(*(job["grid"][axis] for axis in by)):
            groups[key].append(job)
    rows = [f"| ({', '.join(by)}) | jobs | points | job time, median | job time, total | a point |",
            "|---|---|---|---|---|---|"]
    for key in sorted(groups):
        members = groups[key]
        points = sum(_points(job) for job in members)
        times = [job["wall_time_s"] for job in members]
        rows.append(f"| {', '.join(f'{v:g}' for v in key)} | {len(members)} | {points} "
                    f"| {statistics.median(times):.3g} s | {sum(times) / 3600:.2f} h | {sum(times) / points:.3g} s |")
    return rows


def _points(job: dict) -> int:
    return math.prod(len(values) for values in job["grid"].values()) * job["seeds"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", type=Path)
    parser.add_argument("experiment")
    parser.add_argument("--since", type=datetime.fromisoformat, help="ISO time, e.g. 2026-11-27T11:05Z")
    parser.add_argument("--by", nargs="+", default=["n", "d"])
    args = parser.parse_args(argv)
    runs = args.results / args.experiment / "runs"
    if not runs.is_dir():
        raise SystemExit(f"piece_stats: {runs}: no such folder of run stores")
    found = jobs(runs, args.since)
    if not found:
        print(f"piece_stats: no finished run store under {runs}" + (f" since {args.since}" if args.since else ""))
        return 0
    print("\n".join(table(found, args.by)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
