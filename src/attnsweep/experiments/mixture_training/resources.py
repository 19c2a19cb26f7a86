"""Time and memory of one mixture_training job: the estimates checked against ``max_job_hours``
and ``max_job_mib`` before any job runs and handed to Snakemake as its ``runtime`` and ``mem_mb``
(the model of :mod:`attnsweep.plan.cost`), and the sizes both they and the training take: the recorded
steps, the stage lengths of Algorithm 1, the data's dimension and sequences, a step's flops."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from attnsweep.experiments.mixture_training import images
from attnsweep.jobspec import JobSpec
from attnsweep.plan import cost

#: The scalar series recorded per system and record (simulate writes them, the memory estimate counts them).
SERIES = ("loss_pop", "loss_easy", "loss_hard", "acc_easy", "acc_hard", "margin_easy", "margin_hard", "gamma",
          "sym_score", "sym_align")

def recorded_steps(steps: int, every: int) -> np.ndarray:
    """0, every, 2 every, ..., and the last step."""
    return np.unique(np.r_[np.arange(0, steps + 1, every), steps])


def three_stage_steps(options: dict[str, Any], K: int, omega: float, lr: float, b: float) -> tuple[int, int]:
    """Steps of stages 1 and 2 of Algorithm 1: the config's, or the defaults where "auto"
    (n_1 = 50 K, n_2 = 1.5 tau_2 / lr, tau_2 scaled with K - 1: docs/papers/002.md §8); stage 3 runs the rest."""
    first, second = options["stage_1_steps"], options["stage_2_steps"]
    if "auto" in (first, second):
        from attnsweep.experiments.mixture_training import theory  # scipy: only where a stage is "auto"

        n_1, n_2, _ = theory.stage_steps(K, omega, lr, b)
        first, second = (n_1 if first == "auto" else first), (n_2 if second == "auto" else second)
    return int(first), int(second)


def sizes(options: dict[str, Any], K: int, L: int) -> tuple[int, float]:
    """Token dimension d and sequences N of the data: the exact population (d = 2K, 2K (2(K - 1))^{L-2}
    sequences; a float, so that an absurd L overflows rather than hangs) or the digit images."""
    if options["source"] == "digits":
        return images.dimension(options["image_file"]), options["samples"]
    return 2 * K, 2 * K * float(2 * (K - 1)) ** (L - 2)


def step_flops(options: dict[str, Any], K: int, L: int, m: float, engine: str) -> float:
    """Flops of one training step of one system: a forward and a backward pass (3x the forward)
    over the (mini)batch of sequences. Logits come from the 3K x 3K matrix U S U^T of the
    population's tokens, or from S x_l for every token of real images (2 N L d^2); then the softmax
    over L keys and the heads (4 N L d + 10 N L^2), and the direct engine's m x d weights (2 m d^2)."""
    d, N = sizes(options, K, L)
    batch = options["batch"] if options["data"] == "minibatch" else N
    tokens = 3 * K
    logits = (2 * batch * L * d * d if options["source"] == "digits"
              else 2 * tokens * d * (d + tokens) + batch * L * L)
    forward = logits + 4 * batch * L * d + 10 * batch * L * L
    width = 2 * m * d * d if engine == "direct" else 0
    return 3 * (forward + width)


def memory_bytes(job: JobSpec) -> int:
    """The forward and backward of one batch, the recorded arrays (float64, three times: the
    batch's, the job's, and the job's encoded for the one-file store), and 400 MiB for the
    process itself (imports, the store write). Measured with the earlier directory store:
    268 MiB for a tiny job, 376 MiB for 16 systems with 1001 records at K = 4 (estimate then
    442), 909 MiB for the paper's K = 8 job (64 systems, 1001 records; estimate then 1143)."""
    grid, opts = job.grid, job.options
    size = job.itemsize
    K, L = int(max(grid["K"])), int(max(grid["L"]))
    finite = [m for m in grid["m"] if not math.isinf(m)]
    m = int(max(finite, default=1))
    d, N = sizes(opts, K, L)
    systems = len(job.seeds) * len(opts["modes"]) * math.prod(len(grid[a]) for a in ("omega", "lr", "b"))
    per_system = 2 * (8 * N * L * L + 4 * N * L * d + 8 * m * d + 6 * d * d) + 4 * N + 2 * N * (2 * d + 1)
    if opts["data"] == "minibatch":
        per_system += opts["steps"] * opts["batch"]
    records = len(recorded_steps(opts["steps"], opts["record_every"]))
    per_record = len(SERIES) + 4 + (L - 1) + 4 * K + 8 * K * K  # SHAPES: s_same, s_cross, opposing, align, score
    maps = (len(opts["map_steps"]) + 1) * 2 * 2 ** (L - 1) * L * L
    points = math.prod(len(grid[a]) for a in ("K", "L", "m")) * len(opts["engines"])
    stored = 3 * 8 * points * systems * (records * per_record + maps)
    return systems * per_system * size + stored + (400 << 20)


def seconds(job: JobSpec) -> float:
    """Per (K, L, m, engine) one batch of systems: every step :func:`step_flops` a system in
    ~150 torch operations. Every record: the max-margin NNLS per system (measured ~0.2 ms +
    18 us a sample: 4 ms at N = 224)."""
    grid, opts = job.grid, job.options
    systems = len(job.seeds) * len(opts["modes"]) * math.prod(len(grid[a]) for a in ("omega", "lr", "b"))
    records = opts["steps"] // opts["record_every"] + 2
    total = cost.JOB_S
    for K in map(int, grid["K"]):
        for L in map(int, grid["L"]):
            N = sizes(opts, K, L)[1]
            for m in grid["m"]:
                for engine in opts["engines"]:
                    flops = systems * step_flops(opts, K, L, m, engine)
                    qp = records * systems * (2e-4 + 1.8e-5 * N)
                    total += opts["steps"] * cost.seconds(flops, 150, job.dtype) + qp
    return total
