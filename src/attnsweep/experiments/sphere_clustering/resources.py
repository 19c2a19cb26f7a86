"""Time and memory of one sphere_clustering job: the estimates checked against ``max_job_hours``
and ``max_job_mib`` before any job runs and handed to Snakemake as its ``runtime`` and ``mem_mb``
(the model of :mod:`attnsweep.plan.cost`), and the sizes the engine cuts a job by."""

from __future__ import annotations

from typing import Any

from attnsweep.dynamics import cpu_chunk_bytes
from attnsweep.dynamics.times import output_steps
from attnsweep.jobspec import JobSpec
from attnsweep.plan import cost


def reduced_dimension(n: int, d: int, opts: dict[str, Any]) -> int:
    """The dimension the tokens are integrated in: n when Q = K = V = I and n < d (they stay in
    the span of the initial ones, :func:`attnsweep.dynamics.sphere.span_coordinates`), else d."""
    return min(n, d) if opts["matrices"] == "identity" else d


def system_bytes(n: int, d: int, size: int, integrator: str) -> int:
    """Working memory of one system during a step: scores and weights, tokens and stages, matrices."""
    stages = 4 if integrator == "rk4" else 1
    return size * (3 * n * n + (3 + 2 * stages) * n * d + 2 * d * d)


def memory_bytes(job: JobSpec) -> int:
    """One chunk of systems (``block_mib``, at least one system), the recorded observables
    (float64 per system and output time: records, result, and the result encoded for the
    one-file store), snapshots (result and encoded), 300 MiB runtime."""
    opts, grid = job.options, job.grid
    size = job.itemsize
    systems = len(job.seeds) * len(grid["rho"]) * len(grid["beta"]) * len(grid["gamma"])
    times = len(output_steps(opts["dt"], opts["t_max"], opts["outputs"], opts["spacing"]))
    points = len(grid["n"]) * len(grid["d"])
    records = systems * times * len(opts["observables"]) * 8
    chunk = max(max(system_bytes(int(n), int(d), size, opts["integrator"]), job.block_mib << 20)
                for n in grid["n"] for d in grid["d"])
    snapshots = points * systems * len(opts["snapshot_times"]) * max(grid["n"]) * 2 * 8
    return chunk + records + 2 * points * records + 3 * snapshots + (300 << 20)


def seconds(job: JobSpec) -> float:
    """t_max/dt steps of every system (:func:`attnsweep.plan.cost.dynamics`); a record is the Gram
    matrix and its pair statistics, plus an n x n SVD for the Boolean rank."""
    opts, grid = job.options, job.grid
    size = job.itemsize
    systems = len(job.seeds) * len(grid["rho"]) * len(grid["beta"]) * len(grid["gamma"])
    stages = 4 if opts["integrator"] == "rk4" else 1
    total = cost.JOB_S
    for n in map(int, grid["n"]):
        for d in (reduced_dimension(n, int(d), opts) for d in grid["d"]):
            record = 2 * n * n * d + 30 * n * n + (12 * n ** 3 if "boolean_rank" in opts["observables"] else 0)
            batches = cost.chunks(systems, system_bytes(n, d, size, opts["integrator"]),
                                  cpu_chunk_bytes(job.block_mib))
            total += cost.dynamics(n, d, systems, opts["t_max"] / opts["dt"], stages, opts["outputs"], record,
                                   batches, job.dtype, opts["matrices"] != "identity")
    return total
