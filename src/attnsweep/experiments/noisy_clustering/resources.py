"""Time and memory of one noisy_clustering job (the model of :mod:`attnsweep.plan.cost`), the
recorded steps, and the couplings a K axis value stands for. No torch: the planner imports it."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from attnsweep.dynamics import NOISE_BLOCK, cpu_chunk_bytes
from attnsweep.jobspec import JobSpec
from attnsweep.plan import cost

#: The initial conditions, in the order of the store's ``start`` flag values.
STARTS = ("uniform", "point")


def couplings(K: list[float], beta: list[float], d: int, unit: str) -> np.ndarray:
    """K (len K, len beta) from the axis values: themselves, or in units of K_#(beta, d)."""
    values = np.asarray(K, float)[:, None] * np.ones(len(beta))
    if unit == "K_sharp":
        from attnsweep.experiments.noisy_clustering.theory import k_sharp  # scipy: only where asked

        values = values * k_sharp(np.asarray(beta, float), d)[None, :]
    return values


def recorded_steps(opts: dict[str, Any]) -> np.ndarray:
    """The steps at which a run records: every ``record_every`` from 0 through burn_in + window."""
    last = math.ceil(round((opts["burn_in"] + opts["window"]) / opts["dt"], 9))
    return np.arange(0, last + 1, opts["record_every"], dtype=np.int64)


def system_bytes(n: int, d: int, size: int) -> int:
    """Working memory of one system during a step: Gram matrix, weights, tokens, field, increments
    (a block of them in float64 and in ``size``)."""
    return size * (3 * n * n + 6 * n * d + d * d) + (8 + size) * NOISE_BLOCK * n * d


def _systems(job: JobSpec) -> int:
    return len(job.seeds) * len(job.options["starts"]) * len(job.grid["beta"]) * len(job.grid["K"])


def memory_bytes(job: JobSpec) -> int:
    """One chunk of systems (``block_mib``, at least one system), the recorded series of every
    system (5 observables, float64, held until the chunk ends), the result, 300 MiB runtime."""
    systems = _systems(job)
    records = len(recorded_steps(job.options))
    chunk = max(max(system_bytes(int(n), int(d), job.itemsize), job.block_mib << 20)
                for n in job.grid["n"] for d in job.grid["d"])
    series = 2 * systems * records * 5 * 8
    points = len(job.grid["n"]) * len(job.grid["d"])
    result = 3 * points * systems * (15 + 2 * job.options["trace_points"]) * 8
    return chunk + series + result + (300 << 20)


def seconds(job: JobSpec) -> float:
    """burn_in + window over dt steps of every system (:func:`attnsweep.plan.cost.dynamics`, one
    field evaluation each, plus the noise where some K is finite: one draw and a tangent projection
    per token and step);
    a record is the Gram matrix, the cluster components and a d x d eigenproblem."""
    opts = job.options
    systems = _systems(job)
    steps = (opts["burn_in"] + opts["window"]) / opts["dt"]
    records = len(recorded_steps(opts))
    noisy = any(math.isfinite(k) for k in job.grid["K"])
    total = cost.JOB_S
    for n in map(int, job.grid["n"]):
        for d in map(int, job.grid["d"]):
            record = 2 * n * n * d + 30 * n * n + 10 * d ** 3
            batches = cost.chunks(systems, system_bytes(n, d, job.itemsize), cpu_chunk_bytes(job.block_mib))
            total += cost.dynamics(n, d, systems, steps, 1, records, record, batches, job.dtype,
                                   stage_flops=40 * n * d if noisy else 0.0)
    return total
