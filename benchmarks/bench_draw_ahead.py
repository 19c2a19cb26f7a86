"""A critical_scaling job with and without drawing ahead (``simulate.DRAW_AHEAD_ON``), paired.

A refinement round's job holds few gamma values a seed, so each seed's serial CPU draw of its
tokens (about 1.2 s for n = 65536, d = 1024 on machine B) is a large part of the job, and on a
GPU the device waits for it unless the next seed is drawn on a CPU thread while the current one
computes. This times one such job (one rho, ``--gammas`` values, ``--seeds`` seeds, lambda only
as in the long-context configs) both ways, alternating, ``--repeats`` times each, on one device,
and checks that both give the same lambda bit for bit. Prints one Markdown row: device, sizes,
median seconds off and on (min-max), their ratio.

    python benchmarks/bench_draw_ahead.py --device cuda --n 65536 --d 1024 --seeds 4 --repeats 3
    python benchmarks/bench_draw_ahead.py --device cpu --n 512 --d 64 --seeds 3 --repeats 1
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch

from attnsweep import registry
from attnsweep.experiments.critical_scaling import simulate
from attnsweep.plan.config import load_sweep
from attnsweep.run.device import resolve_device


def job(n: int, d: int, gammas: int, seeds: int):
    """The one job of a config like a round's: one (n, d, rho), a few gamma values, lambda only."""
    section = {"n": [n], "d": [d], "rho": [0.5], "gamma": {"start": 1.8, "stop": 2.2, "num": gammas},
               "seeds": seeds, "eta_method": "none", "wildcards": []}
    plan = load_sweep({"experiments": {"critical_scaling": section}}).plans["critical_scaling"]
    (spec,) = plan.jobs().values()
    return spec, plan.experiment.axes


def timed(spec, axes, device: torch.device, ahead: bool) -> tuple[float, np.ndarray]:
    """Seconds of ``simulate`` of ``spec`` on ``device``, drawing ahead or not, and its lambda."""
    default = simulate.DRAW_AHEAD_ON
    simulate.DRAW_AHEAD_ON = frozenset({device.type}) if ahead else frozenset()
    try:
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        ds = simulate.simulate(spec, axes, device, torch.float32, progress=False)
        return time.perf_counter() - start, ds["lambda"].values
    finally:
        simulate.DRAW_AHEAD_ON = default


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="auto")
    parser.add_argument("--n", type=int, default=65536)
    parser.add_argument("--d", type=int, default=1024)
    parser.add_argument("--gammas", type=int, default=3)
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    device = resolve_device(args.device)
    registry.get("critical_scaling")  # the experiment registered, as a job would find it
    spec, axes = job(args.n, args.d, args.gammas, args.seeds)
    timed(spec, axes, device, False)  # warm-up: CUDA context, kernels, allocator
    times: dict[bool, list[float]] = {False: [], True: []}
    values = {}
    for _ in range(args.repeats):
        for ahead in (False, True):
            seconds, values[ahead] = timed(spec, axes, device, ahead)
            times[ahead].append(seconds)
    np.testing.assert_array_equal(values[True], values[False], err_msg="drawing ahead changed lambda")
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else f"cpu, {torch.get_num_threads()} threads"
    off, on = (statistics.median(times[a]) for a in (False, True))
    print("| device | n | d | gammas x seeds | off: median (min-max) s | ahead: median (min-max) s | off / ahead |")
    print("|---|---|---|---|---|---|---|")
    print(f"| {name} | {args.n} | {args.d} | {args.gammas} x {args.seeds} | {off:.2f} ({min(times[False]):.2f}-"
          f"{max(times[False]):.2f}) | {on:.2f} ({min(times[True]):.2f}-{max(times[True]):.2f}) | {off / on:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
