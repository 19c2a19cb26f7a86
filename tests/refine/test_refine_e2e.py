"""attnsweep refine end to end: the tiny refinement of tests/tiny_configs/refine.yaml finds the
true crossing to its precision, each round adds what its decision says, a refinement grown later
continues from its stores, and one killed with kill -9 finishes bit for bit as an uninterrupted one."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
import yaml
from helpers import processes
from helpers.project import CONFIGS, refine_command

from attnsweep import registry
from attnsweep.experiments.critical_scaling import theory
from attnsweep.plan.config import load_sweep
from attnsweep.reduce.crossing import first_crossing
from attnsweep.stores.io import open_store

pytestmark = pytest.mark.slow
NAME = "critical_scaling"


def results(workdir: Path) -> Path:
    return workdir / "results" / NAME


def record_text(workdir: Path) -> str:
    return (results(workdir) / "refine.json").read_text()


def assert_same_values(a: Path, b: Path) -> None:
    x, y = open_store(a).load(), open_store(b).load()
    assert set(x.data_vars) == set(y.data_vars)
    for var in x.data_vars:
        np.testing.assert_array_equal(x[var].values, y[var].values, err_msg=f"{a.name}: {var}")
        assert x[var].dims == y[var].dims
    for dim in x.dims:
        np.testing.assert_array_equal(x[dim].values, y[dim].values)


def test_refinement_finds_the_true_crossing_to_its_precision(tiny_refine: Path) -> None:
    """The truth: the crossing of the seed-mean lambda of the same 32 seeds, computed on a fine
    gamma grid by one job outside the workflow (a job's numbers do not depend on its grid)."""
    import torch

    record = json.loads(record_text(tiny_refine))
    assert record["final"]["reason"] == "every boundary is precise"
    assert [r["round"] for r in record["rounds"]] == [1, 2]
    assert {d["action"] for r in record["rounds"] for d in r["assessment"]} == {"locate"}
    bnd = open_store(results(tiny_refine) / "boundary.zarr").load()
    est, low, high = (float(bnd[v].squeeze()) for v in ("gamma_star_lambda", "gamma_star_lambda_low",
                                                         "gamma_star_lambda_high"))
    plan = load_sweep(yaml.safe_load((CONFIGS / "refine.yaml").read_text())).plans[NAME]
    fine = [float(g) for g in np.linspace(est - 0.15, est + 0.15, 301)]
    spec = plan.spec({**plan.grid, "gamma": fine}, plan.seeds)
    curve = registry.get(NAME).simulate(spec, torch.device("cpu"), torch.float32, progress=False)
    mean = curve["lambda"].mean("seed").squeeze().values
    truth = float(first_crossing(np.array(fine), mean, theory.lambda_critical(0.5, 0.0)))
    wanted = 0.05 * truth
    assert abs(est - truth) <= wanted, (est, truth)
    assert (high - low) / 2 <= 0.05 * est
    held = open_store(results(tiny_refine) / "sweep.zarr")["simulated"].any("seed").squeeze()
    gamma = held["gamma"].values[held.values]
    bracket = gamma[gamma >= est].min() - gamma[gamma < est].max()
    assert bracket / 2 <= 0.05 * est
    assert len(gamma) == 6 + 3 + 3  # the base grid and two rounds of three values


def dry_run_simulate_jobs(workdir: Path) -> int:
    snakefile = Path(__file__).resolve().parents[2] / "Snakefile"
    out = processes.run([os.sys.executable, "-m", "snakemake", "-n", "-s", str(snakefile), "--cores", "1",
                          "--configfile", "config.yaml"], cwd=workdir, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    counts = [int(line.split()[1]) for line in out.stdout.splitlines() if line.startswith("simulate ")]
    return counts[0] if counts else 0


def test_a_grown_refinement_killed_in_its_new_round_finishes_bitwise(tmp_path: Path, tiny_refine: Path,
                                                                   monkeypatch) -> None:
    """Stop after one round (rounds: 1), then allow more: the dry run of round 2 plans exactly
    the jobs of the rectangles it records. kill -9 of the whole refinement (driver, Snakemake,
    jobs) while round 2's Snakemake run holds its lock; the same command again removes the stale
    lock and finishes, without touching round 1's stores: record, table, sweep and boundary equal
    the uninterrupted refinement's (which ran on one core, this on two), bit for bit."""
    from attnsweep.plan.refinement import load_record, save_record
    from attnsweep.refine.rules import assess

    command = refine_command(tmp_path, "--cores", "2")
    config = yaml.safe_load((tmp_path / "config.yaml").read_text())
    config["experiments"][NAME]["refine"]["rounds"] = 1
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    processes.run(command, cwd=tmp_path, check=True, capture_output=True)
    first = json.loads(record_text(tmp_path))
    assert len(first["rounds"]) == 1 and first["final"]["reason"] == "the round limit (1) is reached"
    stores = {p: p.stat().st_mtime_ns for p in results(tmp_path).glob("runs/**/*.zarr")}
    assert len(stores) == 2  # the base block and round 1's

    config["experiments"][NAME]["refine"]["rounds"] = 10
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    monkeypatch.chdir(tmp_path)
    plan = load_sweep(config).plans[NAME]
    record = assess(plan, "results", load_record("results", NAME))
    save_record("results", NAME, record)
    (second,) = record["rounds"][1:]
    assert dry_run_simulate_jobs(tmp_path) == sum(len(plan.rect_jobs(rect)) for rect in second["blocks"]) == 1

    with open(tmp_path / "killed.out", "w") as out:
        proc = processes.start(command, cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + processes.HANG_S
    locks = tmp_path / ".snakemake" / "locks"
    while not any(locks.glob("*")):  # round 2's Snakemake run has begun
        assert proc.poll() is None, (tmp_path / "killed.out").read_text()[-3000:]
        assert time.monotonic() < deadline
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert any(locks.glob("*"))  # stale
    done = processes.run(command, cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert {p: p.stat().st_mtime_ns for p in stores} == stores
    assert record_text(tmp_path) == record_text(tiny_refine)
    assert (results(tmp_path) / "refine.csv").read_text() == (results(tiny_refine) / "refine.csv").read_text()
    for store in ("sweep.zarr", "boundary.zarr"):
        assert_same_values(results(tmp_path) / store, results(tiny_refine) / store)


def test_a_refinement_stopped_by_ctrl_c_says_so_in_one_line_and_goes_on(tmp_path: Path, tiny_refine: Path) -> None:
    """SIGINT to the refinement's process group while a simulate job runs (what Ctrl-C in a
    terminal and ``timeout -s INT`` do): no traceback anywhere, the driver's last word is the one
    line, Snakemake ends by itself (its lock released, not left to a kill) and stops its warm
    server, no job reads as failed, and the same command finishes as the uninterrupted
    refinement, bit for bit. It starts from that refinement less its last simulate job and the
    aggregates (what a run stopped before them leaves): its earlier rounds are the other tests'."""
    from attnsweep.errors import INTERRUPTED

    shutil.copytree(tiny_refine, tmp_path, dirs_exist_ok=True, ignore=shutil.ignore_patterns("logs", "locks", "*.out"))
    last = max(results(tmp_path).glob("runs/**/*.zarr"), key=lambda p: p.stat().st_mtime_ns)
    for path in (last, *(results(tmp_path) / name for name in ("sweep.zarr", "summary.zarr", "boundary.zarr"))):
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    command = refine_command(tmp_path, "--cores", "1")
    with open(tmp_path / "out", "w") as out, open(tmp_path / "err", "w") as err:
        proc = processes.start(command, cwd=tmp_path, stdout=out, stderr=err)
    deadline = time.monotonic() + processes.HANG_S
    # A job's marker lives through its whole run (32 seeds, its store written), polled every 10 ms
    while not list(results(tmp_path).glob("runs/**/.*.running")):  # a simulate job has begun
        assert proc.poll() is None, (tmp_path / "err").read_text()[-3000:]
        assert time.monotonic() < deadline
        time.sleep(0.01)
    os.killpg(proc.pid, signal.SIGINT)
    assert proc.wait(processes.HANG_S) == 130
    said = (tmp_path / "out").read_text() + (tmp_path / "err").read_text()
    logs = "".join(log.read_text() for log in (tmp_path / "logs").rglob("*.log"))
    assert "Traceback" not in said + logs, said[-3000:] + logs[-3000:]
    assert (tmp_path / "err").read_text().splitlines()[-1] == INTERRUPTED
    assert not any((tmp_path / ".snakemake" / "locks").glob("*"))
    assert "stopped after serving" in (tmp_path / "logs" / "worker.log").read_text().splitlines()[-1]
    status = processes.run([os.sys.executable, "-m", "attnsweep.cli", "status", "config.yaml"], cwd=tmp_path,
                           capture_output=True, text=True)
    assert " 0 failed" in status.stdout, status.stdout + status.stderr
    done = processes.run(command, cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert record_text(tmp_path) == record_text(tiny_refine)
    assert_same_values(last, tiny_refine / last.relative_to(tmp_path))
