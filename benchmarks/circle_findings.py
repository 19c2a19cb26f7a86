"""A circle_synchronization run's findings as the experiment page states them.

    python benchmarks/circle_findings.py results/paper/circle/circle_synchronization --above -0.65

From the run's sweep.zarr, summary.zarr and boundary.csv: the starts by class (and how many
spurious attractors are certified), the largest beta with a spurious attractor, the basin bound
where none was found at beta >= ``--above`` (the Clopper-Pearson 95% upper bound of 0 in the
starts of a point), and the table of beta_c(n): the structured search's threshold and family
beside the random starts' bracket [beta_c_low, beta_c_high] for USA and SA.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from attnsweep.experiments.circle_synchronization.critical import KINDS
from attnsweep.stores.io import open_store

SPURIOUS = KINDS.index("spurious")


def bracket(row: pd.Series) -> str:
    if pd.isna(row["beta_c_low"]):
        return f"none at {row['beta_c_high']:g} or above"
    return f"[{row['beta_c_low']:g}, {row['beta_c_high']:g}]"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="results/<...>/circle_synchronization")
    parser.add_argument("--above", type=float, default=-0.65, help="the betas whose basin bound is printed")
    args = parser.parse_args(argv)
    sweep = open_store(args.folder / "sweep.zarr")[["kind", "certified"]].load()
    summary = open_store(args.folder / "summary.zarr").load()
    table = pd.read_csv(args.folder / "boundary.csv")

    kind, present = sweep["kind"], sweep["kind"].notnull()
    counts = {name: int((kind == k).sum()) for k, name in enumerate(KINDS)}
    spurious = kind == SPURIOUS
    print(f"starts: {int(present.sum()):,}; by class: " + ", ".join(f"{k} {c:,}" for k, c in counts.items()))
    print(f"spurious certified: {int((spurious & (sweep['certified'] == 1)).sum()):,} of {counts['spurious']:,}")
    beta = spurious.any(("n", "seed", "normalisation"))
    print(f"largest beta with a spurious attractor: {float(sweep['beta'][beta].max()):g}")
    above = summary.sel(beta=summary["beta"] >= args.above - 1e-9)
    none = bool((above["p_spurious"].fillna(0) == 0).all())
    fewest = int(above["starts"].where(above["starts"] > 0).min())
    print(f"at beta >= {args.above:g}: {'no' if none else 'some'} spurious attractor; the bound of 0 in "
          f"{fewest} starts, {float(above['p_spurious_high'].max()):.2%} (the largest over the points)")
    print(f"excess > 0 (a start above the structured threshold) on {int((table['excess'] > 0).sum())} rows")
    print()
    print("| n | beta_c, structured | family | random starts: bracket, USA | SA |")
    print("|---|---|---|---|---|")
    for n, rows in table.groupby("n"):
        by = rows.set_index("normalisation")
        usa, sa = bracket(by.loc["usa"]), bracket(by.loc["sa"])
        structured = by.loc["usa", "beta_c_structured"]
        cell = "none" if np.isnan(structured) else f"{structured:.6f}"
        family = by.loc["usa", "family"]  # NaN where no family is stable
        print(f"| {n} | {cell} | {family if isinstance(family, str) else ''} | {usa} | {'same' if sa == usa else sa} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
