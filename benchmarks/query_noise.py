"""What sampling query tokens adds to lambda, against lambda's own spread over seeds.

    python benchmarks/query_noise.py --n 16384 --d 128 --rho 0.25 --gamma 1.373 --seeds 8 --tokens 1024 4096

For each seed, the tokens of critical_scaling's own draws (Eq. 25) and lambda (Eq. 26) over all
pairs of the layer at every token; then, ``--repeats`` times, the layer at m tokens drawn
uniformly (every token a key) and lambda over all pairs among them, as ``query_tokens: m`` does.
Prints the seed-to-seed standard deviation of the whole lambda, the within-seed standard
deviation of the sampled one (root mean of the per-seed variances) and their ratio, and the mean
of sampled minus whole (0 up to Monte Carlo error: the sample is uniform). The sampling is
negligible where the ratio is small: the variance of a seed mean grows by the ratio squared.
"""

from __future__ import annotations

import argparse
import math
import sys

import numpy as np
import torch

from attnsweep.experiments.critical_scaling import kernel
from attnsweep.experiments.critical_scaling.simulate import draw_tokens

BUDGET = 256 << 20  # row-block bytes, as the jobs' default block_mib


def lambdas(n: int, d: int, rho: float, gamma: float, seed: int, tokens: list[int], repeats: int,
            dtype: torch.dtype) -> tuple[float, dict[int, list[float]]]:
    """Lambda of seed ``seed`` over every token, and ``repeats`` lambdas over m sampled tokens."""
    z0, z = draw_tokens(n, d, seed, "scaled")
    x = (math.sqrt(rho) * z0 + math.sqrt(1 - rho) * z).to(dtype)
    beta = torch.tensor([gamma * math.log(n)], dtype=dtype)
    y = kernel.normalize(x)
    att, _ = kernel.attention_layer(x, beta, BUDGET)
    whole = kernel.angle_ratio_all_pairs(y, kernel.normalize(att), BUDGET).item()
    gen = torch.Generator().manual_seed(seed)  # not the jobs' stream: any uniform sample will do
    sampled = {}
    for m in tokens:
        sampled[m] = []
        for _ in range(repeats):
            queries = torch.randperm(n, generator=gen)[:m]
            att, _ = kernel.attention_layer(x, beta, BUDGET, queries)
            sampled[m].append(kernel.angle_ratio_all_pairs(y[queries], kernel.normalize(att), BUDGET).item())
    return whole, sampled


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, required=True)
    parser.add_argument("--d", type=int, required=True)
    parser.add_argument("--rho", type=float, required=True)
    parser.add_argument("--gamma", type=float, required=True, help="near the crossing: gamma* of the row")
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--tokens", type=int, nargs="+", default=[1024, 4096])
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    args = parser.parse_args(argv)
    dtype = getattr(torch, args.dtype)
    whole, sampled = [], {m: [] for m in args.tokens}
    for seed in range(args.seeds):
        w, s = lambdas(args.n, args.d, args.rho, args.gamma, seed, args.tokens, args.repeats, dtype)
        whole.append(w)
        for m in args.tokens:
            sampled[m].append(s[m])
    whole_ = np.array(whole)
    spread = whole_.std(ddof=1)
    print(f"n = {args.n}, d = {args.d}, rho = {args.rho}, gamma = {args.gamma} ({args.dtype}): {args.seeds} seeds, "
          f"lambda {whole_.mean():.4f}, seed-to-seed sd {spread:.5f}\n")
    print("| query tokens m | within-seed sd | ratio to the seed sd | mean(sampled - whole) |")
    print("|---|---|---|---|")
    for m in args.tokens:
        values = np.array(sampled[m])  # (seeds, repeats)
        within = math.sqrt(values.var(axis=1, ddof=1).mean())
        bias = (values.mean(axis=1) - whole_).mean()
        print(f"| {m} | {within:.5f} | {within / spread:.3f} | {bias:+.5f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
