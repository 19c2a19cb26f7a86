"""What the noise costs: one noisy_clustering job with noise against the same job without it.

Both run the same systems for the same steps in one process, as a job runs them (the attention
clock, K in absolute units): ``--noise on`` at K = 1 draws one increment per token and step (in
blocks of 32 steps per seed, float64 on the CPU) and projects it on the tangent space; ``--noise
off`` (K = inf) takes the projected Euler step alone. Prints the job's cost estimate
(``resources.seconds``) beside nothing else: time the two whole processes from outside and pair
them (benchmarks/RESULTS.md gives the commands and the numbers).

usage: python benchmarks/bench_noise.py --noise on --n 256 --d 8 --seeds 8 --steps 2000
"""

from __future__ import annotations

import argparse
import math


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--noise", choices=["on", "off"], required=True)
    parser.add_argument("--n", type=int, default=256)
    parser.add_argument("--d", type=int, default=8)
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()

    import torch

    from attnsweep.experiments.noisy_clustering import resources
    from attnsweep.plan.config import load_sweep
    from attnsweep.run.device import resolve_dtype

    torch.set_num_threads(1)
    dt = 1e-3
    section = {"n": [args.n], "d": [args.d], "beta": [1.0], "K": [1.0 if args.noise == "on" else math.inf],
               "K_unit": "one", "clock": "attention", "starts": ["uniform"], "seeds": args.seeds, "dt": dt,
               "burn_in": 0.0, "window": args.steps * dt, "record_every": max(1, min(100, args.steps // 4))}
    plan = load_sweep({"dtype": args.dtype, "experiments": {"noisy_clustering": section}}).plans["noisy_clustering"]
    (job,) = plan.jobs().values()
    plan.experiment.simulate(job, torch.device(args.device), resolve_dtype(args.dtype), progress=False)
    print(f"estimate {resources.seconds(job):.2f} s")


if __name__ == "__main__":
    main()
