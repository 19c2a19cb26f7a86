"""The same simulated points in two results trees, side by side: every (n, d, rho, gamma, alpha,
seed) of an experiment that both trees' run stores hold, and how far one variable differs.

    python benchmarks/compare_points.py results/long_context results/gpu_long_context

Two sweeps of critical_scaling draw the same tokens for the same (n, d, seed) whatever else
they hold (``attnsweep.run.rng``: a point's random numbers depend on its own coordinates, and the
tokens are drawn on the CPU), so two trees computed on different devices, or with and without
eta, must agree up to the order of the float arithmetic: this checks one device against the
other on every point they share. Prints, per (n, d), the points shared, the largest absolute
and relative difference, and the devices that computed each side.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from attnsweep.stores.io import open_store

POINT = ["n", "d", "rho", "gamma", "alpha", "seed"]


def points(results: str, experiment: str, var: str) -> pd.DataFrame:
    """``var`` at every point of the run stores under ``results/experiment/runs``, with the
    device that computed it (a point held twice, by two rounds' stores, is kept once)."""
    frames = []
    for path in sorted(Path(results, experiment, "runs").rglob("*.zarr")):
        store = open_store(path)
        frame = store[var].to_dataframe()[[var]].dropna().reset_index()
        frames.append(frame.assign(device=store.attrs.get("device_name", store.attrs.get("device", "?"))))
    if not frames:
        raise SystemExit(f"compare_points: no run stores under {Path(results, experiment, 'runs')}")
    return pd.concat(frames).drop_duplicates(POINT).set_index(POINT)


def compare(a: pd.DataFrame, b: pd.DataFrame, var: str) -> pd.DataFrame:
    both = a.merge(b, left_index=True, right_index=True, suffixes=("_a", "_b"))
    diff = (both[f"{var}_a"] - both[f"{var}_b"]).abs()
    both = both.assign(abs_diff=diff, rel_diff=diff / both[f"{var}_b"].abs().where(lambda x: x > 0))
    return both.groupby(["n", "d"]).agg(points=("abs_diff", "size"), max_abs=("abs_diff", "max"),
                                        max_rel=("rel_diff", "max"), device_a=("device_a", "first"),
                                        device_b=("device_b", "first"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("a", help="a results directory (the config's results:)")
    parser.add_argument("b", help="another")
    parser.add_argument("--experiment", default="critical_scaling")
    parser.add_argument("--var", default="lambda", help="the variable compared (default lambda)")
    args = parser.parse_args(argv)
    table = compare(points(args.a, args.experiment, args.var), points(args.b, args.experiment, args.var), args.var)
    if table.empty:
        print("no point in common", file=sys.stderr)
        return 1
    with pd.option_context("display.width", 200, "display.float_format", lambda x: f"{x:.3g}"):
        print(table.to_string())
    print(f"all {int(table['points'].sum())} shared points: largest |a - b| {np.nanmax(table['max_abs']):.3g}, "
          f"relative {np.nanmax(table['max_rel']):.3g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
