"""The GPU check: one prepared command, about 3.5 minutes (at most 8) on one H100 or H200.

Measured on an H200 (2026-11-26, torch 2.11.0+cu130): 185 and 192 s, plus ~10 s of wheel
installation through ``gpu_check.sh``.

Sections, each in its own time budget (``BUDGET_S``, all within ``--limit-s``); a section that
fails or runs out of time is recorded with its error and the others still run:

1. ``tests``: ``pytest tests/dynamics/test_cuda.py`` in a subprocess (CPU against CUDA, every engine);
   the counts and the failed tests.
2. ``ceilings``: the device's memory bandwidth (a 2 GiB device-to-device copy, bytes read plus
   written per second) and matmul rate (``torch.mm`` of 8192 x 8192 matrices in float32, TF32 off
   as torch leaves it, and in float64), each the median of 5 timed runs after a warm-up.
3. ``jobs``: for every registered experiment, one planned job of its paper-scale config
   (``CASES``: the job the cost model deems longest, with the config's own sizes), simulated in
   this process as a simulate job runs it. Runs over 1% of the job's length (the steps of its
   integration or training; for critical_scaling, its rho values), a warm-up, then once and twice
   that, give its fixed and per-step seconds, which size the measured run to ``--target-s``
   (capped at the whole job). Reported: wall time, work units per second, and the flops and
   bytes per second of the case's work model against the ceilings.
4. ``authors``: the authors' ``phase-diagrams.py`` (paper 001) on this device, run by
   ``benchmarks/authors_rotf.py --device cuda`` (their code as written), against ``attnsweep run
   sphere_clustering`` at the same settings (n = d = 32, 1024 realisations, ``--authors-betas``
   beta in [0.1, 9], dt = 0.1 to ``--authors-t``, 200 records, Euler then renormalisation), ours
   in float64 (theirs is float64 only) and float32: whole processes timed from outside,
   alternated, median of ``--repeats`` rounds; and P_delta at the last time compared within
   Monte Carlo error. Needs ``--authors``; without it the section reads 'not given'.
5. ``estimate``: each paper sweep's time on this device, one simulate job at a time:
   critical_scaling by ``bench_sweep_estimate.py`` (one rho of every (n, d), measured here);
   the others as the work units of every planned job at the rate measured in ``jobs``.

Work models (flops and bytes per unit; bytes count every number a pass reads or writes, from the
passes over the n x n and n x d arrays the engine makes as it evaluates the model's equations,
so the bandwidth fractions are estimates, not measured traffic):

- critical_scaling, per grid point (rho, gamma): the GEMM flops of
  ``bench_sweep_estimate.gemm_gflop`` (the layer, lambda and exact eta in the span of the
  tokens, with the n^3 term of the covariance norm) over the gamma batch; 60 n^2 numbers (the 27
  (n x n) arrays of attention and ``kernel.jacobian_frobenius``, written once and read ~1.2 times).
- sphere_clustering, per system-step of SA with Q = K = V = I (fused kernel): the products of
  ``cost.field_products`` (4 n^2 d, d the integrated dimension min(n, d)); 5 n^2 + 14 n d numbers.
- causal_clustering, per system-step: the same products; 7 n^2 + 20 n d numbers (the causal mask
  and the tangent projection add a pass each).
- cluster_emergence, per system-step: per stage, ``cost.field_products`` with Q^T K and V and
  e^{tV} (4 d^3); 8 n^2 + 20 n d numbers (softmax, flag check).
- noisy_clustering, per system-step of USA (unfused: the weights e^{beta <x_i, x_j>}/n): the
  products of ``cost.field_products``; 5 n^2 + 16 n d numbers (the noise adds a draw, moved to the
  device, and a tangent projection per token).
- normalized_attention, per system-step of H heads with random Q_h^T K_h and V = I: per head the
  scores and the weighted sum (4 n^2 d) and x Q_h^T K_h (2 n d^2); 5 n^2 + 6 n d numbers per head.
- circle_synchronization, per system-step of the flow on the circle (an upper bound of the steps:
  a start stops at rest): a Gram product of (n, 2) angles and two matrix-vector products, 6 n^2;
  5 n^2 numbers (the exponentials and the weights).
- mixture_training, per system-step (one gradient step of one system):
  ``mixture_training.step_flops``; 6 numbers per element-wise flop of its forward pass
  (10 N L^2 + 4 N L d: a read and a write, forward and a backward of twice the work).

Files: ``--out DIR``/gpu_check.md (one table) and gpu_check.json (every number), rewritten after
each section, so a run stopped part-way leaves what it finished; the table is printed last.

The authors' file. It is never committed: put a copy in an ignored folder of the repository,
which the device tool carries (``.authors/`` is listed in .gitignore)::

    git -C CLONE show 538ba839f7fc03d042e03ad7b557c220defc4148:phase-diagrams.py > .authors/phase-diagrams.py

``--authors`` takes that file, its folder, or a clone (see ``authors_rotf.py``, which checks the
file's git blob hash).

usage (repo root):
    python benchmarks/gpu_check.py --out gpu-check --authors .authors/phase-diagrams.py
    benchmarks/gpu_check.sh --out gpu-check --authors .authors/phase-diagrams.py   # a node without attnsweep's
        # dependencies: installs the carried wheels of .whl/ first (see that script)
    python benchmarks/gpu_check.py --out /tmp/plan --dry   # the CPU at toy sizes: the plan and the table (CI)
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import torch
from bench_dynamics import agreement
from bench_kernel import median_time
from bench_sweep_estimate import gemm_gflop, per_rho_seconds, probes_of, sweep_seconds

from attnsweep import registry
from attnsweep.cli import format_duration
from attnsweep.experiments.mixture_training.resources import sizes, step_flops, three_stage_steps
from attnsweep.experiments.sphere_clustering.resources import reduced_dimension
from attnsweep.jobspec import JobSpec
from attnsweep.plan import cost
from attnsweep.plan.config import load_sweep, load_yaml
from attnsweep.plan.experiment_plan import Plan

ROOT = Path(__file__).resolve().parents[1]
SWEEPS = ROOT / "config" / "sweeps"
#: The experiments measured: the built-in ones (an installed plugin has no case here).
BUILT_IN = sorted(point.name for point in registry.BUILTIN)
#: Seconds each section may take on a GPU (``jobs``: per experiment, unless its case says otherwise;
#: ``estimate``: critical_scaling's, then each other's); 470 in all.
BUDGET_S = {"tests": 45, "ceilings": 15, "jobs": 40, "authors": 120, "estimate": 30, "estimate_rate": 5}
CALIBRATION = 0.01  # the calibration runs' share of a job's length (once, then twice)
RESOLVED = 0.25  # the measured run separates set-up from steps when it exceeds the shortest by this share
TOY_TARGET_S = 0.3  # --dry: the measured run of a job
#: --dry multiplies every budget and the limit by this: at toy sizes the work is fixed (a measured
#: run aims at TOY_TARGET_S whatever the budget), so a budget only guards against a hang, and a
#: loaded 2-core CI machine once took over the 45 s of the tests section for pytest's start alone.
DRY_BUDGET_SCALE = 10


# ------------------------------------------------------------------ the paper-scale jobs


@dataclass(frozen=True)
class Case:
    """One experiment's paper-scale config and its work model.

    ``length`` counts the units a job can be cut along (steps, rho values), ``cut`` gives the
    section keys that keep the first k of them; ``units`` counts a job's work units (``unit``),
    ``work`` the flops and bytes of one; ``systems`` names the options batched as systems besides
    the grid and the seeds; ``toy`` the section keys of ``--dry``'s toy sizes; ``budget_s`` the
    seconds its measurement may take on a GPU.
    """

    config: str
    unit: str
    length: Callable[[Plan], int]
    cut: Callable[[Plan, int], dict[str, Any]]
    units: Callable[[JobSpec], float]
    work: Callable[[JobSpec], tuple[float, float]]
    model: str
    toy: dict[str, Any] = field(default_factory=dict)
    budget_s: float = BUDGET_S["jobs"]


def systems(job: JobSpec, options: tuple[str, ...] = ()) -> int:
    """Systems of a job's tensor batch: its seeds, grid values and the options batched alike."""
    return len(job.seeds) * math.prod(len(v) for v in job.grid.values()) * math.prod(
        len(job.options[key]) for key in options)


def steps(options: dict[str, Any]) -> int:
    """Integrator steps of a dynamics job."""
    return int(round(options["t_max"] / options["dt"]))


def cut_time(plan: Plan, k: int) -> dict[str, Any]:
    """A dynamics job to its first k steps, recording as often and keeping the snapshots before."""
    opts = plan.options
    t_max = round(k * opts["dt"], 12)
    cut = {"t_max": t_max, "outputs": max(2, round((opts["outputs"] - 1) * k / steps(opts)) + 1)}
    if "snapshot_times" in opts:
        cut["snapshot_times"] = [t for t in opts["snapshot_times"] if t <= t_max]
    return cut


def cut_training(plan: Plan, k: int) -> dict[str, Any]:
    """A training job to its first k steps; Algorithm 1's stages scaled alike (its longest case)."""
    opts = plan.options
    cut = {"steps": k, "map_steps": [s for s in opts["map_steps"] if s <= k]}
    if "three_stage" in opts["modes"]:
        g = plan.grid
        stages = [three_stage_steps(opts, int(K), omega, lr, b)
                  for K in g["K"] for omega in g["omega"] for lr in g["lr"] for b in g["b"]]
        n_1, n_2 = max(stages, key=sum)
        cut.update(stage_1_steps=max(1, n_1 * k // opts["steps"]), stage_2_steps=max(1, n_2 * k // opts["steps"]))
    return cut


def noisy_steps(options: dict[str, Any]) -> int:
    """Euler-Maruyama steps of a noisy_clustering job: burn-in and window."""
    return int(round((options["burn_in"] + options["window"]) / options["dt"]))


def cut_noisy(plan: Plan, k: int) -> dict[str, Any]:
    """A noisy_clustering job to its first k steps: the burn-in first, then what the window keeps
    (at least two records)."""
    opts = plan.options
    total = round(k * opts["dt"], 12)
    burn_in = min(opts["burn_in"], total / 2)
    window = max(total - burn_in, 2 * opts["record_every"] * opts["dt"])
    return {"burn_in": burn_in, "window": window}


def point(job: JobSpec) -> tuple[int, int, int]:
    """(n, d, bytes per number) of a job of one (n, d)."""
    return int(job.grid["n"][0]), int(job.grid["d"][0]), job.itemsize


def critical_work(job: JobSpec) -> tuple[float, float]:
    n, d, size = point(job)
    if probes_of(job.options) is not None:
        raise ValueError("the work model counts exact eta (the paper config's), not Hutchinson")
    n_gamma, n_alpha = len(job.grid["gamma"]), len(job.grid["alpha"])
    return gemm_gflop(n, d, n_gamma, None) * 1e9 / (n_gamma * n_alpha), 60 * n * n * size / n_alpha


def sphere_work(job: JobSpec) -> tuple[float, float]:
    n, d, size = point(job)
    d = reduced_dimension(n, d, job.options)
    stages = 4 if job.options["integrator"] == "rk4" else 1
    return stages * cost.field_products(n, d), stages * size * (5 * n * n + 14 * n * d)


def causal_work(job: JobSpec) -> tuple[float, float]:
    n, d, size = point(job)
    stages = 4 if job.options["integrator"] == "rk4" else 1
    return stages * cost.field_products(n, d), stages * size * (7 * n * n + 20 * n * d)


def emergence_work(job: JobSpec) -> tuple[float, float]:
    n, d, size = point(job)
    stages = 4 if job.options["integrator"] == "rk4" else 1
    return stages * (cost.field_products(n, d, True) + 4 * d**3), stages * size * (8 * n * n + 20 * n * d)


def noisy_work(job: JobSpec) -> tuple[float, float]:
    n, d, size = point(job)
    return cost.field_products(n, d), size * (5 * n * n + 16 * n * d)


def normalized_work(job: JobSpec) -> tuple[float, float]:
    n, d, size = point(job)
    heads = int(job.grid["heads"][0])
    stages = 4 if job.options["integrator"] == "rk4" else 1
    return stages * heads * (4 * n * n * d + 2 * n * d * d), stages * size * heads * (5 * n * n + 6 * n * d)


def mixture_work(job: JobSpec) -> tuple[float, float]:
    K, L, m = int(job.grid["K"][0]), int(job.grid["L"][0]), job.grid["m"][0]
    engines = job.options["engines"]
    flops = statistics.mean(step_flops(job.options, K, L, m, engine) for engine in engines)
    d, N = sizes(job.options, K, L)
    return flops, 6 * job.itemsize * (10 * N * L * L + 4 * N * L * d)


def circle_units(job: JobSpec) -> float:
    """Euler steps of every start to t_max (resources.steps: an upper bound, a start stops at rest)."""
    from attnsweep.experiments.circle_synchronization.resources import steps as circle_steps

    return len(job.seeds) * sum(float(circle_steps(beta, norm, job.options)) for beta in job.grid["beta"]
                                for norm in job.options["normalisations"])


def circle_work(job: JobSpec) -> tuple[float, float]:
    n, size = int(job.grid["n"][0]), job.itemsize
    return 6 * n * n, size * 5 * n * n


def dynamics(config: str, work: Callable[[JobSpec], tuple[float, float]], model: str, toy: dict[str, Any],
             batched: tuple[str, ...] = (), budget_s: float = BUDGET_S["jobs"]) -> Case:
    return Case(config, "system-step", lambda plan: steps(plan.options), cut_time,
                lambda job: systems(job, batched) * steps(job.options), work, model, toy, budget_s)


CASES: dict[str, Case] = {
    "critical_scaling": Case(
        "critical_scaling_paper.yaml", "grid point", lambda plan: len(plan.grid["rho"]),
        lambda plan, k: {"rho": plan.grid["rho"][:k]}, lambda job: systems(job), critical_work,
        "GEMM flops of bench_sweep_estimate.gemm_gflop per (rho, gamma); 60 n^2 numbers",
        {"n": [64], "d": [16, 128], "rho": [0.0, 0.3, 0.6], "gamma": {"start": 0.0, "stop": 25.0, "num": 4},
         "seeds": 1}),
    "sphere_clustering": dynamics(
        "sphere_clustering_fig3.yaml", sphere_work, "4 n^2 d flops (d = min(n, d)); 5 n^2 + 14 n d numbers",
        {"d": [8], "beta": [1.0, 4.0], "seeds": 2}),
    "causal_clustering": dynamics(
        "causal_clustering_fig2_3.yaml", causal_work, "4 n^2 d flops; 7 n^2 + 20 n d numbers",
        {"n": [16], "seeds": 2}, ("values", "masks"), budget_s=80),  # its set-up: centres on the CPU, ~30 s
    "cluster_emergence": dynamics(
        "cluster_emergence_coordinates_high_d.yaml", emergence_work,
        "per stage 4 n^2 d + 4 n d^2 + 4 d^3 flops; 8 n^2 + 20 n d numbers",
        {"n": [16], "d": [4], "seeds": 2, "modes": 4}),
    "noisy_clustering": Case(
        "noisy_clustering_d3.yaml", "system-step", lambda plan: noisy_steps(plan.options), cut_noisy,
        lambda job: systems(job, ("starts",)) * noisy_steps(job.options), noisy_work,
        "4 n^2 d flops; 5 n^2 + 16 n d numbers (the noise: one draw and a projection per token)",
        {"n": [32], "beta": [1.0], "K": [0.8, 1.0], "seeds": 2}),
    "normalized_attention": dynamics(
        "normalized_attention_paper.yaml", normalized_work,
        "per head 4 n^2 d + 2 n d^2 flops (V = I); 5 n^2 + 6 n d numbers",
        {"d": [16], "heads": [2], "beta": [1.0, 4.0], "seeds": 2}, ("schemes",)),
    "circle_synchronization": Case(
        "circle_synchronization_paper.yaml", "system-step", lambda plan: int(plan.options["t_max"]),
        lambda plan, k: {"t_max": float(k)}, circle_units, circle_work,
        "6 n^2 flops (a Gram product, two matrix-vector products); 5 n^2 numbers",
        {"n": [8], "beta": [-1.0, 0.0], "seeds": 4}),
    "mixture_training": Case(
        "mixture_training_paper.yaml", "system-step", lambda plan: plan.options["steps"], cut_training,
        lambda job: systems(job, ("modes", "engines")) * job.options["steps"], mixture_work,
        "mixture_training.step_flops; 6 numbers per element-wise flop of the forward",
        {"K": [2], "seeds": 2, "steps": 200, "stage_1_steps": 50, "stage_2_steps": 50, "map_steps": [0]}),
}


def paper_config(case: Case, name: str, toy: bool) -> dict[str, Any]:
    """The case's sweep config, its section at the toy sizes with ``toy``."""
    config = load_yaml(SWEEPS / case.config)
    if toy:
        config["experiments"][name] = {**config["experiments"][name], **case.toy}
    return config


def planned(config: dict[str, Any], name: str, overrides: dict[str, Any] | None = None) -> Plan:
    """The experiment's plan of ``config``, its section updated by ``overrides`` (validated as any config)."""
    section = {**config["experiments"][name], **(overrides or {})}
    return load_sweep({**config, "experiments": {name: section}}).plans[name]


# ------------------------------------------------------------------ sections


class Timeout(Exception):
    """A section ran past its budget."""


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Raise :class:`Timeout` in this (main) thread after ``seconds``."""
    def fire(signum: int, frame: Any) -> None:
        raise Timeout(f"over its budget of {seconds:.0f} s")

    previous = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def cuda_tests(budget: float, device: torch.device) -> dict[str, Any]:
    """pytest tests/dynamics/test_cuda.py in a subprocess: counts, failed tests, the output's tail on failure."""
    command = [sys.executable, "-m", "pytest", "tests/dynamics/test_cuda.py", "-q", "-rfE", "-p", "no:cacheprovider"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=max(1.0, budget - 2))
    text = done.stdout + done.stderr
    last = text.strip().splitlines()[-1] if text.strip() else "no output"
    counts = {kind: int(k) for k, kind in re.findall(r"(\d+) (passed|failed|skipped|errors?)", last)}
    failed = re.findall(r"^(?:FAILED|ERROR) (\S+)", text, re.M)
    entry = {"counts": counts, "failed": failed, "returncode": done.returncode,
             "summary": last.strip("= ") + (f": {', '.join(failed)}" if failed else "")}
    if done.returncode != 0 or (device.type == "cuda" and not counts.get("passed")):
        entry.update(status="failed", output_tail=text[-3000:])
    return entry


def copy_rate(device: torch.device, nbytes: int, repeats: int) -> float:
    """Bytes read plus written per second by a device-to-device copy of ``nbytes``."""
    src = torch.ones(nbytes // 4, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    return 2 * nbytes / median_time(lambda: dst.copy_(src), repeats, lambda: sync(device))


def mm_rate(device: torch.device, size: int, dtype: torch.dtype, repeats: int) -> float:
    """Flop/s of torch.mm of two ``size`` x ``size`` matrices."""
    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn_like(a)
    return 2 * size**3 / median_time(lambda: a @ b, repeats, lambda: sync(device))


def ceilings(device: torch.device, toy: bool) -> dict[str, Any]:
    """Copy bandwidth (bytes read + written per second) and torch.mm rates (flop/s) by dtype."""
    nbytes, size, repeats = (64 << 20, 256, 3) if toy else (2 << 30, 8192, 5)
    copy = copy_rate(device, nbytes, repeats)
    mm = {dtype: mm_rate(device, size, getattr(torch, dtype), repeats) for dtype in ("float32", "float64")}
    return {"copy_bytes_per_s": copy, "mm_flops_per_s": mm, "copy_gib": nbytes / 2**30, "mm_size": size,
            "tf32": torch.backends.cuda.matmul.allow_tf32,
            "summary": f"copy {nbytes / 2**30:g} GiB: {copy / 1e9:.0f} GB/s read + written; torch.mm {size}^3: "
                       + ", ".join(f"{k} {v / 1e12:.2f} TFLOP/s" for k, v in mm.items())}


def timed(plan: Plan, job: JobSpec, device: torch.device) -> float:
    """Seconds of one simulate call of ``job`` (the device synchronised on both sides)."""
    sync(device)
    start = time.perf_counter()
    plan.experiment.simulate(job, device, getattr(torch, job.dtype), progress=False)
    sync(device)
    return time.perf_counter() - start


def fit(runs: list[tuple[int, float]], measured: tuple[int, float]) -> tuple[float, float, bool]:
    """(set-up s, s a unit, resolved) of a job from its calibration ``runs`` (the first a warm-up)
    and the ``measured`` run, (units, seconds) each: see :func:`measure_job`."""
    k_base, t_base = runs[1] if len(runs) > 1 else runs[0]
    k1, seconds = measured
    resolved = k1 > k_base and seconds - t_base > RESOLVED * seconds
    per_unit = (seconds - t_base) / (k1 - k_base) if resolved else seconds / k1
    return max(0.0, seconds - k1 * per_unit), per_unit, resolved


def measure_job(name: str, device: torch.device, toy: bool, target_s: float, budget: float,
                ceiling: dict[str, Any] | None) -> dict[str, Any]:
    """One paper-scale job of ``name``: calibrated, then measured over about ``target_s``.

    A job's seconds are fitted as ``fixed + per_unit k`` over k units of its length: ``fixed``
    its own set-up (draws, centres, the result), ``per_unit`` a step (or a rho value). Where the
    first run (k0 units, warm-up included) leaves room, runs at k0 and 2 k0 size the measured run;
    where the set-up takes most of the budget, the measured run is the longest that surely fits.
    The fit is the line through the shortest run after the warm-up and the measured run, the
    widest baseline there is (two short runs alone are noise: on an H200, 3 and 6 sphere steps
    took 0.61 and 0.59 s). Where the measured run is not clearly longer than that run (by
    ``RESOLVED`` of its time: the set-up varies by ~10% between runs), set-up and steps are not
    separated, and ``per_unit`` = seconds / k1 is an upper bound (``bound``: the whole job takes at
    most that, the rates are at least those given). Rates and fractions of the ceilings are those
    of the steps (``per_unit``); ``units_per_s`` counts the whole measured run."""
    if name not in CASES:
        raise KeyError(f"no paper-scale case for {name!r} in gpu_check.CASES")
    start = time.perf_counter()
    case = CASES[name]
    config = paper_config(case, name, toy)
    plan = planned(config, name)
    estimates = plan.seconds()
    path = max(estimates, key=estimates.get)  # the longest job by the cost model: it sets the sweep's time

    def run(k: int) -> tuple[JobSpec, float]:
        cut = planned(config, name, case.cut(plan, k))
        return cut.blocks()[path], timed(cut, cut.blocks()[path], device)

    def left() -> float:
        return budget - (time.perf_counter() - start)

    length = case.length(plan)
    k0 = max(1, math.ceil(CALIBRATION * length))
    warm = run(k0)[1]  # first calls too: kernels, handles, caches
    runs = [(k0, warm)]
    if warm < budget / 8:  # a cheap set-up: two more runs separate it from the steps
        runs += [(k0, run(k0)[1]), (2 * k0, run(2 * k0)[1])]
        (_, t_a), (_, t_b) = runs[1:]
        per_unit = (t_b - t_a) / k0 if t_b > t_a else t_b / (2 * k0)
        fixed = max(0.0, t_b - 2 * k0 * per_unit)
        k1 = int(min(length, max(2 * k0, (min(target_s, 0.6 * left()) - fixed) / per_unit)))
    else:  # a costly set-up: a step takes at most warm / k0, so k1 of them fit in the time left
        k1 = int(min(length, max(k0, 0.8 * left() * k0 / warm)))
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    job, seconds = run(k1)
    fixed, per_unit, resolved = fit(runs, (k1, seconds))
    units = case.units(job)
    flops, nbytes = case.work(job)
    steps_rate = units / k1 / per_unit  # work units a second in the steps alone
    entry = {"config": case.config, "job": path, "dtype": job.dtype, "unit": case.unit, "model": case.model,
             "length": length, "length_run": k1, "seconds": seconds, "units": units, "units_per_s": units / seconds,
             "calibration": {"runs": runs, "fixed_s": fixed, "per_unit_s": per_unit,
                             "bound": "fit" if resolved else "upper"},
             "full_job_s": fixed + per_unit * length, "full_job_units": units * length / k1,
             "steps_units_per_s": steps_rate, "flops_per_unit": flops, "bytes_per_unit": nbytes,
             "flops_per_s": flops * steps_rate, "bytes_per_s": nbytes * steps_rate}
    if device.type == "cuda":
        entry["peak_gpu_mib"] = torch.cuda.max_memory_allocated(device) / 2**20
    fractions = ""
    if ceiling:
        entry["of_mm"] = flops * steps_rate / ceiling["mm_flops_per_s"][job.dtype]
        entry["of_copy"] = nbytes * steps_rate / ceiling["copy_bytes_per_s"]
        fractions = f" = {entry['of_mm']:.1%} of mm, {entry['of_copy']:.1%} of copy"
    along = "rho values" if name == "critical_scaling" else "steps"
    entry["summary"] = (f"{case.config} {path} ({job.dtype}), {k1} of {length} {along}: {seconds:.2f} s "
                        f"({units / seconds:.3g} {case.unit}/s); "
                        + (f"fit: set-up {fixed:.2f} s + {per_unit * 1e3:.3g} ms a {along[:-1]}, whole job "
                           f"{format_duration(entry['full_job_s'])}; the steps: " if resolved else
                           f"set-up not separated from the steps: whole job at most "
                           f"{format_duration(entry['full_job_s'])}; the steps at least: ")
                        + f"{steps_rate:.3g} {case.unit}/s, {flops * steps_rate / 1e12:.3g} TFLOP/s, "
                        f"{nbytes * steps_rate / 1e9:.3g} GB/s{fractions}")
    return entry


def authors(args: argparse.Namespace, device: torch.device, budget: float) -> dict[str, Any]:
    """The authors' script against ours at equal settings, whole processes (see the module docstring)."""
    if args.authors is None:
        return {"status": "not given", "summary": "no --authors file (the section runs with the authors' "
                                                  "phase-diagrams.py given: see this script's docstring)"}
    start = time.perf_counter()
    batch, n_beta, t_max = (8, 2, 1.0) if args.dry else (args.authors_batch, args.authors_betas, args.authors_t)
    betas = np.linspace(0.1, 9.0, n_beta)
    settings = f"n = d = 32, {batch} realisations x {n_beta} beta in [0.1, 9], dt = 0.1 to t = {t_max:g}, 200 records"
    with tempfile.TemporaryDirectory() as work:
        theirs_out = Path(work, "theirs.npy")
        theirs = [sys.executable, str(ROOT / "benchmarks" / "authors_rotf.py"), str(args.authors.resolve()),
                  "--device", device.type, "--out", str(theirs_out), "--", "--dmodel", "32", "--ntokens", "32",
                  "--batch", str(batch), "--betamin", "0.1", "--betamax", "9", "--betas", str(n_beta),
                  "--maxtime", str(t_max), "--use_softmax", "--disable_tqdm"]

        def ours(dtype: str) -> list[str]:
            return [sys.executable, "-m", "attnsweep.cli", "run", "sphere_clustering", "n=32", "d=32",
                    "beta=" + ",".join(map(repr, betas.tolist())), f"seeds={batch}", f"t_max={t_max}", "dt=0.1",
                    "outputs=200", "delta=0.001", "observables=clustered,", "integrator=euler",
                    f"device={device.type}", f"dtype={dtype}", "--quiet", "--out", str(Path(work, f"{dtype}.zarr"))]

        commands = {"theirs float64": theirs, "ours float64": ours("float64"), "ours float32": ours("float32")}
        walls: dict[str, list[float]] = {label: [] for label in commands}
        for _ in range(args.repeats):
            round_start = time.perf_counter()
            for label, command in commands.items():
                left = budget - (time.perf_counter() - start) - 2
                began = time.perf_counter()
                done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=max(1.0, left))
                if done.returncode != 0:
                    raise RuntimeError(f"{label} failed ({done.returncode}): {(done.stderr or done.stdout)[-600:]}")
                walls[label].append(time.perf_counter() - began)
            spent = time.perf_counter() - start
            if spent + 1.3 * (time.perf_counter() - round_start) > budget:
                break  # another round would not fit: the medians of the rounds made
        from attnsweep.stores.io import open_store

        mine = open_store(Path(work, "float64.zarr"))["clustered"].isel(t=-1).mean("seed").squeeze().values
        ok, diff, z = agreement(mine, np.load(theirs_out)[:, -1], batch)
    medians = {label: statistics.median(times) for label, times in walls.items()}
    theirs_s = medians["theirs float64"]
    speedup = {dtype: theirs_s / medians[f"ours {dtype}"] for dtype in ("float64", "float32")}
    rows = {label: {"median_s": medians[label], "min_s": min(t), "max_s": max(t), "runs": len(t)}
            for label, t in walls.items()}
    return {"settings": settings, "runs": rows, "speedup": speedup,
            "agreement": {"within_mc": ok, "max_abs_diff": diff, "max_z": z},
            "status": "ok" if ok else "failed",
            "summary": f"{settings}, median of {len(walls['ours float64'])}: theirs {theirs_s:.2f} s, ours float64 "
                       f"{medians['ours float64']:.2f} s ({speedup['float64']:.2f}x), float32 "
                       f"{medians['ours float32']:.2f} s ({speedup['float32']:.2f}x); P_delta at t = {t_max:g} "
                       f"{'within' if ok else 'OUTSIDE'} Monte Carlo error (max diff {diff:.3f}, z {z:.2f})"}


def estimate(name: str, device: torch.device, toy: bool, job: dict[str, Any] | None) -> dict[str, Any]:
    """The paper sweep's time on this device, one simulate job at a time."""
    case = CASES[name]
    plan = planned(paper_config(case, name, toy), name)
    jobs = plan.blocks()
    if name == "critical_scaling":
        per_rho = per_rho_seconds(plan, device, repeats=1 if toy else 3, report=progress)
        seconds = sweep_seconds(plan, per_rho)
        how = f"one rho of each of {len(per_rho)} (n, d) shapes measured (bench_sweep_estimate.py)"
        return {"config": case.config, "jobs": len(jobs), "seconds": seconds, "method": how,
                "per_rho_s": {f"n~{n}/d~{d}": s for (n, d), s in per_rho.items()},
                "summary": f"{case.config}: {len(jobs)} job(s), {format_duration(seconds)}; {how}"}
    if not job or job.get("status") != "ok":
        raise RuntimeError(f"no measured rate: the job of {name} did not run")
    units = sum(case.units(spec) for spec in jobs.values())
    seconds = job["full_job_s"] * units / job["full_job_units"]
    at_most = "at most " if job["calibration"]["bound"] == "upper" else ""
    how = (f"{units:.3g} {case.unit}s at the fitted whole-job time of {job['job']} "
           f"({at_most}{format_duration(job['full_job_s'])} for {job['full_job_units']:.3g})")
    return {"config": case.config, "jobs": len(jobs), "seconds": seconds, "bound": job["calibration"]["bound"],
            "method": how, "summary": f"{case.config}: {len(jobs)} job(s), {at_most}{format_duration(seconds)}; {how}"}


# ------------------------------------------------------------------ the report


START = time.perf_counter()


def progress(message: str) -> None:
    print(f"[gpu_check {time.perf_counter() - START:6.1f} s] {message}", flush=True)


class Report:
    """Sections' entries, written to ``out`` as JSON and one markdown table after each."""

    def __init__(self, out: Path, limit_s: float, meta: dict[str, Any], scale: float = 1.0):
        self.out, self.limit_s, self.scale = out, limit_s * scale, scale  # scale: DRY_BUDGET_SCALE
        self.start = time.perf_counter()  # the limit counts from here (the command's start, in main)
        self.data: dict[str, Any] = {"meta": meta, "sections": {}}
        out.mkdir(parents=True, exist_ok=True)

    def run(self, section: str, item: str, budget: float, fn: Callable[[float], dict[str, Any]]) -> dict[str, Any]:
        """``fn(budget)`` under ``budget`` seconds (less where the command's limit leaves less):
        its entry with ``status`` ok unless it says otherwise, or the error that stopped it."""
        budget = min(budget * self.scale, self.limit_s - (time.perf_counter() - self.start))
        entry: dict[str, Any] = {"budget_s": round(budget, 1)}
        if budget < 5:
            entry.update(status="skipped", summary=f"not run: under 5 s left of the limit ({self.limit_s:g} s)")
        else:
            progress(f"{section}: {item} (budget {budget:.0f} s)")
            start = time.perf_counter()
            try:
                with deadline(budget):
                    entry.update(fn(budget))
                entry.setdefault("status", "ok")
            except (Timeout, subprocess.TimeoutExpired) as err:
                entry.update(status="timeout", summary=f"stopped: {err}")
            except Exception as err:
                entry.update(status="error", summary=f"{type(err).__name__}: {err}",
                             traceback=traceback.format_exc(limit=-4))
            entry["wall_s"] = round(time.perf_counter() - start, 2)
            progress(f"{section}: {item}: {entry['status']}: {entry['summary']}")
        self.data["sections"].setdefault(section, {})[item] = entry
        self.write()
        return entry

    def markdown(self) -> str:
        meta = self.data["meta"]
        lines = [f"GPU check on {meta['device_name']} ({meta['mode']}), torch {meta['torch']}, {meta['date']}, "
                 f"{time.perf_counter() - START:.0f} s in all", "",
                 "| section | item | status | wall s | result |", "|---|---|---|---|---|"]
        for section, items in self.data["sections"].items():
            for item, entry in items.items():
                text = str(entry.get("summary", "")).replace("|", "\\|").replace("\n", " ")
                lines.append(f"| {section} | {item} | {entry['status']} | {entry.get('wall_s', '')} | {text} |")
        return "\n".join(lines) + "\n"

    def write(self) -> None:
        (self.out / "gpu_check.json").write_text(json.dumps(self.data, indent=1, default=str) + "\n")
        (self.out / "gpu_check.md").write_text(self.markdown())


def device_meta(device: torch.device, dry: bool) -> dict[str, Any]:
    meta = {"torch": torch.__version__, "python": platform.python_version(), "host": platform.node(),
            "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "mode": "dry run at toy sizes: no GPU number" if dry else "paper-scale jobs"}
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        meta.update(device_name=props.name, memory_gib=round(props.total_memory / 2**30, 1),
                    capability=f"{props.major}.{props.minor}", cuda=torch.version.cuda)
    else:
        meta["device_name"] = platform.processor() or "cpu"
    return meta


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="folder of gpu_check.md and gpu_check.json")
    parser.add_argument("--dry", action="store_true", help="toy sizes and the CPU: checks the plan and the table")
    parser.add_argument("--device", choices=["cuda", "cpu"], help="default: cuda, or cpu with --dry")
    parser.add_argument("--authors", type=Path, help="phase-diagrams.py of the authors (or its folder, or a clone)")
    parser.add_argument("--target-s", type=float, default=20.0, help="seconds of each job's measured run")
    parser.add_argument("--limit-s", type=float, default=470.0, help="seconds of the whole command")
    parser.add_argument("--repeats", type=int, default=3, help="rounds of the authors' comparison")
    parser.add_argument("--authors-betas", type=int, default=30)
    parser.add_argument("--authors-batch", type=int, default=1024)
    parser.add_argument("--authors-t", type=float, default=30.0)
    args = parser.parse_args()
    device = torch.device(args.device or ("cpu" if args.dry else "cuda"))
    if args.dry:
        torch.set_num_threads(1)
    report = Report(args.out, args.limit_s, device_meta(device, args.dry), DRY_BUDGET_SCALE if args.dry else 1)
    report.run("tests", "pytest tests/dynamics/test_cuda.py", BUDGET_S["tests"], lambda b: cuda_tests(b, device))
    ceiling = report.run("ceilings", str(device), BUDGET_S["ceilings"], lambda b: ceilings(device, args.dry))
    ceiling = ceiling if ceiling["status"] == "ok" else None
    target = TOY_TARGET_S if args.dry else args.target_s
    jobs = {name: report.run("jobs", name, CASES[name].budget_s if name in CASES else BUDGET_S["jobs"],
                             lambda b, name=name: measure_job(name, device, args.dry, target, b, ceiling))
            for name in BUILT_IN}
    if device.type == "cuda":
        torch.cuda.empty_cache()
    report.run("authors", "phase-diagrams.py vs attnsweep run", BUDGET_S["authors"],
               lambda b: authors(args, device, b))
    for name in BUILT_IN:
        budget = BUDGET_S["estimate" if name == "critical_scaling" else "estimate_rate"]
        report.run("estimate", name, budget, lambda b, name=name: estimate(name, device, args.dry, jobs[name]))
    print(report.markdown(), end="", flush=True)


if __name__ == "__main__":
    main()
