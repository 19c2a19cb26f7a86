"""A critical_scaling boundary.csv as the docs' table: gamma* (1 - rho) with its 95% interval.

    python benchmarks/boundary_table.py results/paper_refined/critical_scaling/boundary.csv --n 1024
    python benchmarks/boundary_table.py results/finite_size/critical_scaling/boundary.csv --rho 0.05 0.25

With ``--n``: one row per boundary (lambda, eta) and d, one column per chosen rho, and the median
over every rho with an estimate. Without it: one row per boundary, d and chosen rho, one column per
n of the file (how the boundary moves with the context length). Then the simplex boundary of the
same level (`gamma_star_simplex`, Theorem 2.3 at finite n), its range per boundary and d over the
rows shown. Rows without a crossing print "-".
"""

from __future__ import annotations

import argparse
import sys

import pandas as pd


def cell(row: pd.Series) -> str:
    if pd.isna(row["gamma_star"]):
        return "-"
    scale = 1 - row["rho"]
    low, high = row["gamma_star_low"] * scale, row["gamma_star_high"] * scale
    return f"{row['gamma_star'] * scale:.3f} [{low:.3f}, {high:.3f}]"


def cells(rows: pd.DataFrame, by: str, keys: list) -> list[str]:
    """``rows``' cell at each of ``keys`` of column ``by`` ("-" where it has none)."""
    indexed = rows.set_index(rows[by].round(6))
    return [cell(indexed.loc[round(k, 6)]) if round(k, 6) in indexed.index else "-" for k in keys]


def against_rho(table: pd.DataFrame, rhos: list[float]) -> list[str]:
    lines = ["| boundary | d | " + " | ".join(f"rho = {r:g}" for r in rhos) + " | median over rho |",
             "|---" * (3 + len(rhos)) + "|"]
    for (observable, d), rows in table.groupby(["observable", "d"], sort=False):
        scaled = (rows["gamma_star"] * (1 - rows["rho"])).dropna()
        lines.append(f"| {observable} | {d} | " + " | ".join(cells(rows, "rho", rhos)) + f" | {scaled.median():.3f} |")
    return lines


def against_n(table: pd.DataFrame, rhos: list[float]) -> list[str]:
    ns = sorted(table["n"].unique())
    lines = ["| boundary | d | rho | " + " | ".join(f"n = {n}" for n in ns) + " |", "|---" * (3 + len(ns)) + "|"]
    for (observable, d, rho), rows in table.groupby(["observable", "d", table["rho"].round(6)], sort=False):
        if rho in {round(r, 6) for r in rhos}:
            lines.append(f"| {observable} | {d} | {rho:g} | " + " | ".join(cells(rows, "n", ns)) + " |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv", help="results/<...>/critical_scaling/boundary.csv")
    parser.add_argument("--n", type=int, help="one n, rho across (default: every n across, a row per rho)")
    parser.add_argument("--rho", type=float, nargs="+", default=[0.05, 0.25, 0.5, 0.75, 0.95])
    args = parser.parse_args(argv)
    table = pd.read_csv(args.csv)
    table = table[(table["alpha"] == 0) & (args.n is None or table["n"] == args.n)]
    if table.empty:
        print(f"boundary_table: no rows with alpha = 0{f' and n = {args.n}' if args.n else ''} in {args.csv}",
              file=sys.stderr)
        return 1
    print("\n".join(against_rho(table, args.rho) if args.n else against_n(table, args.rho)))
    shown = table[table["rho"].round(6).isin([round(r, 6) for r in args.rho])] if args.n is None else table
    simplex = []
    for (observable, d), rows in shown.groupby(["observable", "d"], sort=False):
        level = (rows["gamma_star_simplex"] * (1 - rows["rho"])).dropna()
        if not level.empty:
            simplex.append(f"{observable}, d = {d}: {level.min():.3f}-{level.max():.3f}")
    print("\nSimplex boundary of the same level, gamma* (1 - rho): " + "; ".join(simplex))
    return 0


if __name__ == "__main__":
    sys.exit(main())
