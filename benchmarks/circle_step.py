"""circle_synchronization's Euler step: where each start ends under two schemes, and what each costs.

    python benchmarks/circle_step.py --n 32 --seeds 1024 --scheme HEAD:1.5 --reference 6f930aa:0.5

A scheme is REV:COURANT, the flow module (flow.py) of git revision REV (HEAD: this checkout's own)
at that courant number. From the same uniform starts (the experiment's own, seeds 0 ... seeds - 1),
each scheme's flow, then the experiment's polish and classification. Two end states are the same
attractor when their classes agree and their gaps between neighbours, sorted, agree to 1e-6 rad
(the merge tolerance: the polish brings both to 1e-13 of a critical point, so another critical
point differs by far more). Prints a row per (normalisation, beta): each flow's median seconds
over ``--repeats`` runs, the classes' counts under each, and the starts ending elsewhere.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

import numpy as np
import torch

from attnsweep.experiments.circle_synchronization import critical, flow, simulate
from attnsweep.run.allocator import keep_freed_memory

FLOW = "src/attnsweep/experiments/circle_synchronization/flow.py"
OPTIONS = {"t_max": 100.0, "flow_tol": 1e-6, "merge": 1e-6}


def scheme(spec: str) -> tuple[ModuleType, float]:
    """The flow module of ``REV:COURANT`` and the courant number."""
    rev, courant = spec.rsplit(":", 1)
    if rev == "HEAD":
        return flow, float(courant)
    repo = Path(__file__).resolve().parents[1]
    text = subprocess.run(["git", "show", f"{rev}:{FLOW}"], cwd=repo, check=True, capture_output=True, text=True).stdout
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"flow_{rev}.py"
        path.write_text(text)
        module = importlib.util.module_from_spec(importlib.util.spec_from_file_location(path.stem, path))
        module.__spec__.loader.exec_module(module)
    return module, float(courant)


def ends(module: ModuleType, courant: float, starts: torch.Tensor, beta: float, normalisation: str,
         repeats: int) -> tuple[float, np.ndarray, np.ndarray]:
    """The flow's median seconds, the classes (B,) and the sorted gaps (B, n) of the polished ends."""
    betas = torch.full((starts.shape[0],), beta, dtype=torch.float64)
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        end, _ = module.integrate(starts, betas, normalisation, courant, OPTIONS["t_max"], OPTIONS["flow_tol"])
        seconds.append(time.perf_counter() - start)
    polished = critical.polish(end.numpy(), betas.numpy())
    kind = critical.classify(polished, betas.numpy(), OPTIONS["merge"])["kind"]
    angles = simulate.canonical(polished)
    gaps = np.diff(np.concatenate([angles, np.full((len(angles), 1), 2 * np.pi)], -1), axis=-1)
    return statistics.median(seconds), kind, np.sort(gaps, -1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=32)
    parser.add_argument("--beta", type=float, nargs="+", default=[-1.5, -1.0, -0.6, -0.2, 0.0])
    parser.add_argument("--seeds", type=int, default=256)
    parser.add_argument("--scheme", default="HEAD:1.5", help="REV:COURANT measured")
    parser.add_argument("--reference", default="HEAD:0.5", help="REV:COURANT it is measured against")
    parser.add_argument("--repeats", type=int, default=1, help="timed runs of each flow (the median)")
    args = parser.parse_args(argv)
    new, ref = scheme(args.scheme), scheme(args.reference)
    starts = torch.stack([simulate.initial_angles(args.n, seed) for seed in range(args.seeds)])
    print(f"n = {args.n}, {args.seeds} starts; classes counted as {', '.join(critical.KINDS)}")
    print(f"| weights | beta | s, {args.reference} | s, {args.scheme} | classes, {args.reference} "
          f"| classes, {args.scheme} | ending elsewhere |")
    print("|---|---|---|---|---|---|---|")
    total = np.zeros(2)
    for normalisation in simulate.NORMALISATIONS:
        for beta in args.beta:
            (t0, k0, g0), (t1, k1, g1) = (ends(*s, starts, beta, normalisation, args.repeats) for s in (ref, new))
            moved = int(((k0 != k1) | ~np.isclose(g0, g1, rtol=0, atol=OPTIONS["merge"]).all(-1)).sum())
            counts = [" ".join(map(str, np.bincount(k.astype(int), minlength=len(critical.KINDS)))) for k in (k0, k1)]
            print(f"| {normalisation} | {beta:g} | {t0:.2f} | {t1:.2f} | {counts[0]} | {counts[1]} | {moved} |")
            total += (t0, t1)
    print(f"total: {total[0]:.2f} s against {total[1]:.2f} s, {total[0] / total[1]:.2f}x")
    return 0


if __name__ == "__main__":
    torch.set_num_threads(1)  # as a job runs (threads: 1)
    keep_freed_memory()  # as a job does
    sys.exit(main())
