"""The time estimate of simulate jobs (``attnsweep.plan.cost``) against their measured time.

For every job of the given configs whose estimate is at most ``--max-seconds``, runs the job
in this process on one CPU thread (as a warm-server child would: imports excluded) and prints
its estimate, its measured time (median of ``--repeats``) and their ratio; then, per experiment,
the range of the ratios. The estimate is meant to stay within a factor of 3 of the measured time.

usage: python benchmarks/bench_cost.py CONFIG [CONFIG ...] [--repeats 1] [--max-seconds 60]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import torch

from attnsweep.plan.config import load_sweep, load_yaml
from attnsweep.run.job import run_job


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("configs", nargs="+")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--max-seconds", type=float, default=60.0, help="skip jobs estimated longer than this")
    parser.add_argument("--max-jobs", type=int, default=4, help="at most this many jobs per experiment and config")
    args = parser.parse_args()
    torch.set_num_threads(1)
    ratios: dict[str, list[float]] = defaultdict(list)
    print(f"{'experiment':<18} {'job':<34} {'dtype':<8} {'estimate s':>10} {'measured s':>10} {'ratio':>6}")
    with tempfile.TemporaryDirectory() as tmp:
        for config in args.configs:
            for name, plan in load_sweep(load_yaml(config)).plans.items():
                estimates = plan.seconds()
                picked = [path for path in estimates if estimates[path] <= args.max_seconds][: args.max_jobs]
                for path in picked:
                    job, times = plan.blocks()[path], []
                    for k in range(args.repeats):
                        out = Path(tmp, f"{name}-{len(ratios[name])}-{k}.zarr")
                        start = time.perf_counter()
                        run_job(job, out, device="cpu", threads=1, progress=False)
                        times.append(time.perf_counter() - start)
                    measured = statistics.median(times)
                    ratios[name].append(estimates[path] / measured)
                    print(f"{name:<18} {path[:34]:<34} {job.dtype:<8} {estimates[path]:10.2f} {measured:10.2f} "
                          f"{ratios[name][-1]:6.2f}", flush=True)
    for name, values in ratios.items():
        print(f"{name}: estimate / measured from {min(values):.2f} to {max(values):.2f} over {len(values)} jobs")


if __name__ == "__main__":
    main()
