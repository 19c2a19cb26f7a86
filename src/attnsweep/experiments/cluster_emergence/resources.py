"""Time and memory of one cluster_emergence job: the estimates checked against ``max_job_hours`` and
``max_job_mib`` before any job runs and handed to Snakemake as its ``runtime`` and ``mem_mb`` (the
model of :mod:`attnsweep.plan.cost`), and the sizes the engine cuts a job by."""

from __future__ import annotations

from attnsweep.dynamics import cpu_chunk_bytes
from attnsweep.dynamics.times import output_steps
from attnsweep.experiments.cluster_emergence import checkpoint
from attnsweep.jobspec import JobSpec
from attnsweep.plan import cost


def system_bytes(n: int, d: int, size: int, integrator: str) -> int:
    """Working memory of one system during a step (bytes, ``size`` per number): scores, P and
    distances, tokens and integrator stages, matrices."""
    stages = 4 if integrator == "rk4" else 1
    return size * (4 * n * n + (3 + 2 * stages) * n * d + 8 * d * d)


def memory_bytes(job: JobSpec) -> int:
    """One chunk of systems (``block_mib``, at least one system), the recorded arrays (float64,
    three times: records, result, and the result encoded for the one-file store), 300 MiB of
    runtime; with a checkpoint, its reading and every head's spectrum per system."""
    opts, grid = job.options, job.grid
    size = job.itemsize
    systems = len(job.seeds) * len(grid["scale"])
    times = len(output_steps(opts["dt"], opts["t_max"], opts["outputs"], opts["spacing"]))
    snaps = len(opts["snapshot_times"])
    worst, stored, reading, spectra = 0, 0, 0, 0
    if opts.get("checkpoint"):  # the checkpoint read, and per system every head's eigenvalues and Def. 4.1
        config = checkpoint.read_config(opts["checkpoint"])
        reading = checkpoint.job_bytes(opts["checkpoint"])
        spectra = 2 * config["hidden_size"] + 6 * config["num_attention_heads"]
    for n in map(int, grid["n"]):
        for d in map(int, grid["d"]):
            one = system_bytes(n, d, size, opts["integrator"])
            per_system = times * (4 + 6 * opts["modes"]) + snaps * n * (9 + opts["modes"] + n) + 8 * opts["modes"]
            worst = max(worst, max(one, job.block_mib << 20))
            stored += systems * (per_system + spectra) * 8
    return worst + 3 * stored + reading + (300 << 20)


def seconds(job: JobSpec) -> float:
    """t_max/dt steps of every system (:func:`attnsweep.plan.cost.dynamics`; e^{tV} at every stage,
    ~4 d^3, and the products with Q^T K and V); a record is an n x n SVD for the rank, the
    Boolean defect, leaders, the distance graph of the clusters and the eigen-coordinates."""
    opts, grid = job.options, job.grid
    size = job.itemsize
    systems = len(job.seeds) * len(grid["scale"])
    stages = 4 if opts["integrator"] == "rk4" else 1
    total = cost.JOB_S + (checkpoint.job_seconds(opts["checkpoint"]) if opts.get("checkpoint") else 0.0)
    for n in map(int, grid["n"]):
        for d in map(int, grid["d"]):
            record = 12 * n ** 3 + 4 * n * n * d + 40 * n * n + 20 * n * d * opts["modes"]
            batches = cost.chunks(systems, system_bytes(n, d, size, opts["integrator"]),
                                  cpu_chunk_bytes(job.block_mib))
            total += cost.dynamics(n, d, systems, opts["t_max"] / opts["dt"], stages, opts["outputs"], record,
                                   batches, job.dtype, matrices=True, stage_flops=4 * d ** 3)
    return total
