"""Our sphere engine against the authors' design (``baseline_rotf.py``) at equal parameters.

- ``ours``: the clustered-pair probability P_delta(beta, t) of paper 001 Fig. 3 by the
  ``sphere_clustering`` simulate job, in one process as a job runs it: every beta and every
  realisation one tensor batch, float32 by default, recording at every Euler step.
- ``compare``: our P against the baseline's at the baseline's checkpoints (each is the first
  Euler step at or past the checkpoint, as the authors record; at least one step), within
  Monte Carlo error: the realisations are independent draws, a per-system fraction in
  [0, 1] has variance at most p(1 - p), so |P_ours - P_base| <= 4 sqrt(2 p(1 - p)/batch) + 1e-3.

Timing is of whole processes from outside (see benchmarks/RESULTS.md for the commands).

usage: python benchmarks/bench_dynamics.py ours --d 32 --betas-num 8 --batch 512 --out ours.npy
       python benchmarks/bench_dynamics.py compare ours.npy base.npy --batch 512
"""

from __future__ import annotations

import argparse

import numpy as np


def ours(args: argparse.Namespace) -> None:
    import torch

    from attnsweep.config import load_sweep
    from attnsweep.device import resolve_dtype

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


def compare(args: argparse.Namespace) -> None:
    mine, base = np.load(args.ours), np.load(args.baseline)
    checkpoints = np.linspace(0.0, args.t_max, base.shape[1])
    steps = np.maximum(1, np.ceil(checkpoints / args.dt - 1e-9).astype(int))
    mine = mine[:, steps]
    p = (mine + base) / 2
    bound = 4 * np.sqrt(2 * p * (1 - p) / args.batch) + 1e-3
    z = np.abs(mine - base) / np.sqrt(np.maximum(2 * p * (1 - p) / args.batch, 1e-12))
    ok = bool(np.all(np.abs(mine - base) <= bound))
    print(f"max |P_ours - P_base| = {np.abs(mine - base).max():.4f}, max z = {z.max():.2f}, "
          f"{'within' if ok else 'OUTSIDE'} Monte Carlo error at every (beta, checkpoint)")
    if not ok:
        raise SystemExit(1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    p = sub.add_parser("ours")
    p.add_argument("--n", type=int, default=32)
    p.add_argument("--d", type=int, default=32)
    p.add_argument("--beta-min", type=float, default=0.1)
    p.add_argument("--beta-max", type=float, default=9.0)
    p.add_argument("--betas-num", type=int, default=8)
    p.add_argument("--batch", type=int, default=512)
    p.add_argument("--dt", type=float, default=0.1)
    p.add_argument("--t-max", type=float, default=30.0)
    p.add_argument("--delta", type=float, default=1e-3)
    p.add_argument("--dtype", default="float32")
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", required=True)
    p = sub.add_parser("compare")
    p.add_argument("ours")
    p.add_argument("baseline")
    p.add_argument("--batch", type=int, default=512)
    p.add_argument("--dt", type=float, default=0.1)
    p.add_argument("--t-max", type=float, default=30.0)
    args = parser.parse_args()
    ours(args) if args.what == "ours" else compare(args)


if __name__ == "__main__":
    main()
