"""Time estimates of simulate jobs, in seconds on one CPU core, from counted work.

A job's time is modelled as the work it counts, at three calibrated rates::

    seconds = JOB_S + ops * OP_S + flops / FLOPS[dtype] + gemm / GEMM_FLOPS[dtype]

``ops`` counts torch operations (each costs its dispatch and allocation, which dominates on
small tensors), ``flops`` the floating-point work of small batched products and element-wise
passes, and ``gemm`` that of products of matrices of hundreds of rows.
The constants were fitted to measured jobs of every experiment on a 2-core AMD EPYC, torch 2.13
CPU, one thread (``benchmarks/bench_cost.py``, ``benchmarks/RESULTS.md``, which give the
estimate against the measured time job by job). A GPU or more threads are faster: the estimate is
a bound for planning (``max_job_hours``, Snakemake's ``runtime``), not a prediction of them.
"""

from __future__ import annotations

import math

JOB_S = 0.3  # set-up, initial draws and the store write of one job (the warm server spares imports)
OP_S = 6e-6  # one torch operation on a small CPU tensor
FLOPS = {"float32": 6e9, "float64": 3e9}  # one core, batched small products and element-wise passes
GEMM_FLOPS = {"float32": 4e10, "float64": 2e10}  # one core, products of matrices of hundreds of rows
RUNTIME_MARGIN = 2.0  # Snakemake's runtime: this times the estimate, plus RUNTIME_SLACK_MIN
RUNTIME_SLACK_MIN = 10


def seconds(flops: float, ops: float, dtype: str, gemm: float = 0.0) -> float:
    """Time of ``flops`` of work spread over ``ops`` torch operations, plus ``gemm`` flops of
    large matrix products."""
    return ops * OP_S + flops / FLOPS[dtype] + gemm / GEMM_FLOPS[dtype]


def hours(job_seconds: float) -> float:
    return job_seconds / 3600


def runtime_minutes(job_seconds: float) -> int:
    """Snakemake's ``runtime`` of a job (minutes): a margin over the estimate, for slower nodes."""
    return math.ceil(RUNTIME_MARGIN * job_seconds / 60) + RUNTIME_SLACK_MIN


def chunks(systems: int, system_bytes: int, budget_bytes: int) -> int:
    """Tensor batches a job cuts ``systems`` into: as many systems per batch as fit the budget."""
    return math.ceil(systems / max(1, budget_bytes // max(system_bytes, 1)))


def field_products(n: int, d: int, matrices: bool = False) -> int:
    """Flops of the matrix products of one field evaluation of one cloud of n tokens in d
    dimensions: the scores and the weighted sum (4 n^2 d), and with ``matrices`` 4 n d^2 more for
    the products with Q^T K and V."""
    return 4 * n * n * d + (4 * n * d * d if matrices else 0)


def dynamics(n: int, d: int, systems: int, steps: float, stages: int, records: int, record_flops: float,
             batches: int, dtype: str, matrices: bool = False, stage_flops: float = 0.0) -> float:
    """Seconds of an attention-dynamics integration of ``systems`` clouds of n tokens in d
    dimensions, cut into ``batches``: ``steps`` steps of ``stages`` field evaluations (products
    of :func:`field_products`; the softmax,
    mask and projection, ~30 n^2 element-wise, and ``stage_flops`` more of the engine's own),
    and ``records`` recordings of ``record_flops`` each per system."""
    products = field_products(n, d, matrices)
    step = seconds(systems * stages * (30 * n * n + stage_flops), batches * stages * 12, dtype,
                   gemm=systems * stages * products)
    record = seconds(systems * record_flops, batches * 20, dtype)
    return steps * step + records * record
