"""Time and memory of one circle_synchronization job (the model of :mod:`attnsweep.plan.cost`), and
the flow's step. No torch: the planner imports it."""

from __future__ import annotations

import numpy as np

from attnsweep.dynamics import cpu_chunk_bytes
from attnsweep.jobspec import JobSpec
from attnsweep.plan import cost


def rate(beta: np.ndarray | float, normalisation: str) -> np.ndarray:
    """An upper bound of the spectral radius of the flow's Jacobian at beta. USA: J = H / n and
    |H| <= n sup|g'| <= n e^{|beta|}(1 + |beta|) (H = -sum_{i<j} g'_ij (e_i - e_j)(e_i - e_j)^T).
    SA: with w_ij the softmax weights, dtheta_i'/dtheta_k = w_ik [cos(theta_k - theta_i) +
    beta sin(theta_i - theta_k)(sin(theta_k - theta_i) - theta_i')] for k != i, at most
    w_ik (1 + 2|beta|), and the diagonal is minus their sum: every row sums to at most 2(1 + 2|beta|)."""
    b = np.abs(np.asarray(beta, float))
    return 2 * (1 + 2 * b) if normalisation == "sa" else np.exp(b) * (1 + b)


def steps(beta: np.ndarray | float, normalisation: str, opts: dict) -> np.ndarray:
    """Euler steps to t_max at dt = courant / rate(beta)."""
    return np.ceil(opts["t_max"] * rate(beta, normalisation) / opts["courant"])


def system_bytes(n: int, size: int) -> int:
    """One system during a step: Gram matrix, weights and their product, angles."""
    return size * (3 * n * n + 8 * n)


def _systems(job: JobSpec) -> int:
    return len(job.seeds) * len(job.grid["beta"]) * len(job.options["normalisations"])


def memory_bytes(job: JobSpec) -> int:
    """One chunk of systems, the polish's Hessians (float64, three per system of the chunk), the
    result, 300 MiB runtime."""
    n = int(max(job.grid["n"]))
    systems = _systems(job)
    chunk = max(system_bytes(n, job.itemsize), job.block_mib << 20)
    per_chunk = max(1, cpu_chunk_bytes(job.block_mib) // system_bytes(n, job.itemsize))
    polish = 3 * min(systems, per_chunk) * n * n * 8
    result = len(job.grid["n"]) * systems * (12 + n) * 8
    return chunk + polish + result + (300 << 20)


def seconds(job: JobSpec) -> float:
    """Every start's Euler steps to t_max (the flow stops earlier where it comes to rest: an upper
    bound), one Gram product, ~30 n^2 element-wise and two products a step; then the polish, a few
    n^3 solves and one eigenproblem per start."""
    opts = job.options
    per_beta = len(job.seeds)
    total = cost.JOB_S
    for n in map(int, job.grid["n"]):
        batches = cost.chunks(_systems(job), system_bytes(n, job.itemsize), cpu_chunk_bytes(job.block_mib))
        for normalisation in opts["normalisations"]:
            for beta in job.grid["beta"]:
                k = float(steps(beta, normalisation, opts))
                total += k * cost.seconds(per_beta * (30 * n * n + 10 * n), batches * 12, job.dtype,
                                          gemm=per_beta * 6 * n * n)
        total += cost.seconds(_systems(job) * 20 * n ** 3, _systems(job) * 200, "float64")
    return total


def theory_seconds(job: JobSpec) -> float:
    """The structured search at one n (:func:`.theory.theory`), family by family: one batched Newton
    over the scan's betas x its starting guesses, then a bisection of ~log2(step / tol) single
    solves. A Newton solve counts up to 30 steps of up to 10 halvings (~100 evaluations of the
    force and ~40 numpy calls each; the exponential, sine and cosine of every pair of clusters
    ~200 flops), and every converged start a few hundred microseconds of Python (its family and
    duplicates checked), and each step's linear solve k^3 / 3 flops. An upper bound where few
    families are bisected, as most end unstable."""
    from attnsweep.experiments.circle_synchronization import structured

    (n,) = map(int, job.grid["n"])
    opts = job.options
    systems = len(structured.scan(opts["scan"])) * (structured.RANDOM_GUESSES + 2)
    bisection = max(1.0, np.log2(opts["scan"]["step"] / opts["threshold_tol"]))
    total = cost.JOB_S
    for masses in structured.families(n, opts["k_max"], opts["spread"]):
        k = len(masses)
        flops, ops = 100 * 200 * k * k + 30 * k ** 3 / 3, 100 * 40  # one start's solve; numpy calls a solve
        total += cost.seconds(systems * flops, ops, "float64") + systems * 3e-4  # the scan
        total += bisection * cost.seconds(flops, ops, "float64")
    return total
