"""Compare two critical_scaling boundary tables row by row: a refined sweep against a dense one
(independent seeds), and each against the finite-n simplex boundary.

    python benchmarks/compare_boundaries.py REFINED/boundary.csv DENSE/boundary.csv

Rows are matched on (observable, n, d, rho, alpha). Per row: both estimates with their 95%
intervals (docs/statistics.md), whether the intervals overlap, and z = (a - b) / sqrt(s_a^2 + s_b^2)
with s = (high - low) / (2 x 1.96), the normal reading of each interval (the t test's quantile is
t_{S-1} >= 1.96, at most 1.21 times it at 8 seeds, so z errs small): two independent estimates of one crossing
give |z| < 1.96 in about 95% of rows. Then gamma* (1 - rho) and the simplex
boundary's distance from the refined estimate in its own half-widths.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import pandas as pd

KEYS = ["observable", "n", "d", "rho", "alpha"]


def compare(refined: pd.DataFrame, dense: pd.DataFrame) -> pd.DataFrame:
    both = refined.merge(dense, on=KEYS, suffixes=("_refined", "_dense")).dropna(
        subset=["gamma_star_refined", "gamma_star_dense"])
    sigma = {s: (both[f"gamma_star_high_{s}"] - both[f"gamma_star_low_{s}"]) / (2 * 1.96)
             for s in ("refined", "dense")}
    both["overlap"] = ((both["gamma_star_low_refined"] <= both["gamma_star_high_dense"])
                       & (both["gamma_star_low_dense"] <= both["gamma_star_high_refined"]))
    both["z"] = (both["gamma_star_refined"] - both["gamma_star_dense"]) / np.hypot(sigma["refined"], sigma["dense"])
    half = (both["gamma_star_high_refined"] - both["gamma_star_low_refined"]) / 2
    both["half_width_pct"] = 100 * half / both["gamma_star_refined"]
    both["scaled"] = both["gamma_star_refined"] * (1 - both["rho"])
    both["simplex_in_half_widths"] = (both["gamma_star_simplex_refined"] - both["gamma_star_refined"]) / half
    return both


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("refined")
    parser.add_argument("dense")
    args = parser.parse_args(argv)
    rows = compare(pd.read_csv(args.refined), pd.read_csv(args.dense))
    if rows.empty:
        print("no row with a crossing in both tables", file=sys.stderr)
        return 1
    shown = rows[KEYS[:4] + ["gamma_star_refined", "gamma_star_low_refined", "gamma_star_high_refined",
                             "gamma_star_dense", "gamma_star_low_dense", "gamma_star_high_dense", "overlap", "z",
                             "half_width_pct", "scaled",
                             "gamma_star_simplex_refined", "simplex_in_half_widths"]]
    print(shown.to_markdown(index=False, floatfmt=".4g"))
    print(f"\n{int(rows['overlap'].sum())} of {len(rows)} rows: the two 95% intervals overlap; "
          f"{int((rows['z'].abs() < 1.96).sum())} of {len(rows)} have |z| < 1.96")
    return 0


if __name__ == "__main__":
    sys.exit(main())
