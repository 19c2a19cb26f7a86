"""Files and bytes a sweep leaves on disk, per job and per sweep, in either run-store layout.

Reads a results tree (the default config's: ``snakemake --cores all``) and counts, per
experiment: the run stores, the files and bytes under ``runs/``, and the aggregates
(``sweep.zarr``, ``summary.zarr``, ``boundary.*``, ``figures/``). Each run store is written again
in a scratch directory in both layouts and counted there: as the earlier ``write_atomic`` wrote
it (a zarr v3 directory store, zarr's default chunks) and as ``write_file`` writes it now, so the
table holds for the code at hand whichever layout the tree has. Bytes are apparent sizes
(``st_size``) and allocated blocks (``st_blocks``): a small file takes a whole block on most
filesystems, so many small files cost more than their bytes.

usage: python benchmarks/bench_files.py results/
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

from attnsweep.stores.io import open_store, write_file


def tally(root: Path) -> tuple[int, int, int]:
    """Files, apparent bytes and allocated bytes under ``root`` (a file or a directory)."""
    paths = [root] if root.is_file() else [Path(d, f) for d, _, files in os.walk(root) for f in files]
    stats = [p.stat() for p in paths]
    return len(paths), sum(s.st_size for s in stats), sum(s.st_blocks * 512 for s in stats)


def rewritten(store: Path, scratch: Path) -> tuple[Path, Path]:
    """The run store written as the earlier layout wrote it (a directory store, default chunks)
    and as this one does (one file)."""
    ds = open_store(store).load()
    for var in ds.variables.values():
        var.encoding = {}
    directory = scratch / "run.zarr"
    ds.to_zarr(directory, mode="w", zarr_format=3, consolidated=False)
    return directory, write_file(ds, scratch / "run-file.zarr")


def mib(n: int) -> str:
    return f"{n / 2**20:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path)
    args = parser.parse_args()
    print("| experiment | jobs | run files before -> after (per job, max) | runs MiB before -> after "
          "(apparent / allocated) | aggregate files (sweep, summary, boundary, figures) "
          "| sweep files before -> after |")
    print("|---|---|---|---|---|---|")
    for folder in sorted(p for p in args.results.iterdir() if (p / "runs").is_dir()):
        stores = sorted(p for p in (folder / "runs").rglob("*.zarr") if not p.name.startswith("."))
        before, after = [], []
        for store in stores:
            with tempfile.TemporaryDirectory() as tmp:
                directory, single = rewritten(store, Path(tmp))
                before.append(tally(directory))
                after.append(tally(single))
        aggregates = {name: tally(folder / name)[0] for name in ("sweep.zarr", "summary.zarr", "boundary.zarr",
                                                                   "boundary.csv", "figures")
                      if (folder / name).exists()}
        agg = sum(aggregates.values())
        files_b, files_a = sum(b[0] for b in before), sum(a[0] for a in after)
        print(f"| {folder.name} | {len(stores)} | {files_b} -> {files_a} ({max(b[0] for b in before)} -> "
              f"{max(a[0] for a in after)}) | {mib(sum(b[1] for b in before))} / {mib(sum(b[2] for b in before))} -> "
              f"{mib(sum(a[1] for a in after))} / {mib(sum(a[2] for a in after))} | {agg} "
              f"({', '.join(str(v) for v in aggregates.values())}) | {files_b + agg} -> {files_a + agg} |")


if __name__ == "__main__":
    main()
