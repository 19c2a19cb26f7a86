"""Expected time of a sweep config, from the measured time of one rho of each job shape.

Every job of ``critical_scaling`` loops over its rho values with the same cost each (the gamma,
alpha batch and the probes are inside), so a sweep costs
``seeds x sum over (n, d) of len(rho) x t(n, d)``, where ``t(n, d)`` is the time of one rho
with the full gamma batch. This script measures ``t(n, d)`` (median of ``--repeats``) for every
(n, d) of a config, except shapes whose matrix-multiply work exceeds ``--max-gflop``, which it
scales from the largest measured shape of the same n by the work ratio (printed as such).
``benchmarks/gpu_check.py`` imports :func:`per_rho_seconds` and :func:`sweep_seconds`.

usage: python benchmarks/bench_sweep_estimate.py CONFIG [--device cpu] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

from attnsweep.plan.config import load_sweep, load_yaml
from attnsweep.plan.experiment_plan import Plan


def gemm_gflop(n: int, d: int, n_gamma: int, probes: int | None) -> float:
    """Matrix-multiply work of one rho: forward and lambda, then eta exactly (probes None:
    in the span of the tokens, d -> min(d, n + 1)) or by the Hutchinson JVPs."""
    if probes is None:
        d = min(d, n + 1)
        return 2 * n * n * (3 * d + n_gamma * (4 * d + min(n, d * d))) / 1e9
    return 2 * n * n * d * (2 + n_gamma + 1 + 2 * probes + 2 * probes * n_gamma) / 1e9


def probes_of(options: dict[str, Any]) -> int | None:
    """The Hutchinson probes of critical_scaling's options, None for exact eta."""
    return options["probes"] if options["eta_method"] == "hutchinson" else None


def per_rho_seconds(plan: Plan, device: torch.device, repeats: int, max_gflop: float = float("inf"),
                    report: Callable[[str], None] = print) -> dict[tuple[int, int], float]:
    """Seconds of one rho with the plan's full gamma batch, per (n, d) of a critical_scaling plan:
    the median of ``repeats`` runs at the middle rho, or, past ``max_gflop`` of GEMM work, scaled
    from the largest measured d of the same n; each shape reported as a line."""
    probes, n_gamma = probes_of(plan.options), len(plan.grid["gamma"])
    rho_mid = plan.grid["rho"][len(plan.grid["rho"]) // 2]
    per_rho: dict[tuple[int, int], float] = {}
    for n in map(int, plan.grid["n"]):
        measured: tuple[int, float] | None = None
        for d in map(int, plan.grid["d"]):
            work = gemm_gflop(n, d, n_gamma, probes)
            if work > max_gflop and measured:
                d0, t0 = measured
                per_rho[n, d] = t0 * work / gemm_gflop(n, d0, n_gamma, probes)
                report(f"  n={n:<5} d={d:<5} {work:9.0f} GFLOP  t(rho) ~ {per_rho[n, d]:8.2f} s (scaled from d={d0})")
                continue
            job = plan.spec({**plan.grid, "n": [n], "d": [d], "rho": [rho_mid]}, [plan.seeds[0]])
            times = []
            for _ in range(repeats):
                start = time.perf_counter()
                plan.experiment.simulate(job, device, getattr(torch, plan.dtype), progress=False)
                if device.type == "cuda":
                    torch.cuda.synchronize()
                times.append(time.perf_counter() - start)
            per_rho[n, d] = statistics.median(times)
            measured = (d, per_rho[n, d])
            report(f"  n={n:<5} d={d:<5} {work:9.0f} GFLOP  t(rho) = {per_rho[n, d]:8.2f} s (median of {repeats})")
    return per_rho


def sweep_seconds(plan: Plan, per_rho: dict[tuple[int, int], float]) -> float:
    """Seconds of the plan's simulate jobs one at a time: seeds x rho values x the shapes' times."""
    return len(plan.seeds) * len(plan.grid["rho"]) * sum(per_rho.values())


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
    device = torch.device(args.device)
    torch.set_num_threads(sweep.config["threads"])
    probes = probes_of(plan.options)
    print(f"{args.config}: device {device}, torch threads {torch.get_num_threads()}, "
          f"{len(plan.grid['gamma'])} gamma per rho, eta {'exact' if probes is None else f'by {probes} probes'}")
    per_rho = per_rho_seconds(plan, device, args.repeats, args.max_gflop)
    total = sweep_seconds(plan, per_rho)
    print(f"  sweep: {len(plan.seeds)} seeds x {len(plan.grid['rho'])} rho x {len(per_rho)} (n, d) shapes: "
          f"{total / 3600:.1f} h of simulate jobs on this device (one job at a time)")


if __name__ == "__main__":
    main()
