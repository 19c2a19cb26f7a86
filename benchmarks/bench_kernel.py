"""Kernel benchmarks of critical_scaling (paper 000).

Two measurements, each the median of ``--repeats`` timed runs after one warm-up, in-process:

- ``numpy``: one job of the torch kernel (every observable: lambda, eta, n_eff, cosine
  quantiles) against a naive numpy loop over the same grid points, one point at a time,
  computing the same observables the way the paper describes them (eta by Hutchinson with
  16 Rademacher probes, the job's own probes); the default sweep's grid (n = 256,
  10 rho x 12 gamma) for each of its d. The job runs twice: as configured by default (eta
  exact, ``jacobian_frobenius``) and with ``eta_method: hutchinson`` and the same 16 probes
  (the same algorithm as the loop, so that ratio is batching and blocking alone).
  Target: torch at least 20x faster.
- ``gflops``: matrix-multiply FLOP/s achieved by each eta kernel (the bulk of a job: exact
  Frobenius norm, Hutchinson JVP) against ``torch.mm`` of a square matrix on the same device
  and threads. Target: >= 50%. With ``--profile``, each kernel's time split by operator
  (torch.profiler, one warmed call): the matrix products against the passes between them.

usage: python benchmarks/bench_kernel.py [numpy|gflops|all] [--device cpu|cuda] [--repeats 5] [--profile]
"""

from __future__ import annotations

import argparse
import math
import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import replace

import numpy as np
import torch

from attnsweep.experiments.critical_scaling import kernel
from attnsweep.experiments.critical_scaling.simulate import draw_probes, draw_tokens
from attnsweep.plan.config import load_sweep
from attnsweep.registry import get


def median_time(fn: Callable[[], object], repeats: int, sync: Callable[[], None]) -> float:
    fn()
    sync()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def naive_point(x: np.ndarray, beta: float, probes: np.ndarray) -> tuple[float, float, float, np.ndarray]:
    """lambda, n_eff, eta and output-cosine quantiles of one grid point, plain numpy."""
    n, d = x.shape
    norm = np.linalg.norm(x, axis=1, keepdims=True)
    y = x / norm
    logits = beta * (y @ y.T)
    logits -= logits.max(1, keepdims=True)
    attn = np.exp(logits)
    attn /= attn.sum(1, keepdims=True)
    out = attn @ y
    y_out = out / np.linalg.norm(out, axis=1, keepdims=True)
    i, j = np.triu_indices(n, 1)
    lam = np.mean(((y_out[i] - y_out[j]) ** 2).sum(1) / ((y[i] - y[j]) ** 2).sum(1))
    n_eff = np.mean(1 / (attn**2).sum(1))
    cos = (y_out @ y_out.T)[i, j]
    quantiles = np.quantile(cos, kernel.QUANTILES)
    total = 0.0
    for v in probes:
        dy = (v - y * (v * y).sum(1, keepdims=True)) / norm
        d_scores = beta * (dy @ y.T + y @ dy.T)
        d_attn = attn * (d_scores - (attn * d_scores).sum(1, keepdims=True))
        total += ((d_attn @ y + attn @ dy) ** 2).sum()
    return lam, n_eff, total / (len(probes) * n * d), quantiles


def bench_numpy(device: torch.device, repeats: int, sync: Callable[[], None], d: int) -> tuple[float, float]:
    """Print and return (numpy loop, default torch job) median seconds for one d."""
    config = {"experiments": {"critical_scaling": {
        "n": [256], "d": [d], "rho": {"start": 0.0, "stop": 0.9, "num": 10},
        "gamma": {"start": 0.5, "stop": 12.0, "num": 12}, "seeds": 1, "wildcards": [],
    }}}
    plan = load_sweep(config).plans["critical_scaling"]
    (job,) = plan.jobs().values()
    hutchinson = replace(job, options={**job.options, "eta_method": "hutchinson", "probes": 16})
    experiment = get("critical_scaling")
    n, seed = 256, 0
    z0, z = (t.numpy().astype(np.float32) for t in draw_tokens(n, d, seed, "scaled"))
    probes = draw_probes(n, d, seed, hutchinson.options["probes"]).numpy().astype(np.float32)

    def numpy_loop() -> list:
        return [naive_point(math.sqrt(r) * z0 + math.sqrt(1 - r) * z, g * math.log(n), probes)
                for r in job.grid["rho"] for g in job.grid["gamma"]]

    t_exact = median_time(lambda: experiment.simulate(job, device, torch.float32, progress=False),
                          repeats, sync)
    t_hutch = median_time(lambda: experiment.simulate(hutchinson, device, torch.float32, progress=False),
                          repeats, sync)
    t_numpy = median_time(numpy_loop, max(1, repeats // 2), lambda: None)
    points = len(job.grid["rho"]) * len(job.grid["gamma"])
    print(f"numpy-vs-kernel: n={n} d={d} {points} points, float32, device {device}, "
          f"torch threads {torch.get_num_threads()}")
    print(f"  numpy loop per point, Hutchinson {len(probes)} probes  median {t_numpy:.3f} s")
    print(f"  torch job, eta exact (default)        median {t_exact:.3f} s  "
          f"speed-up {t_numpy / t_exact:.1f}x (target >= 20x)")
    print(f"  torch job, Hutchinson {len(probes)} probes      median {t_hutch:.3f} s  "
          f"speed-up {t_numpy / t_hutch:.1f}x (same algorithm)")
    return t_numpy, t_exact


def operator_split(fn: Callable[[], object], rows: int = 8) -> None:
    """Print where one call of ``fn`` spends its time: the products (``mm``/``bmm``/``matmul``/
    ``addmm``/``baddbmm``) against every other operator, then the ``rows`` costliest operators by
    self time."""
    fn()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        fn()
    events = [e for e in prof.key_averages() if e.self_cpu_time_total > 0]
    total = sum(e.self_cpu_time_total for e in events)
    products = sum(e.self_cpu_time_total for e in events if e.key in PRODUCTS)
    print(f"    products {products / 1e3:.1f} ms ({products / total:.0%}), other operators "
          f"{(total - products) / 1e3:.1f} ms of {total / 1e3:.1f} ms (self time)")
    for e in sorted(events, key=lambda e: -e.self_cpu_time_total)[:rows]:
        print(f"      {e.key:32s} {e.self_cpu_time_total / 1e3:8.1f} ms  x{e.count}")


#: The matrix products among torch.profiler's operator names (self time is the GEMM itself).
PRODUCTS = {"aten::mm", "aten::bmm", "aten::addmm", "aten::baddbmm", "aten::addbmm", "aten::_mm"}


def bench_gflops(device: torch.device, repeats: int, sync: Callable[[], None], n: int, d: int,
                 profile: bool = False) -> None:
    m, n_beta = 16, 12
    gen = torch.Generator().manual_seed(0)
    x = (torch.randn(n, d, generator=gen) / math.sqrt(d)).to(device)
    beta = (torch.linspace(0.5, 12, n_beta) * math.log(n)).to(device)
    probes = (torch.randint(0, 2, (m, n, d), generator=gen, dtype=torch.int8) * 2 - 1).to(device)
    budget = 256 << 20
    size = 2048 if device.type == "cpu" else 8192
    a = torch.randn(size, size, device=device)
    b = torch.randn(size, size, device=device)
    t_mm = median_time(lambda: a @ b, repeats, sync)
    mm_rate = 2 * size**3 / t_mm / 1e9
    print(f"gflops: n={n} d={d} B={n_beta} float32 on {device}, torch threads {torch.get_num_threads()}")
    print(f"  matmul {size}^3  median {t_mm:.4f} s  {mm_rate:.1f} GFLOP/s")
    # GEMM flops of jacobian_frobenius (n <= d^2: squared-Gram route): Gram of c and its
    # square (2), then per beta A y, H, C y (3 n^2 d) and A (G o G) (n^3).
    exact_flops = 2 * n * n * (2 * d + n_beta * (3 * d + n))
    # GEMM flops of jacobian_probe_norms: scores (1), dS (2m), dA @ y (m B), A @ dy (m B).
    jvp_flops = 2 * n * n * d * (1 + 2 * m + 2 * m * n_beta)
    for name, flops, fn in (
        ("jacobian_frobenius (exact)", exact_flops, lambda: kernel.jacobian_frobenius(x, beta, budget)),
        (f"jacobian_probe_norms (m={m})", jvp_flops, lambda: kernel.jacobian_probe_norms(x, beta, probes, budget)),
    ):
        seconds = median_time(fn, repeats, sync)
        rate = flops / seconds / 1e9
        print(f"  {name:29s} median {seconds:.3f} s  {rate:.1f} GFLOP/s (GEMM flops only), "
              f"{rate / mm_rate:.0%} of matmul (target >= 50%)")
        if profile:
            operator_split(fn)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("which", nargs="?", default="all", choices=["numpy", "gflops", "all"])
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--numpy-d", type=int, nargs="+", default=[16, 128, 1024],
                        help="dimensions for the numpy benchmark (the default sweep's)")
    parser.add_argument("--n", type=int, default=1024, help="tokens for the gflops benchmark")
    parser.add_argument("--d", type=int, default=512, help="dimension for the gflops benchmark")
    parser.add_argument("--profile", action="store_true", help="gflops: each kernel's time by operator")
    args = parser.parse_args()
    device = torch.device(args.device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or "cpu"
    print(f"machine: {platform.node()} {name}, torch {torch.__version__}")
    if args.which in ("numpy", "all"):
        times = [bench_numpy(device, args.repeats, sync, d) for d in args.numpy_d]
        t_numpy, t_torch = (sum(t) for t in zip(*times))
        print(f"numpy-vs-kernel over the whole grid (d = {args.numpy_d}): numpy {t_numpy:.2f} s, "
              f"torch {t_torch:.2f} s, speed-up {t_numpy / t_torch:.1f}x (target >= 20x)")
    if args.which in ("gflops", "all"):
        bench_gflops(device, args.repeats, sync, args.n, args.d, args.profile)


if __name__ == "__main__":
    main()
