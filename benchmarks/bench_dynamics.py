"""Our sphere engine against the authors' design (``baseline_rotf.py``) at equal parameters.

- ``ours``: the clustered-pair probability P_delta(beta, t) of paper 001 Fig. 3 by the
  ``sphere_clustering`` simulate job, in one process as a job runs it: every beta and every
  realisation one tensor batch, float32 by default, recording at every Euler step.
- ``profile``: where a step goes: the time of each piece of one Euler step of SA (Q = K = V = I)
  on one chunk of the job's size, one thread, and the two n x n x d products of a step against
  the machine's batched matmul rate (numpy's, the same shapes, one thread per core, all cores).
- ``compare``: our P against the baseline's at the baseline's checkpoints (each is the first
  Euler step at or past the checkpoint, as the authors record; at least one step), within
  Monte Carlo error: the realisations are independent draws, a per-system fraction in
  [0, 1] has variance at most p(1 - p), so |P_ours - P_base| <= 4 sqrt(2 p(1 - p)/batch) + 1e-3.

Timing is of whole processes from outside (see benchmarks/RESULTS.md for the commands).

usage: python benchmarks/bench_dynamics.py ours --d 32 --betas-num 8 --batch 512 --out ours.npy
       python benchmarks/bench_dynamics.py compare ours.npy base.npy --batch 512
       python benchmarks/bench_dynamics.py profile --d 32 --dtype float64
"""

from __future__ import annotations

import argparse

import numpy as np


def ours(args: argparse.Namespace) -> None:
    import torch

    from attnsweep.plan.config import load_sweep
    from attnsweep.run.device import resolve_dtype

    torch.set_num_threads(args.threads)
    steps = int(round(args.t_max / args.dt))
    section = {"n": [args.n], "d": [args.d], "beta": {"start": args.beta_min, "stop": args.beta_max,
                                                      "num": args.betas_num},
               "seeds": args.batch, "dt": args.dt, "t_max": args.t_max, "outputs": steps + 1,
               "delta": args.delta, "observables": ["clustered"]}
    plan = load_sweep({"dtype": args.dtype, "experiments": {"sphere_clustering": section}}).plans["sphere_clustering"]
    (job,) = plan.jobs().values()
    result = plan.experiment.simulate(job, torch.device(args.device), resolve_dtype(args.dtype), progress=False)
    p = result["clustered"].mean("seed").squeeze(("n", "d", "rho", "gamma")).transpose("beta", "t").values
    np.save(args.out, p)


def agreement(mine: np.ndarray, base: np.ndarray, batch: int) -> tuple[bool, float, float]:
    """Whether two estimates of P_delta from ``batch`` realisations each agree within Monte Carlo
    error everywhere (see above), the largest difference and the largest z-score."""
    p = (mine + base) / 2
    bound = 4 * np.sqrt(2 * p * (1 - p) / batch) + 1e-3
    z = np.abs(mine - base) / np.sqrt(np.maximum(2 * p * (1 - p) / batch, 1e-12))
    return bool(np.all(np.abs(mine - base) <= bound)), float(np.abs(mine - base).max()), float(z.max())


def compare(args: argparse.Namespace) -> None:
    mine, base = np.load(args.ours), np.load(args.baseline)
    checkpoints = np.linspace(0.0, args.t_max, base.shape[1])
    steps = np.maximum(1, np.ceil(checkpoints / args.dt - 1e-9).astype(int))
    ok, diff, z = agreement(mine[:, steps], base, args.batch)
    print(f"max |P_ours - P_base| = {diff:.4f}, max z = {z:.2f}, "
          f"{'within' if ok else 'OUTSIDE'} Monte Carlo error at every (beta, checkpoint)")
    if not ok:
        raise SystemExit(1)


def profile(args: argparse.Namespace) -> None:
    import time
    from concurrent.futures import ThreadPoolExecutor

    import torch
    from threadpoolctl import threadpool_limits

    from attnsweep.dynamics import cpu_chunk_bytes, observables, ops, sphere
    from attnsweep.experiments.sphere_clustering.resources import system_bytes

    dtype = getattr(torch, args.dtype)
    n, d = args.n, args.d
    b = max(1, cpu_chunk_bytes(256) // system_bytes(n, d, dtype.itemsize, "euler"))  # the job's chunk
    gen = torch.Generator().manual_seed(0)
    x = sphere.normalise(torch.randn(b, n, d, generator=gen, dtype=dtype))
    beta = torch.linspace(args.beta_min, args.beta_max, b, dtype=dtype)
    torch.set_num_threads(1)

    def clock(f, repeats: int = 200) -> float:  # seconds per call, best of three
        f()
        best = float("inf")
        for _ in range(3):
            start = time.perf_counter()
            for _ in range(repeats):
                f()
            best = min(best, (time.perf_counter() - start) / repeats)
        return best

    gram = observables.gram(x)
    e = sphere.kernel(x, beta, gram, shift=False)
    y = ops.bmm(e, x)
    parts = {
        "Gram product x x^T (n x n x d)": lambda: observables.gram(x),
        "scale by beta, exp (n x n)": lambda: sphere.kernel(x, beta, gram, shift=False),
        "row sums (n x n)": lambda: e.sum(-1, keepdim=True),
        "product E x (n x n x d), divide by sums": lambda: ops.bmm(e, x).div_(e.sum(-1, keepdim=True)),
        "Euler update, renormalise (n x d)": lambda: sphere.normalise(torch.add(x, y, alpha=0.1)),
        "record: clustered pairs (n x n)": lambda: observables.clustered_pairs(gram, args.delta),
    }
    print(f"{args.dtype}, n = {n}, d = {d}, chunk of {b} systems, one thread; microseconds per system-step")
    total = 0.0
    for name, f in parts.items():
        per = clock(f) / b * 1e6
        total += per
        print(f"  {name:42s} {per:7.3f}")
    print(f"  {'sum':42s} {total:7.3f}")
    flops = 2 * (2 * n * n * d)  # the two products of a step
    one = clock(lambda: ops.bmm(e, x)) / b
    cores = args.threads
    with threadpool_limits(1), ThreadPoolExecutor(cores) as pool:  # every core multiplying chunks of its own
        def many(_: int) -> None:
            for _ in range(1000):
                ops.bmm(e, x)

        list(pool.map(many, range(cores)))  # warm-up: a thread's first BLAS call sets up its buffers
        start = time.perf_counter()
        list(pool.map(many, range(cores)))
        rate = cores * 1000 * b * (2 * n * n * d) / (time.perf_counter() - start)
    print(f"  products alone: {flops / (2 * one) / 1e9:.1f} GFLOP/s one core; the machine's batched rate "
          f"({cores} cores side by side): {rate / 1e9:.1f} GFLOP/s")
    if args.step_us:
        print(f"  a measured step of {args.step_us} us/system-step reaches {flops / (args.step_us * 1e-6) / 1e9:.1f} "
              f"GFLOP/s in its products, {flops / (args.step_us * 1e-6) / rate:.0%} of that rate")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    ours_parser, profile_parser = sub.add_parser("ours"), sub.add_parser("profile")
    for p in (ours_parser, profile_parser):
        p.add_argument("--n", type=int, default=32)
        p.add_argument("--d", type=int, default=32)
        p.add_argument("--beta-min", type=float, default=0.1)
        p.add_argument("--beta-max", type=float, default=9.0)
        p.add_argument("--delta", type=float, default=1e-3)
        p.add_argument("--threads", type=int, default=2)
    p = ours_parser
    p.add_argument("--betas-num", type=int, default=8)
    p.add_argument("--batch", type=int, default=512)
    p.add_argument("--dt", type=float, default=0.1)
    p.add_argument("--t-max", type=float, default=30.0)
    p.add_argument("--dtype", default="float32")
    p.add_argument("--device", default="cpu")
    p.add_argument("--out", required=True)
    p = profile_parser
    p.add_argument("--dtype", default="float64")
    p.add_argument("--step-us", type=float, default=0.0, help="a measured whole-job time per system-step")
    p = sub.add_parser("compare")
    p.add_argument("ours")
    p.add_argument("baseline")
    p.add_argument("--batch", type=int, default=512)
    p.add_argument("--dt", type=float, default=0.1)
    p.add_argument("--t-max", type=float, default=30.0)
    args = parser.parse_args()
    {"ours": ours, "profile": profile, "compare": compare}[args.what](args)


if __name__ == "__main__":
    main()
