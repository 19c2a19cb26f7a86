"""``attnsweep status``: each job's state read back from a results tree built by hand."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import processes

from attnsweep import status
from attnsweep.plan.config import load_sweep
from attnsweep.run.job import run_job
from attnsweep.stores.marker import marker_path


def sweep_in(tmp_path: Path):
    config = {"results": str(tmp_path / "results"), "logs": str(tmp_path / "logs"), "device": "cpu",
              "experiments": {"critical_scaling": {"n": [16], "d": [4], "rho": [0.5], "gamma": [1.0],
                                                   "seeds": 5}}}
    return config, load_sweep(config)


def write_marker(store: Path, host: str, pid: int) -> None:
    store.parent.mkdir(parents=True, exist_ok=True)
    marker_path(store).write_text(json.dumps({"host": host, "pid": pid, "started": 0.0}))


def test_every_state_is_read_back(tmp_path: Path) -> None:
    config, sweep = sweep_in(tmp_path)
    plan = sweep.plans["critical_scaling"]
    jobs = plan.jobs()
    runs = tmp_path / "results" / "critical_scaling" / "runs"
    points = list(jobs)  # n~16/d~4/seed~0 .. seed~4
    run_job(jobs[points[0]], runs / f"{points[0]}.zarr", device="cpu")
    write_marker(runs / f"{points[1]}.zarr", socket.gethostname(), os.getpid())
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    write_marker(runs / f"{points[2]}.zarr", socket.gethostname(), dead.pid)
    log = tmp_path / "logs" / "critical_scaling" / "simulate" / f"{points[3]}.log"
    log.parent.mkdir(parents=True)
    log.write_text("starting\nattnsweep: config error: device: CUDA requested but not available\n")
    states = {job.point: job for job in status.sweep_status(sweep)["critical_scaling"]}
    assert [states[p].state for p in points] == ["done", "running", "interrupted", "failed", "pending"]
    assert "CUDA requested" in states[points[3]].detail
    assert f"pid {dead.pid}" in states[points[2]].detail

    write_marker(runs / f"{points[4]}.zarr", "some-cluster-node", 4242)
    remote = status.job_status(points[4], runs / f"{points[4]}.zarr", tmp_path / "none.log")
    assert remote.state == "running" and "another host" in remote.detail

    text = status.report(sweep)
    assert text.splitlines()[0] == ("critical_scaling: 5 jobs: 1 done, 2 running, 1 interrupted, "
                                    "1 failed, 0 pending")
    assert f"failed      {points[3]} [rho 0.5 | gamma 1 | alpha 0]  attnsweep: config error: device" in text


def test_theory_jobs_are_listed_with_their_states(tmp_path: Path) -> None:
    """An experiment with theory axes: its theory jobs' states, read back as a simulate job's."""
    config = {"results": str(tmp_path / "results"), "logs": str(tmp_path / "logs"), "device": "cpu",
              "experiments": {"circle_synchronization": {"n": [3, 4, 5], "beta": [-1.0], "seeds": 1,
                                                         "scan": {"start": -3.0, "stop": 0.5, "step": 0.5}}}}
    sweep = load_sweep(config)
    jobs = sweep.plans["circle_synchronization"].theory_jobs()
    points = list(jobs)  # n~3, n~4, n~5
    root = tmp_path / "results" / "circle_synchronization" / "theory"
    run_job(jobs[points[0]], root / f"{points[0]}.zarr", device="cpu")
    log = tmp_path / "logs" / "circle_synchronization" / "theory" / f"{points[1]}.log"
    log.parent.mkdir(parents=True)
    log.write_text("starting\nMemoryError\n")
    states = [job.state for job in status.theory_status(sweep, "circle_synchronization")]
    assert states == ["done", "failed", "pending"]
    text = status.report(sweep)
    assert "  theory: 3 jobs: 1 done, 1 failed, 1 pending" in text.splitlines()
    assert f"  failed      theory/{points[1]}  MemoryError" in text.splitlines()


def test_marker_is_gone_after_success_and_failure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, sweep = sweep_in(tmp_path)
    job = next(iter(sweep.plans["critical_scaling"].jobs().values()))
    out = tmp_path / "x.zarr"
    run_job(job, out, device="cpu")
    assert out.exists() and not marker_path(out).exists()

    from attnsweep.experiments.critical_scaling import CriticalScaling

    def boom(*args, **kwargs):
        assert marker_path(tmp_path / "y.zarr").is_file()  # present while computing
        raise RuntimeError("boom")

    monkeypatch.setattr(CriticalScaling, "simulate", boom)
    with pytest.raises(RuntimeError):
        run_job(job, tmp_path / "y.zarr", device="cpu")
    assert not marker_path(tmp_path / "y.zarr").exists()


def test_status_command(tmp_path: Path) -> None:
    config, _ = sweep_in(tmp_path)
    path = tmp_path / "c.yaml"
    path.write_text(json.dumps(config))
    result = processes.run([sys.executable, "-m", "attnsweep.cli", "status", str(path), "--all"],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0].endswith("0 done, 0 running, 0 interrupted, 0 failed, 5 pending")
    assert sum(line.lstrip().startswith("pending") for line in result.stdout.splitlines()) == 5


def test_a_job_stopped_by_ctrl_c_is_interrupted_not_failed(tmp_path: Path) -> None:
    """The job client's last word on SIGINT (what a sweep stopped with Ctrl-C or ``timeout -s
    INT`` leaves in the log) reads as interrupted: the rerun redoes it, nothing needs mending."""
    from attnsweep.errors import INTERRUPTED

    log = tmp_path / "job.log"
    log.write_text(f"2026-11-27 04:33:17 attnsweep critical_scaling: ... on cpu/float32\n{INTERRUPTED}\n")
    job = status.job_status("point", tmp_path / "job.zarr", log)
    assert (job.state, job.detail) == ("interrupted", "stopped by SIGINT (Ctrl-C)")


def test_a_refinement_says_what_seeds_each_row_needs(tmp_path: Path) -> None:
    """By the law of a seed-limited interval, half-width proportional to 1/sqrt(seeds): a row of 4
    seeds with half-width 0.1 for a precision of 0.05 needs 4 (0.1/0.05)^2 = 16 seeds; one of
    half-width 0.2 needs 64, more than max_seeds = 16, at which it ends at 0.2 sqrt(4/16) = 0.1,
    twice the precision. A precise row, and a row of a record without seed counts, get neither."""
    config = {"results": str(tmp_path / "results"), "experiments": {"critical_scaling": {
        "n": [16], "d": [4], "rho": [0.2, 0.5, 0.8], "gamma": [1.0, 2.0], "seeds": 4,
        "refine": {"precision": 0.05, "relative": False, "max_seeds": 16, "boundaries": ["gamma_star_lambda"]}}}}
    plan = load_sweep(config).plans["critical_scaling"]

    def row(rho, low, high, action, **seeds):
        return {"boundary": "gamma_star_lambda", "row": f"n=16 d=4 rho={rho} alpha=0", "estimate": 1.5,
                "low": low, "high": high, "wanted": 0.05, "action": action, **seeds}

    record = {"rounds": [{"round": 1, "new_points": 8, "core_hours": 0.01, "blocks": [], "assessment": [
        row(0.2, 1.4, 1.6, "seeds", seeds=4), row(0.5, 1.3, 1.7, "seeds", seeds=4),
        row(0.8, 1.49, 1.51, "precise", seeds=4), row(0.9, 1.3, 1.7, "seeds")]}]}
    folder = tmp_path / "results" / "critical_scaling"
    folder.mkdir(parents=True)
    (folder / "refine.json").write_text(json.dumps(record))
    lines = status.refinement_lines(plan, tmp_path / "results")
    rows = [line for line in lines if line.startswith("    ")]
    assert rows[0].endswith(": seeds; 4 seeds, about 16 for the precision")
    assert rows[1].endswith(": seeds; 4 seeds, about 64 for the precision (at max_seeds 16: 2 times it)")
    assert rows[2].endswith(": precise") and rows[3].endswith(": seeds")
    assert lines[-1] == ("  by the 1/sqrt(seeds) law, rows needing more than max_seeds = 16: 1 (up to 64 seeds), "
                         "ending at 2 times the precision")
