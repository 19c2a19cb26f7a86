"""Time and memory of one causal_clustering job: the estimates checked against ``max_job_hours`` and
``max_job_mib`` before any job runs and handed to Snakemake as its ``runtime`` and ``mem_mb`` (the
model of :mod:`attnsweep.plan.cost`), and the sizes the engine cuts a job by."""

from __future__ import annotations

from attnsweep.dynamics import cpu_chunk_bytes
from attnsweep.dynamics.times import output_steps
from attnsweep.jobspec import JobSpec
from attnsweep.plan import cost


def chunk_bytes(n: int, d: int, size: int, integrator: str, captures: int) -> int:
    """Working memory of one system during a step or a record: scores and weights, Gram and
    capture distances, tokens and integrator stages, V."""
    stages = 4 if integrator == "rk4" else 1
    return size * (4 * n * n + (4 + 2 * stages) * n * d + d * d + 2 * n * captures)


def memory_bytes(job: JobSpec) -> int:
    """One chunk of systems (``block_mib``, at least one system), the recorded arrays (float64,
    three times: records, result, and the result encoded for the one-file store), 300 MiB of
    runtime."""
    opts, grid = job.options, job.grid
    size = job.itemsize
    systems = len(job.seeds) * len(grid["beta"]) * len(opts["values"]) * len(opts["masks"])
    times = len(output_steps(opts["dt"], opts["t_max"], opts["outputs"], opts["spacing"]))
    tokens, captures = int(max(grid["n"])), len(opts["capture"])
    per_system = times * (2 * captures + 3) + 2 + len(opts["snapshot_times"]) * tokens * 3 + 2 * tokens
    chunk = max(max(chunk_bytes(int(n), int(d), size, opts["integrator"], captures), job.block_mib << 20)
                for n in grid["n"] for d in grid["d"])
    points = len(grid["n"]) * len(grid["d"])
    return chunk + 3 * points * systems * per_system * 8 + (300 << 20)


def seconds(job: JobSpec) -> float:
    """t_max/dt steps of every system (:func:`attnsweep.plan.cost.dynamics`); a record is the Gram
    matrix, the cluster count and the capture distances to both kinds of centres."""
    opts, grid = job.options, job.grid
    size = job.itemsize
    systems = len(job.seeds) * len(grid["beta"]) * len(opts["values"]) * len(opts["masks"])
    stages = 4 if opts["integrator"] == "rk4" else 1
    captures = len(opts["capture"])
    matrices = any(name != "identity" for name in opts["values"])
    total = cost.JOB_S
    for n in map(int, grid["n"]):
        for d in map(int, grid["d"]):
            record = 2 * n * n * d + (40 + 8 * captures) * n * n
            batches = cost.chunks(systems, chunk_bytes(n, d, size, opts["integrator"], captures),
                                  cpu_chunk_bytes(job.block_mib))
            total += cost.dynamics(n, d, systems, opts["t_max"] / opts["dt"], stages, opts["outputs"], record,
                                   batches, job.dtype, matrices)
    return total
