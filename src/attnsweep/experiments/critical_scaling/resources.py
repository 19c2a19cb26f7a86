"""Time and memory of one critical_scaling job: the estimates checked against ``max_job_hours``
and ``max_job_mib`` before any job runs and handed to Snakemake as its ``runtime`` and ``mem_mb``
(the model of :mod:`attnsweep.plan.cost`), and where a job samples pairs rather than taking all."""

from __future__ import annotations

import itertools
from typing import Any

from attnsweep.jobspec import JobSpec
from attnsweep.plan import cost


def subsampled(n: int, opts: dict[str, Any], key: str) -> bool:
    """Whether n exceeds the sampling threshold ``key`` (None or absent: no n of the job does)."""
    return opts.get(key) is not None and n > opts[key]


def queries(n: int, opts: dict[str, Any]) -> int:
    """The tokens at which the layer is computed: ``query_tokens`` above it, else all n."""
    return opts["query_tokens"] if subsampled(n, opts, "query_tokens") else n


def squared_gram_fits(n: int, d: int, itemsize: int, budget_bytes: int) -> bool:
    """Whether exact eta's covariance term ``sum_lm A_il A_im <c_l, c_m>^2`` is a product with the
    n x n squared Gram (n <= d^2 and it fits ``budget_bytes``), not a sum of d x d covariances
    (``kernel.jacobian_frobenius``; d: the dimension it works in)."""
    return n <= d * d and n * n * itemsize <= budget_bytes


def memory_bytes(job: JobSpec) -> int:
    """Tokens, the (gamma x alpha x n x d) outputs of ``kernel.observe``, Hutchinson probes
    and tangents, twice the row-block budget, sampled pairs, quantile pairs, 300 MiB of runtime."""
    opts, grid = job.options, job.grid
    size = job.itemsize
    n_gamma, n_alpha = len(grid["gamma"]), len(grid["alpha"])
    worst = 0
    for n, d in itertools.product(grid["n"], grid["d"]):
        n, d = int(n), int(d)
        hutchinson = opts["eta_method"] == "hutchinson"
        d_work = d if hutchinson else min(d, n + 1)  # exact and none work in the tokens' span
        need = n * d * (8 + 4 * size) + size * queries(n, opts) * d_work * (n_gamma + 2 * n_gamma * n_alpha)
        if hutchinson:
            need += opts["probes"] * n * d * (1 + size)
        if subsampled(n, opts, "pair_subsample_n"):
            need += 16 * opts["pair_samples"]
        tokens = queries(n, opts)  # the quantiles' tokens are among them
        tokens = opts["quantile_tokens"] if subsampled(tokens, opts, "quantile_tokens") else tokens
        need += n_gamma * n_alpha * tokens * tokens * (size + 8)
        worst = max(worst, need)
    return worst + 2 * (job.block_mib << 20) + (300 << 20)


def seconds(job: JobSpec) -> float:
    """Per (n, d, rho, seed): the layer and lambda, then eta over the gamma x alpha batch, by
    Gram matrices in the span of the tokens (exact: products of 8 n^2 d' flops a gamma,
    d' = min(d, n + 1), and the covariance term as ``kernel.jacobian_frobenius`` takes it: where
    n <= d'^2 and the n x n squared Gram fits the row-block budget, a product of 2 n^3 flops a
    gamma and ~35 element-wise passes over n^2, else n^2 d'^2 element-wise for the d' x d'
    covariances) or by 2 probes JVPs (Hutchinson: products of 2 n^2 d (3 + 2 probes) a
    gamma); without eta (none), the layer and lambda: 4 m n d' a gamma and m n exponentials, m
    the query tokens (:func:`queries`), and the input distances among them, 2 m^2 d'."""
    opts, grid = job.options, job.grid
    batch = len(grid["gamma"]) * len(grid["alpha"])
    total = cost.JOB_S
    for n, d in itertools.product(map(int, grid["n"]), map(int, grid["d"])):
        if opts["eta_method"] == "hutchinson":
            products, pairs = 2 * n * n * d * (3 + batch * (3 + 2 * opts["probes"])), 0
        elif opts["eta_method"] == "none":
            span, m = min(d, n + 1), queries(n, opts)
            products, pairs = 2 * m * span * (m + 2 * batch * n), m * n * batch
        else:
            span = min(d, n + 1)
            products = 2 * n * n * span * (3 + 4 * batch)
            if squared_gram_fits(n, span, job.itemsize, job.block_mib << 20):
                products, pairs = products + 2 * n**3 * batch, n * n * batch * 35
            else:
                pairs = n * n * batch * span * span
        total += len(grid["rho"]) * len(job.seeds) * cost.seconds(pairs, 80 * batch, job.dtype, gemm=products)
    return total
