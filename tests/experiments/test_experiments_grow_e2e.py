"""Every experiment besides critical_scaling (test_extend and test_resilience have its) grown and
killed through real Snakemake runs of its tiny config (tests/tiny_configs/<experiment>.yaml):

- grow a batched axis and add a value of a fanned-out one: only the new blocks are planned (a
  dry run, every experiment);
- for one of them, kill -9 of the whole process tree at a seeded random moment of the grown
  run's simulate, then resume: no old store is rewritten, and the aggregates equal a
  from-scratch, uninterrupted run of the grown config bit for bit.

A module of its own beside test_experiments_e2e (the whole runs, boundaries and output contract),
so that the suite's workers (`--dist loadfile`) share the work.
"""

from __future__ import annotations

import random
import re
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import processes
from helpers.project import BUILT_IN, tiny
from helpers.workflow_runs import assert_same_store, final_stores, kill_tree, prepare, run_ok, start, wait_for

from attnsweep.errors import BadStoreError
from attnsweep.plan.config import load_sweep
from attnsweep.reduce import aggregate

EXPERIMENTS = [name for name in BUILT_IN if name != "critical_scaling"]
AGGREGATES = ("sweep.zarr", "summary.zarr", "boundary.zarr")

pytestmark = pytest.mark.slow


def data_target(experiment: str) -> str:
    return f"results/{experiment}/boundary.csv"


def planned_jobs(workdir: Path, experiment: str, rule: str = "simulate") -> int:
    """Jobs of ``rule`` a dry run of the workdir's config plans (its table of job counts)."""
    text = run_ok(workdir, data_target(experiment), "--dry-run", name="planned")
    match = re.search(rf"^{rule}\s+(\d+)$", text, re.MULTILINE)
    return int(match.group(1)) if match else 0



def grown(experiment: str, ref: Path, work: Path) -> tuple[dict, dict[Path, int]]:
    """The reference's directory copied to ``work`` (Snakemake's metadata included) with its config
    grown along a batched axis and a fanned-out one; the config and the old stores' mtimes. Asserts
    that only the new blocks are planned: one per old point (the new batched value), one whole
    block per new point."""
    config = tiny(experiment)
    plan = load_sweep(config).plans[experiment]
    batched = next(a for a in plan.experiment.axis_names if a not in plan.wildcards and len(plan.grid[a]) > 1)
    fanned = next(a for a in plan.wildcards if a != "seed")
    section = config["experiments"][experiment]
    section[batched] = [*plan.grid[batched], 2 * max(plan.grid[batched]) + 1]
    section[fanned] = [*plan.grid[fanned], max(plan.grid[fanned]) + 1]
    points = len(plan.jobs())
    shutil.copytree(ref, work, ignore=shutil.ignore_patterns("*.out", "logs", "locks"))
    prepare(work, config)
    old = {p: p.stat().st_mtime_ns for p in final_stores(work / "results" / experiment / "runs").values()}
    new_points = len(load_sweep(config).plans[experiment].blocks()) - points
    assert planned_jobs(work, experiment) == points + new_points
    return config, old


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_growing_both_kinds_of_axis_plans_only_the_new_blocks(experiment: str, tiny_run: Callable[[str], Path],
                                                               tmp_path: Path) -> None:
    """Grow a batched axis and add a value of a fanned-out one to the tiny run's directory: only
    the new blocks are planned (the planner's part, which depends on each experiment's axes)."""
    grown(experiment, tiny_run(experiment), tmp_path / "grown")


def test_theory_jobs_run_once_per_point_and_damage_to_one_is_named(tiny_run: Callable[[str], Path],
                                                                    tmp_path: Path) -> None:
    """circle_synchronization's structured search, a theory job per n (attnsweep.contract): more
    betas and starts plan simulate jobs and no theory job; a search option plans the theory jobs
    and no simulate job; a theory store cut short is named by `attnsweep verify` and refused by
    the reduction."""
    experiment = "circle_synchronization"
    work = tmp_path / "work"
    shutil.copytree(tiny_run(experiment), work, ignore=shutil.ignore_patterns("*.out", "logs", "locks"))
    config = tiny(experiment)
    section = config["experiments"][experiment]
    theory = sorted((work / "results" / experiment / "theory").rglob("*.zarr"))
    assert [p.parent.name for p in theory] == [f"n~{n}" for n in section["n"]]

    prepare(work, {**config, "experiments": {experiment: {**section, "seeds": 30, "beta": [*section["beta"], 0.25]}}})
    assert planned_jobs(work, experiment, "simulate") > 0
    assert planned_jobs(work, experiment, "theory") == 0
    prepare(work, {**config, "experiments": {experiment: {**section, "k_max": 4}}})
    assert planned_jobs(work, experiment, "theory") == len(section["n"])
    assert planned_jobs(work, experiment, "simulate") == 0

    prepare(work, config)
    theory[0].write_bytes(theory[0].read_bytes()[:100])
    done = processes.run([sys.executable, "-m", "attnsweep.cli", "verify", str(work / "config.yaml")], cwd=work,
                         capture_output=True, text=True)
    assert done.returncode != 0 and f"{theory[0].relative_to(work)}: not a zip archive" in done.stdout, done.stdout
    with pytest.raises(BadStoreError, match="not a zip archive"):
        aggregate.theory_dataset(theory)


#: The experiment the kill -9 below runs for: what it checks (a store renamed into place only when
#: whole, the resume, bitwise equality with a fresh run) is the same code for every experiment, and
#: critical_scaling has its own in test_resilience; causal_clustering is the cheapest of the rest.
KILLED = "causal_clustering"


def test_grow_then_kill_9_then_resume(tiny_run: Callable[[str], Path], tmp_path: Path) -> None:
    """Kill -9 the grown run's whole process tree at a seeded random moment of a new block's
    simulate and resume it: no old store is ever rewritten, and the aggregates equal a
    from-scratch, uninterrupted run of the grown config bit for bit (a half-written store at a
    final path would show there)."""
    work = tmp_path / "grown"
    config, old = grown(KILLED, tiny_run(KILLED), work)
    proc = start(work, data_target(KILLED), name="killed")
    marker = work / "results" / KILLED / "runs"
    wait_for(proc, lambda: any(marker.rglob(".*.running")), "a simulate job in flight", work)
    time.sleep(random.Random(20261123).uniform(0.0, 0.5))
    kill_tree(proc, work)
    assert {p: p.stat().st_mtime_ns for p in old} == old, "the killed run rewrote an old store"
    run_ok(work, "--unlock", name="unlock")
    run_ok(work, data_target(KILLED), name="resumed")
    assert {p: p.stat().st_mtime_ns for p in old} == old, "the resumed run rewrote an old store"

    fresh = prepare(tmp_path / "fresh", config)
    run_ok(fresh, data_target(KILLED), name="fresh")
    for name in AGGREGATES:
        assert_same_store(work / "results" / KILLED / name, fresh / "results" / KILLED / name)
    csv = data_target(KILLED)
    assert (work / csv).read_bytes() == (fresh / csv).read_bytes()
