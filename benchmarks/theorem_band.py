"""Each measured critical_scaling boundary against the band Theorems 2.2 and 2.4 of paper 000 allow.

    python benchmarks/theorem_band.py results/paper_refined/critical_scaling

With rho_1 and rho_2 the smallest and largest input cosine among the tokens (Assumption 2), the
layer contracts for gamma < 1/(1 - rho_1) and is the identity for gamma > 1/(1 - rho_2), so a
crossing lies in [1/(1 - rho_1), 1/(1 - rho_2)]. rho_1, rho_2 are the seed means of the stored
cosine quantiles 0 and 1 (over all pairs of at most ``quantile_tokens`` tokens: a narrower band
than all n tokens give, so the check is the stricter one). Prints the band as gamma (1 - rho) per
(n, d) and how many boundary estimates lie inside it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from attnsweep.stores.io import open_store


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="results/<...>/critical_scaling")
    args = parser.parse_args(argv)
    summary = open_store(args.folder / "summary.zarr").load()
    boundary = open_store(args.folder / "boundary.zarr").load()
    cos = summary["cos_in_quantile"]
    low = 1 / (1 - cos.sel(quantile=0.0))
    high = 1 / (1 - cos.sel(quantile=1.0))
    total = inside = 0
    print("| n | d | band of gamma* (1 - rho) over rho | estimates inside |")
    print("|---|---|---|---|")
    for n in boundary["n"].values:
        for d in boundary["d"].values:
            here = {"n": n, "d": d}
            scale = 1 - boundary["rho"]
            lo, hi = (low.sel(here) * scale).values, (high.sel(here) * scale).values
            count = held = 0
            for obs in ("lambda", "eta"):
                star = boundary[f"gamma_star_{obs}"].sel(here).sel(alpha=0.0) * scale
                ok = np.isfinite(star.values)
                held += int(ok.sum())
                count += int(((star.values >= lo) & (star.values <= hi))[ok].sum())
            keep = np.isfinite(lo) & (boundary["rho"].values > 0)
            print(f"| {int(n)} | {int(d)} | lower {lo[keep].min():.3f}-{lo[keep].max():.3f}, "
                  f"upper {hi[keep].min():.3f}-{hi[keep].max():.3f} | {count} of {held} |")
            total, inside = total + held, inside + count
    print(f"\n{inside} of {total} boundary estimates lie in the band of Theorems 2.2 and 2.4")
    return 0 if inside == total else 1


if __name__ == "__main__":
    sys.exit(main())
