"""attnsweep as a Snakemake module under a user's own project (docs/extending.md: "Your own rules on top").

The project is built from that section's blocks as they stand, beside a link named ``attnsweep``
to this repository, and run with its command. Truths: the user's table equals the last
output time of the seed mean recomputed here from sweep.zarr; Snakemake plans nothing on a
second run; a grown grid reruns the user's rule and its table gains the value; the worker log
shows the warm server served the jobs and stopped; the simulate override reached the jobs
(``torch_threads``, the planned resources); a copy of the profile in the project is taken by a
plain ``snakemake``; while the module run holds the results, a second claim is refused.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from helpers import processes
from helpers.project import doc_files

from attnsweep.errors import ConfigError
from attnsweep.run.lock import claim
from attnsweep.stores.io import open_store

REPO = Path(__file__).resolve().parents[2]
DOCUMENT = "docs/extending.md"
SECTION = "## Your own rules on top (a Snakemake module)"

pytestmark = pytest.mark.slow


def documented_command() -> list[str]:
    """The documented command, with this interpreter for the venv's snakemake."""
    text = (REPO / DOCUMENT).read_text()
    body = text[text.index(f"\n{SECTION}\n"):]
    line = next(ln for ln in body.splitlines() if ln.startswith("../attnsweep/.venv/bin/snakemake "))
    return [sys.executable, "-m", "snakemake", *shlex.split(line)[1:]]


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("module")
    (root / "attnsweep").symlink_to(REPO)
    user = root / "my-sweep"
    for path, body in doc_files(DOCUMENT, SECTION).items():
        (user / path).parent.mkdir(parents=True, exist_ok=True)
        (user / path).write_text(body)
    return user


def run(project: Path, *args: str, command: list[str] | None = None) -> subprocess.CompletedProcess:
    command = documented_command() if command is None else command
    return processes.run([*command, *args], cwd=project, capture_output=True, text=True)


def simulate_resources(plan: str) -> list[dict[str, str]]:
    """The resources of every attnsweep_simulate job a dry run plans."""
    jobs = [job for job in plan.split("\nrule ")[1:] if job.startswith("attnsweep_simulate:")]
    return [dict(kv.split("=", 1) for kv in re.search(r"resources: (.*)", job)[1].split(", ")) for job in jobs]


def expected_table(project: Path) -> pd.DataFrame:
    """Seed mean of clustered at the last output time, per (d, beta), from sweep.zarr's per-seed data."""
    sweep = open_store(project / "results/sphere_clustering/sweep.zarr").load()
    final = sweep["clustered"].isel(t=-1).mean("seed").squeeze(["n", "rho", "gamma"], drop=True)
    return final.to_dataframe().reset_index()[["d", "beta", "clustered"]]


def test_user_rule_runs_on_the_sweep_and_reruns_when_the_grid_grows(project: Path) -> None:
    done = run(project)
    assert done.returncode == 0, done.stderr[-4000:]
    table = pd.read_csv(project / "tables/clustered_final.csv")
    np.testing.assert_allclose(table[["d", "beta", "clustered"]].to_numpy(), expected_table(project).to_numpy(),
                               rtol=1e-6)
    assert (project / "results/sphere_clustering/figures/boundary.png").exists()  # attnsweep's own targets
    log = (project / "logs/worker.log").read_text()
    served = [int(w) for w in log.split() if w.isdigit()][-1:]  # "... stopped after serving N requests"
    assert "stopped after serving" in log.splitlines()[-1] and served and served[0] >= 2, log
    runs = sorted((project / "results/sphere_clustering/runs").rglob("*.zarr"))
    assert runs and all(open_store(r).attrs["torch_threads"] == 2 for r in runs)  # use rule ... with: threads

    shutil.copytree(REPO / "profiles/default", project / "profiles/default")  # the documented other way
    again = run(project, "--dry-run", command=[sys.executable, "-m", "snakemake"])
    said = again.stdout + again.stderr
    assert again.returncode == 0 and "Nothing to be done" in said, said[-2000:]
    assert "Using workflow specific profile profiles/default " in said, said[-2000:]

    config = project / "config/config.yaml"
    grown = yaml.safe_load(config.read_text())
    grown["experiments"]["sphere_clustering"]["beta"] = [0.5, 2.0, 4.0]
    config.write_text(yaml.safe_dump(grown))
    plan = run(project, "--dry-run")
    assert "clustered_final" in plan.stdout, plan.stdout[-3000:]
    planned = simulate_resources(plan.stdout)  # the override's resources, the original's runtime estimate
    assert planned and all(r["mem_mb"] == "2000" and r["gpu"] == "0" and int(r.get("runtime", 0)) > 0
                           for r in planned), planned
    done = run(project)
    assert done.returncode == 0, done.stderr[-4000:]
    table = pd.read_csv(project / "tables/clustered_final.csv")
    assert sorted(set(table["beta"])) == [0.5, 2.0, 4.0]
    np.testing.assert_allclose(table[["d", "beta", "clustered"]].to_numpy(), expected_table(project).to_numpy(),
                               rtol=1e-6)


def test_the_module_run_holds_the_results_lock(project: Path, tmp_path: Path) -> None:
    """The user's onstart calls attnsweep's: while that run lives, its results cannot be claimed."""
    results = project / "results"
    config = project / "config/config.yaml"
    section = yaml.safe_load(config.read_text())
    section["experiments"]["sphere_clustering"]["seeds"] = 3  # new work: the run must do jobs
    config.write_text(yaml.safe_dump(section))
    proc = processes.start(documented_command(), cwd=project, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    try:
        lock = results / ".attnsweep.run.lock"
        deadline = time.monotonic() + processes.HANG_S
        while f"snakemake pid {proc.pid} " not in (lock.read_text() if lock.exists() else ""):
            assert proc.poll() is None, f"the run ended before it took the lock:\n{proc.stderr.read()[-3000:]}"
            assert time.monotonic() < deadline, f"no lock after {processes.HANG_S} s"
            time.sleep(0.02)
        with pytest.raises(ConfigError, match=f"in use by snakemake pid {proc.pid} "):
            claim(results).close()
    finally:
        assert proc.wait(timeout=processes.HANG_S) == 0, proc.stderr.read()[-3000:]
    claim(results).close()  # released with the run
