"""Time and memory of one normalized_attention job (the model of :mod:`attnsweep.plan.cost`), and
the sizes the engine cuts a job by. No torch: the planner imports it."""

from __future__ import annotations

from typing import Any

from attnsweep.dynamics import cpu_chunk_bytes
from attnsweep.dynamics.times import output_steps
from attnsweep.jobspec import JobSpec
from attnsweep.plan import cost


def identity_heads(opts: dict[str, Any]) -> bool:
    """Whether every head has Q_h = K_h = V_h = I (then all heads are one)."""
    return opts["qk"] == "identity" and identity_values(opts)


def identity_values(opts: dict[str, Any]) -> bool:
    """Whether every V_h = I."""
    return opts["v"] == "identity" or (opts["v"] == "qk" and opts["qk"] == "identity")


def reduced_dimension(n: int, d: int, opts: dict[str, Any]) -> int:
    """The dimension the directions are integrated in: n when every V_h = I and n < d, else d.
    With V_h = I every A_i is a combination of the theta_j, so every scheme keeps the directions
    in the span of the initial tokens, x = c U^T with U (d, n) orthonormal
    (:func:`attnsweep.dynamics.sphere.span_coordinates`), and the scores read
    c_i^T (U^T Q_h^T K_h U) c_j: the flow of c in R^n is the flow of x."""
    return min(n, d) if identity_values(opts) else d


def system_bytes(n: int, d: int, heads: int, size: int, integrator: str) -> int:
    """Working memory of one system during a step: each head's scores and weights, tokens, values
    and stages, the heads' matrices."""
    stages = 4 if integrator == "rk4" else 1
    return size * (heads * (3 * n * n + 3 * n * d + 2 * d * d) + (3 + 2 * stages) * n * d)


def memory_bytes(job: JobSpec) -> int:
    """One chunk of systems (``block_mib``, at least one system), the recorded observables
    (float64 per system and output time: records, result, and the result encoded for the
    one-file store), 300 MiB runtime."""
    opts, grid = job.options, job.grid
    systems = len(job.seeds) * len(opts["schemes"]) * len(grid["beta"]) * len(grid["heads"])
    times = len(output_steps(opts["dt"], opts["t_max"], opts["outputs"], opts["spacing"]))
    points = len(grid["n"]) * len(grid["d"])
    records = systems * times * (len(opts["observables"]) + 1) * 8
    chunk = max(max(system_bytes(int(n), int(d), int(h), job.itemsize, opts["integrator"]), job.block_mib << 20)
                for n in grid["n"] for d in grid["d"] for h in grid["heads"])
    return chunk + records + 2 * points * records + (300 << 20)


def seconds(job: JobSpec) -> float:
    """t_max/dt steps of every system (:func:`attnsweep.plan.cost.dynamics`), each head a field
    evaluation (one for identity heads, which are all the same); a record is the Gram matrix and
    its pair statistics, plus an n x n SVD for the Boolean rank."""
    opts, grid = job.options, job.grid
    systems = len(job.seeds) * len(opts["schemes"]) * len(grid["beta"])
    stages = 4 if opts["integrator"] == "rk4" else 1
    total = cost.JOB_S
    for n in map(int, grid["n"]):
        for d in (reduced_dimension(n, int(d), opts) for d in grid["d"]):
            record = 2 * n * n * d + 30 * n * n + (12 * n ** 3 if "boolean_rank" in opts["observables"] else 0)
            for h in map(int, grid["heads"]):
                evaluations = 1 if identity_heads(opts) else h
                batches = cost.chunks(systems, system_bytes(n, d, h, job.itemsize, opts["integrator"]),
                                      cpu_chunk_bytes(job.block_mib))
                total += cost.dynamics(n, d, systems * evaluations, opts["t_max"] / opts["dt"], stages,
                                       opts["outputs"], record / evaluations, batches, job.dtype,
                                       not identity_heads(opts))
    return total
