"""Baseline for paper 001: the authors' phase-diagram engine, re-implemented in its design.

Reference: github.com/borjanG/2023-transformers-rotf, file ``phase-diagrams.py`` (HEAD
538ba839f7fc03d042e03ad7b557c220defc4148; the file was last changed in 24613e8d2cb3,
"Add files via upload", 2023-12-18). Line numbers below are of that file. This is our own
code written after reading theirs; the design choices mirrored are:

- Framework and dtype: torch, float64 (``torch.set_default_dtype(torch.float64)``, l. 326;
  every buffer takes the default dtype). They hard-code ``'cuda'`` (l. 35-45); here the device
  is a parameter (default cpu), and float64 is passed explicitly instead of changing torch's
  global default.
- Loop structure: a Python loop over beta, one beta at a time (l. 353-356), each with a fresh
  simulator: new buffers and a fresh Gaussian initial draw (l. 279, l. 44). The batch of
  independent systems is fully vectorised, one ``(batch, n, d)`` tensor and batched matmuls
  (l. 35-45, l. 220-271); the time loop is a Python ``while`` over Euler steps (l. 290-311).
- Initial condition: ``randn(batch, n, d)`` drawn on the CPU then moved to the device and
  normalised with ``F.normalize(dim=2)`` (l. 44, l. 55). They never seed; here one seeded
  ``torch.Generator`` gives each beta in turn its own fresh draw (so betas do not share
  initial conditions, as in theirs, but runs are reproducible).
- Step (SA, Q = K = V = I, the ``--use_softmax`` path with ``randomKQ = randomV = 0``;
  ``step_1``, l. 220-273): copy x into a work buffer (l. 225), scores = beta * x x^T by
  ``matmul(..., out=)`` into a preallocated buffer (l. 227-228), ``F.softmax(dim=2)``, a new
  tensor each step (l. 243; torch's own max-subtracting softmax), ``matmul(A, x, out=)``
  (l. 257), scale by dt in place (l. 261), add x (l. 268), ``F.normalize(dim=2, out=x)``
  (l. 271). Explicit Euler then re-normalisation, with no tangent projection P^perp.
- Time and recording: time is a Python float advanced by ``t += dt`` (l. 273; so after 300
  steps of 0.1 it is 30.000000000000156, not 30). The step comes first, then, while
  ``t >= checkpoints[k]``, checkpoint k gets the statistic of the current state (l. 290-306).
  Hence checkpoint t = 0 holds the state after the FIRST step (t = 0.1), and every checkpoint
  holds the first step at or past it. The loop ends as soon as ``t >= t_max`` (l. 310).
  The checkpoint grid is ``linspace(0, t_max, 200)`` (l. 334).
- Statistic (``check_stats``, l. 129-149): a separate Gram matmul x x^T at each checkpoint
  (l. 125), an off-diagonal boolean mask ``~eye(n).expand(batch, n, n)`` built anew each time
  and used to index the Gram matrix (l. 147-148), then ``(ip > 0.999).sum() / len(ip)`` (strict
  ``>``; every system has n(n-1) entries, so this is the batch mean of per-system fractions).
  Here 0.999 is ``1 - delta``. The scalar is written into a host array at once (l. 298), which
  synchronises a GPU at every checkpoint.

Not mirrored (outside SA or only I/O): the random Q^T K / V ensembles, the USA path (no softmax,
``exp(.)/n`` with a step rescaled by ``max(sqrt(beta) e^(beta - 1/2), 1)``, l. 26-27 and
l. 253-254; this is their default when ``--use_softmax`` is not given), the cluster counts
(matrix rank per system, off by default), progress prints, pickling and plotting. Checkpoints
never reached (only when ``checkpoints[-1] > t_max``) are NaN here; theirs stay 0.

usage: python benchmarks/baseline_rotf.py --d 8 --betas-num 90 --threads 2 --out P.npy
"""

from __future__ import annotations

import os
import sys


def _preset_thread_env() -> None:
    """Put ``--threads`` into the BLAS/OpenMP variables before numpy and torch load them."""
    argv = sys.argv[1:]
    for i, arg in enumerate(argv):
        value = None
        if arg == "--threads" and i + 1 < len(argv):
            value = argv[i + 1]
        elif arg.startswith("--threads="):
            value = arg.split("=", 1)[1]
        if value is not None and value.isdigit():
            for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
                os.environ[var] = value


if __name__ == "__main__":
    _preset_thread_env()

import argparse
import time

import numpy as np
import torch
import torch.nn.functional as F

DTYPE = torch.float64


def _clustered_fraction(x: torch.Tensor, threshold: float) -> float:
    """Fraction of off-diagonal pairs with <x_i, x_j> > threshold over the whole batch."""
    batch, n, _ = x.shape
    gram = torch.matmul(x, x.transpose(1, 2))
    off_diag = ~torch.eye(n, dtype=torch.bool, device=x.device).expand(batch, -1, -1)
    pairs = gram[off_diag]
    return float((pairs > threshold).sum() / pairs.numel())


def _single_beta(
    beta: float,
    n: int,
    d: int,
    batch: int,
    dt: float,
    t_max: float,
    checkpoints: np.ndarray,
    threshold: float,
    gen: torch.Generator,
    device: torch.device,
) -> np.ndarray:
    """Simulate one beta from a fresh uniform initial draw; P at each checkpoint."""
    gauss = torch.randn(batch, n, d, generator=gen, dtype=DTYPE).to(device)
    x = torch.empty(batch, n, d, dtype=DTYPE, device=device)
    F.normalize(gauss, dim=2, out=x)
    work = torch.empty(batch, n, d, dtype=DTYPE, device=device)
    scores = torch.empty(batch, n, n, dtype=DTYPE, device=device)

    out = np.full(len(checkpoints), np.nan)
    k, t = 0, 0.0
    while True:
        work.copy_(x)
        torch.matmul(work, x.transpose(1, 2), out=scores)
        scores *= beta
        attn = F.softmax(scores, dim=2)
        torch.matmul(attn, x, out=work)
        work *= dt
        work += x
        F.normalize(work, dim=2, out=x)
        t = t + dt

        if k < len(checkpoints) and t >= checkpoints[k]:
            frac = _clustered_fraction(x, threshold)
            while k < len(checkpoints) and t >= checkpoints[k]:
                out[k] = frac
                k += 1
        if t >= t_max:
            break
    return out


def phase_diagram(
    n: int,
    d: int,
    betas: np.ndarray,
    batch: int,
    dt: float,
    t_max: float,
    checkpoints: np.ndarray,
    delta: float,
    seed: int,
    device: str = "cpu",
) -> np.ndarray:
    """Clustered-pair fraction P_delta, shape (len(betas), len(checkpoints)), one beta at a time.

    Each beta runs ``batch`` independent SA systems of ``n`` tokens on S^{d-1} (float64, Euler
    step ``dt`` then re-normalisation) from its own fresh draw, until time ``t_max``; entry
    [b, k] is the fraction of off-diagonal pairs with <x_i, x_j> > 1 - delta at the first
    step at or past ``checkpoints[k]``.
    """
    gen = torch.Generator(device="cpu").manual_seed(seed)
    dev = torch.device(device)
    ckpts = np.asarray(checkpoints, dtype=np.float64)
    result = np.empty((len(betas), len(ckpts)))
    for b, beta in enumerate(np.asarray(betas, dtype=np.float64)):
        result[b] = _single_beta(float(beta), n, d, batch, dt, t_max, ckpts, 1.0 - delta, gen, dev)
    return result


def main() -> None:
    """Command line: run the baseline phase diagram, save it and print the wall time."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=32)
    p.add_argument("--d", type=int, default=8)
    p.add_argument("--beta-min", type=float, default=0.1)
    p.add_argument("--beta-max", type=float, default=9.0)
    p.add_argument("--betas-num", type=int, default=90)
    p.add_argument("--batch", type=int, default=2048)
    p.add_argument("--dt", type=float, default=0.1)
    p.add_argument("--t-max", type=float, default=30.0)
    p.add_argument("--checkpoints", type=int, default=200)
    p.add_argument("--delta", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=None, help="torch intra-op and BLAS threads")
    p.add_argument("--device", default="cpu", help="cpu or cuda (the authors ran on cuda)")
    p.add_argument("--out", default=None, help="save P as .npy here")
    args = p.parse_args()

    if args.threads is not None:
        torch.set_num_threads(args.threads)
        for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ[var] = str(args.threads)

    betas = np.linspace(args.beta_min, args.beta_max, args.betas_num)
    checkpoints = np.linspace(0.0, args.t_max, args.checkpoints)
    start = time.perf_counter()
    P = phase_diagram(
        args.n, args.d, betas, args.batch, args.dt, args.t_max, checkpoints, args.delta, args.seed,
        device=args.device,
    )
    if args.device.startswith("cuda"):
        torch.cuda.synchronize()
    wall = time.perf_counter() - start

    if args.out is not None:
        np.save(args.out, P)
    print(
        f"baseline_rotf: n={args.n} d={args.d} betas={args.betas_num} batch={args.batch} "
        f"dt={args.dt} t_max={args.t_max} checkpoints={args.checkpoints} "
        f"threads={torch.get_num_threads()} device={args.device}"
    )
    print(f"wall time: {wall:.3f} s")


if __name__ == "__main__":
    main()
