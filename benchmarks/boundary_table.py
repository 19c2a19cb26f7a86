"""A critical_scaling boundary.csv as the docs' table: gamma* (1 - rho) with its 95% interval.

    python benchmarks/boundary_table.py results/paper_refined/critical_scaling/boundary.csv --n 4096

One row per boundary (lambda, eta) and d, one column per chosen rho, and the median over every
rho with an estimate; then the simplex boundary of the same level (`gamma_star_simplex`, Theorem
2.3 at finite n), its range over rho per boundary and d. Rows without a crossing print "-".
"""

from __future__ import annotations

import argparse
import sys

import pandas as pd


def cell(row: pd.Series) -> str:
    if pd.isna(row["gamma_star"]):
        return "-"
    scale = 1 - row["rho"]
    return f"{row['gamma_star'] * scale:.3f} [{row['ci_low'] * scale:.3f}, {row['ci_high'] * scale:.3f}]"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv", help="results/<...>/critical_scaling/boundary.csv")
    parser.add_argument("--n", type=int, required=True)
    parser.add_argument("--rho", type=float, nargs="+", default=[0.05, 0.25, 0.5, 0.75, 0.95])
    args = parser.parse_args(argv)
    table = pd.read_csv(args.csv)
    table = table[(table["n"] == args.n) & (table["alpha"] == 0)]
    if table.empty:
        print(f"boundary_table: no rows with n = {args.n} and alpha = 0 in {args.csv}", file=sys.stderr)
        return 1
    print("| boundary | d | " + " | ".join(f"rho = {r:g}" for r in args.rho) + " | median over rho |")
    print("|---" * (3 + len(args.rho)) + "|")
    simplex = []
    for (observable, d), rows in table.groupby(["observable", "d"], sort=False):
        by_rho = rows.set_index(rows["rho"].round(6))
        cells = [cell(by_rho.loc[round(r, 6)]) if round(r, 6) in by_rho.index else "-" for r in args.rho]
        scaled = (rows["gamma_star"] * (1 - rows["rho"])).dropna()
        print(f"| {observable} | {d} | " + " | ".join(cells) + f" | {scaled.median():.3f} |")
        level = (rows["gamma_star_simplex"] * (1 - rows["rho"])).dropna()
        if not level.empty:
            simplex.append(f"{observable}, d = {d}: {level.min():.3f}-{level.max():.3f}")
    print("\nSimplex boundary of the same level, gamma* (1 - rho) over rho: " + "; ".join(simplex))
    return 0


if __name__ == "__main__":
    sys.exit(main())
