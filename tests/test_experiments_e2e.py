"""Every experiment besides critical_scaling (which has the full suites of test_workflow,
test_resilience and test_extend) through real Snakemake runs of its tiny config
(tests/slurm_configs/<experiment>.yaml; test_slurm runs the same configs on SLURM):

- a whole run to figures: every figure the experiment declares, a boundary table with rows;
- grow a batched axis and add a value of a fanned-out one: only the new blocks are planned;
  kill -9 of the whole process tree at a seeded random moment of that run's simulate, then
  resume: no old store is rewritten, and the aggregates equal a from-scratch, uninterrupted
  run of the grown config bit for bit (one test: each step alone would cost a whole run more).
"""

from __future__ import annotations

import random
import re
import shutil
import time
from pathlib import Path

import pytest
from conftest import tiny
from test_resilience import assert_same_store, final_stores, kill_tree, prepare, run_ok, start, wait_for

from attnsweep import registry
from attnsweep.config import load_sweep

EXPERIMENTS = [name for name in registry.names() if name != "critical_scaling"]
AGGREGATES = ("sweep.zarr", "summary.zarr", "boundary.zarr")

pytestmark = pytest.mark.slow


def data_target(experiment: str) -> str:
    return f"results/{experiment}/boundary.csv"


def planned_simulate_jobs(workdir: Path, experiment: str) -> int:
    text = run_ok(workdir, data_target(experiment), "--dry-run", name="planned")
    match = re.search(r"^simulate\s+(\d+)$", text, re.MULTILINE)
    return int(match.group(1)) if match else 0


@pytest.fixture(scope="module", params=EXPERIMENTS)
def reference(request, tiny_run) -> tuple[str, Path]:
    """One uninterrupted run of the tiny config, figures included (shared, read-only)."""
    return request.param, tiny_run(request.param)


def test_whole_run_draws_every_figure(reference: tuple[str, Path]) -> None:
    experiment, workdir = reference
    plan = load_sweep(tiny(experiment)).plans[experiment]
    out = workdir / "results" / experiment
    for fig in plan.experiment.figures(plan.grid, plan.options):
        for ext in ("png", "pdf"):
            assert (out / "figures" / f"{fig.name}.{ext}").stat().st_size > 1000, fig.name
    rows = (out / "boundary.csv").read_text().splitlines()
    assert len(rows) > 1 and "nan" not in rows[0].lower()
    assert len(final_stores(out / "runs")) == len(plan.jobs())


def test_grow_then_kill_9_then_resume(reference: tuple[str, Path], tmp_path: Path) -> None:
    """Grow a batched axis and add a value of a fanned-out one to the reference's directory: only
    the new blocks are planned. Kill -9 that run's whole process tree at a seeded random moment of
    a new block's simulate and resume it: no old store is ever rewritten, and the aggregates equal
    a from-scratch, uninterrupted run of the grown config bit for bit (a half-written store at a
    final path would show there)."""
    experiment, ref = reference
    config = tiny(experiment)
    plan = load_sweep(config).plans[experiment]
    batched = next(a for a in plan.experiment.axis_names if a not in plan.wildcards and len(plan.grid[a]) > 1)
    fanned = next(a for a in plan.wildcards if a != "seed")
    section = config["experiments"][experiment]
    section[batched] = [*plan.grid[batched], 2 * max(plan.grid[batched]) + 1]
    section[fanned] = [*plan.grid[fanned], max(plan.grid[fanned]) + 1]
    points = len(plan.jobs())

    work = tmp_path / "grown"  # the reference's directory as it stands, Snakemake's metadata included
    shutil.copytree(ref, work, ignore=shutil.ignore_patterns("*.out", "logs", "locks"))
    prepare(work, config)
    old = {p: p.stat().st_mtime_ns for p in final_stores(work / "results" / experiment / "runs").values()}
    # one new block (the new batched value) per old point, one whole block per new point
    new_points = len(load_sweep(config).plans[experiment].blocks()) - points
    assert planned_simulate_jobs(work, experiment) == points + new_points

    proc = start(work, data_target(experiment), name="killed")
    marker = work / "results" / experiment / "runs"
    wait_for(proc, lambda: any(marker.rglob(".*.running")), "a simulate job in flight", work)
    time.sleep(random.Random(20261123).uniform(0.0, 0.5))
    kill_tree(proc, work)
    assert {p: p.stat().st_mtime_ns for p in old} == old, "the killed run rewrote an old store"
    run_ok(work, "--unlock", name="unlock")
    run_ok(work, data_target(experiment), name="resumed")
    assert {p: p.stat().st_mtime_ns for p in old} == old, "the resumed run rewrote an old store"

    fresh = prepare(tmp_path / "fresh", config)
    run_ok(fresh, data_target(experiment), name="fresh")
    for name in AGGREGATES:
        assert_same_store(work / "results" / experiment / name, fresh / "results" / experiment / name)
    csv = data_target(experiment)
    assert (work / csv).read_bytes() == (fresh / csv).read_bytes()
