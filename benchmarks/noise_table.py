"""A noisy_clustering boundary.csv as the docs' table: the crossings from uniform tokens and from one
point with their 95% intervals, one row per beta, one column per n, beside the mean field.

    python benchmarks/noise_table.py results/paper/noisy_d3/noisy_clustering/boundary.csv

Columns: beta, the mean field's K_c and spinodal K_s, K_uniform at each n of the file, K_point at each
n, and the mean field's own crossings of the level (uniform, point); K in the file's unit (K_# by
default). A cell is "estimate (low-high)", an open end said in words ("past the grid": nothing beyond
the estimate is rejected within the grid), the estimate and the reason its interval was declined,
or "-" where the seed mean does not cross. Below the table: the rows' seed counts and grid spacings
at the crossing, which the intervals rest on.
"""

from __future__ import annotations

import argparse

import pandas as pd

STARTS = ("K_uniform", "K_point")


def cell(row: pd.Series, name: str) -> str:
    if pd.isna(row[name]):
        return "-"
    text = f"{row[name]:.3f}"
    low, high = row[f"{name}_low"], row[f"{name}_high"]
    if pd.isna(low) and pd.isna(high):
        return f"{text} ({row[f'{name}_flag']})"
    low = f"{low:.3f}" if pd.notna(low) else "below the grid"
    high = f"{high:.3f}" if pd.notna(high) else "past the grid"
    return f"{text} ({low}-{high})"


def table(boundary: pd.DataFrame) -> list[str]:
    ns = sorted(boundary["n"].unique())
    head = ["beta", "K_c (mf)", "K_s (mf)"] + [f"{name} n = {n}" for name in STARTS for n in ns]
    lines = ["| " + " | ".join(head + ["mf crossing: uniform, point"]) + " |", "|---" * (len(head) + 1) + "|"]
    for beta, rows in boundary.groupby("beta"):
        rows = rows.set_index("n")
        first = rows.iloc[0]
        cells = [f"{beta:g}", f"{first['K_c']:.3f}", f"{first['K_s']:.3f}"]
        cells += [cell(rows.loc[n], name) if n in rows.index else "" for name in STARTS for n in ns]
        cells.append(", ".join(f"{first[f'{name}_mean_field']:.3f}" for name in STARTS))
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("boundary", help="a noisy_clustering boundary.csv")
    args = parser.parse_args(argv)
    boundary = pd.read_csv(args.boundary)
    print("\n".join(table(boundary)))
    basis = boundary[["n", "beta"] + [f"{name}_{part}" for name in STARTS for part in ("seeds", "spacing")]]
    print("\n" + basis.to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
