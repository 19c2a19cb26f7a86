"""Expected time of a sweep config, from the measured time of one rho of each job shape.

Every job of ``critical_scaling`` loops over its rho values with the same cost each (the gamma,
alpha batch and the probes are inside), so a sweep costs
``seeds x sum over (n, d) of len(rho) x t(n, d)``, where ``t(n, d)`` is the time of one rho
with the full gamma batch. This script measures ``t(n, d)`` (median of ``--repeats``) for every
(n, d) of a config, except shapes whose matrix-multiply work exceeds ``--max-gflop``, which it
scales from the largest measured shape of the same n by the work ratio (printed as such).

usage: python benchmarks/bench_sweep_estimate.py CONFIG [--device cpu] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from attnsweep.config import load_sweep, load_yaml
from attnsweep.registry import get


def gemm_gflop(n: int, d: int, n_gamma: int, probes: int | None) -> float:
    """Matrix-multiply work of one rho: forward and lambda, then eta exactly (probes None:
    in the span of the tokens, d -> min(d, n + 1)) or by the Hutchinson JVPs."""
    if probes is None:
        d = min(d, n + 1)
        return 2 * n * n * (3 * d + n_gamma * (4 * d + min(n, d * d))) / 1e9
    return 2 * n * n * d * (2 + n_gamma + 1 + 2 * probes + 2 * probes * n_gamma) / 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-gflop", type=float, default=5000.0,
                        help="scale shapes above this GEMM work from the largest measured shape of the same n")
    args = parser.parse_args()
    sweep = load_sweep(load_yaml(args.config))
    plan = sweep.plans["critical_scaling"]
    experiment = get("critical_scaling")
    device = torch.device(args.device)
    torch.set_num_threads(sweep.config["threads"])
    probes = plan.options["probes"] if plan.options["eta_method"] == "hutchinson" else None
    n_gamma = len(plan.grid["gamma"])
    rho_mid = plan.grid["rho"][len(plan.grid["rho"]) // 2]
    per_rho: dict[tuple[int, int], float] = {}
    print(f"{args.config}: device {device}, torch threads {torch.get_num_threads()}, "
          f"{n_gamma} gamma per rho, eta {'exact' if probes is None else f'by {probes} probes'}")
    for n in plan.grid["n"]:
        measured: tuple[int, float] | None = None
        for d in plan.grid["d"]:
            work = gemm_gflop(n, d, n_gamma, probes)
            if work > args.max_gflop and measured:
                d0, t0 = measured
                per_rho[n, d] = t0 * work / gemm_gflop(n, d0, n_gamma, probes)
                print(f"  n={n:<5} d={d:<5} {work:9.0f} GFLOP  t(rho) ~ {per_rho[n, d]:8.2f} s (scaled from d={d0})")
                continue
            grid = {**plan.grid, "n": [n], "d": [d], "rho": [rho_mid]}
            job = plan.spec(grid, [plan.seeds[0]])
            times = []
            for _ in range(args.repeats):
                start = time.perf_counter()
                experiment.simulate(job, device, getattr(torch, plan.dtype), progress=False)
                if device.type == "cuda":
                    torch.cuda.synchronize()
                times.append(time.perf_counter() - start)
            per_rho[n, d] = statistics.median(times)
            measured = (d, per_rho[n, d])
            print(f"  n={n:<5} d={d:<5} {work:9.0f} GFLOP  t(rho) = {per_rho[n, d]:8.2f} s (median of {args.repeats})")
    n_rho, n_seeds = len(plan.grid["rho"]), len(plan.seeds)
    total = n_seeds * n_rho * sum(per_rho.values())
    print(f"  sweep: {n_seeds} seeds x {n_rho} rho x {len(per_rho)} (n, d) shapes: "
          f"{total / 3600:.1f} h of simulate jobs on this device (one job at a time)")


if __name__ == "__main__":
    main()
