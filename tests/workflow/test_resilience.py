"""Resume, no data lost: real `snakemake` runs killed with SIGKILL, run twice at once, or
given a full or read-only results directory, then rerun to numbers identical to an
uninterrupted run.

Black box: the tests drive `snakemake` in a temporary working directory as a user would and
find run stores by globbing ``**/*.zarr`` under ``results/``, so they do not depend on the
layout of ``runs/``. Outputs are compared bitwise (data variables and coordinates; attrs hold
provenance such as host, wall times and the git commit, and are ignored).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import psutil
import pytest
from helpers.workflow_runs import (
    assert_same_store,
    final_stores,
    finish,
    kill_tree,
    output,
    prepare,
    run,
    run_ok,
    start,
    wait_for,
)

from attnsweep.stores.io import open_store

EXP = "critical_scaling"
# 12 simulate jobs of about a second each, then collect, reduce and boundary.
CONFIG = {
    "device": "cpu",
    "dtype": "float64",
    "experiments": {
        EXP: {
            "n": [16],
            "d": [2, 3, 4, 5, 6, 8],
            "rho": [0.2, 0.6],
            "gamma": {"start": 0.5, "stop": 6.0, "num": 4},
            "seeds": 2,
        }
    },
}
N_JOBS = 12
# The numbers: every run here stops before the figures, which take most of a full run's time
# and hold nothing to compare (tests/workflow/test_workflow.py draws them).
DATA_TARGET = f"results/{EXP}/boundary.csv"
AGGREGATES = ("sweep.zarr", "summary.zarr", "boundary.zarr")
LOCKED = "Directory cannot be locked"
KILL_SEED = 20261123

pytestmark = pytest.mark.slow


# --- reading results ------------------------------------------------------------------------

def run_stores(workdir: Path) -> dict[str, Path]:
    return final_stores(workdir / "results" / EXP / "runs")


def assert_final_stores_sound(workdir: Path, ref: Path) -> int:
    """Every store at a final path opens and equals the reference's store at the same path."""
    stores = final_stores(workdir / "results")
    for rel, path in stores.items():
        assert (ref / "results" / rel).exists(), f"{rel}: a final store the reference run does not have"
        assert_same_store(path, ref / "results" / rel)
    return len(stores)


def assert_outputs_equal(workdir: Path, ref: Path) -> None:
    """Run stores, aggregates and boundary.csv identical to the reference run's, nothing left over."""
    out, want = workdir / "results" / EXP, ref / "results" / EXP
    assert sorted(run_stores(workdir)) == sorted(final_stores(want / "runs"))
    assert len(run_stores(workdir)) == N_JOBS
    assert assert_final_stores_sound(workdir, ref) == N_JOBS + len(AGGREGATES)
    for name in AGGREGATES:
        assert (out / name / "zarr.json").is_file()
    assert (out / "boundary.csv").read_bytes() == (want / "boundary.csv").read_bytes()
    assert not list((workdir / "results").rglob(".*.running")), "a running marker outlived its job"


def in_flight(workdir: Path) -> set[str]:
    """Simulate jobs marked running (``.NAME.zarr.running``), as their path under runs/ without suffix."""
    runs = workdir / "results" / EXP / "runs"
    found = set()
    for dirpath, dirnames, files in os.walk(runs):
        dirnames[:] = [d for d in dirnames if not d.startswith(".") and not d.endswith(".zarr")]
        for name in files:
            if name.startswith(".") and name.endswith(".zarr.running"):
                rel = Path(dirpath, name[1 : -len(".zarr.running")]).relative_to(runs)
                found.add(rel.as_posix())
    return found


def stop_in_flight(workdir: Path) -> bool:
    """SIGSTOP the warm worker's child that a running marker names, then whether its marker still
    names it: that job is held inside its marked block, so a kill now lands in flight however fast
    the job is or however loaded the machine. The job client marks first and its worker child
    re-marks with its own pid; the client only waits for the child, so stopping it would hold
    nothing (the child finishes the store): a marker that names a client is passed over until the
    child's pid replaces it."""
    runs = workdir / "results" / EXP / "runs"
    for job in in_flight(workdir):
        marker = runs / Path(job).parent / f".{Path(job).name}.zarr.running"
        with contextlib.suppress(OSError, ValueError, KeyError, psutil.Error):  # gone, or being written now
            pid = json.loads(marker.read_text())["pid"]
            if "attnsweep.run.worker" not in " ".join(psutil.Process(pid).cmdline()):
                continue  # the job client: its worker child re-marks within moments
            os.kill(pid, signal.SIGSTOP)
            if json.loads(marker.read_text())["pid"] == pid:
                return True
    return False


def job_states(workdir: Path) -> list:
    from attnsweep import status
    from attnsweep.plan.config import load_sweep

    config = {**CONFIG, "results": str(workdir / "results"), "logs": str(workdir / "logs")}
    return status.sweep_status(load_sweep(config))[EXP]


def count_lines(workdir: Path, proc: subprocess.Popen, pattern: str) -> int:
    return len(re.findall(pattern, output(workdir, proc)))


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One uninterrupted run, to compare every other run with."""
    workdir = prepare(tmp_path_factory.mktemp("reference"), CONFIG)
    run_ok(workdir, DATA_TARGET, name="reference")
    assert len(run_stores(workdir)) == N_JOBS
    assert not list((workdir / "results").rglob(".*.tmp-*"))
    sweep = open_store(workdir / "results" / EXP / "sweep.zarr")
    assert not np.isnan(sweep["lambda"].values).any()
    return workdir


# --- 1. kill -9 at random moments, rerun ------------------------------------------------------

def test_kill_9_at_random_moments_then_resume(reference: Path, tmp_path: Path) -> None:
    """Four SIGKILLs of the whole process tree (snakemake, its jobs, the warm worker and its
    children) at seeded random moments: during simulate, at a random time, during collect or
    reduce, during boundary. After each, what is on disk is checked; the same directory is then
    resumed to outputs identical to the reference, redoing only what was lost."""
    workdir = prepare(tmp_path / "sweep", CONFIG)
    rng = random.Random(KILL_SEED)
    runs = lambda: len(run_stores(workdir))
    k = rng.randint(2, N_JOBS - 4)

    def after_line(proc: subprocess.Popen, *lines: str) -> Callable[[], bool]:
        return lambda: any(line in output(workdir, proc) for line in lines)

    # (what, condition once started, extra delay drawn now). The first kill comes with a job held
    # in flight (SIGSTOP, stop_in_flight): a simulate job takes well under a second in the warm
    # server, and the random-time kill may land before the server is up, so without the hold no
    # kill might hit a running job on a loaded machine. The boundary job takes about a second in
    # the server: the kill must come within it.
    moments = [
        (f"{k} run stores and a job held in flight",
         lambda proc: lambda: runs() >= k and stop_in_flight(workdir), 0.0),
        ("a random time", lambda proc: lambda: True, rng.uniform(1.0, 6.0)),
        ("collect or reduce", lambda proc: after_line(proc, "localrule collect:", "localrule reduce:"),
         rng.uniform(0.0, 0.1)),  # on an idle machine reduce and boundary in the warm server
        # can both finish within 0.5 s of reduce's line: a kill 0.5 s late once found boundary done
        ("boundary", lambda proc: after_line(proc, "localrule boundary:"), rng.uniform(0.0, 0.3)),
    ]
    killed_in_flight = 0
    for i, (what, condition, delay) in enumerate(moments):
        proc = start(workdir, DATA_TARGET, name=f"killed{i}")
        wait_for(proc, condition(proc), what, workdir)
        time.sleep(delay)
        flying = in_flight(workdir)
        kill_tree(proc, workdir)

        # Nothing half-written at a final path: every store there is whole and equals the reference.
        assert_final_stores_sound(workdir, reference)
        done = runs()
        if i == 0:
            assert k <= done < N_JOBS
        # attnsweep status: no job killed mid-way reads as done, running or failed.
        states = job_states(workdir)
        table = "\n".join(f"{j.state} {j.point} {j.detail}" for j in states)
        assert len(states) == N_JOBS, table
        assert all(j.state in ("done", "interrupted", "pending") for j in states), table
        assert sum(j.state == "done" for j in states) == done, table
        for job in states:
            if job.point in flying:  # in flight at the kill: finished just before it, or interrupted
                assert job.state in ("done", "interrupted"), table
                killed_in_flight += job.state == "interrupted"

        # Snakemake's lock outlives a SIGKILL: a plain rerun is refused until --unlock.
        if i == 0:
            code, text = run(workdir, DATA_TARGET, name="refused")
            assert code != 0 and LOCKED in text and "--unlock" in text, text[-3000:]
            assert "localrule" not in text and runs() == done
        run_ok(workdir, "--unlock", name=f"unlock{i}")

    assert killed_in_flight >= 1, "no kill hit a running simulate job"
    text = run_ok(workdir, DATA_TARGET, name="resumed")
    assert_outputs_equal(workdir, reference)
    # The last kill came during boundary: the resumed run redoes it (and no simulate job).
    for rule in ("simulate", "collect"):
        assert f"localrule {rule}:" not in text, f"{rule} was redone after the kill during boundary"
    assert "localrule boundary:" in text


# --- 2. two invocations on one results directory ---------------------------------------------

def test_second_invocation_is_refused_first_completes(reference: Path, tmp_path: Path) -> None:
    """While a sweep runs, a second `snakemake` in the same directory is refused by Snakemake's
    lock, and a third in another directory whose config names the same results directory by
    attnsweep's (attnsweep.run.lock); neither starts a job or changes anything, and the first
    completes with the reference numbers."""
    config = {**CONFIG, "results": str(tmp_path / "sweep" / "results")}
    workdir = prepare(tmp_path / "sweep", config)
    first = start(workdir, f"{config['results']}/{EXP}/boundary.csv", name="first")
    locks = workdir / ".snakemake" / "locks"
    wait_for(first, lambda: locks.is_dir() and any(locks.iterdir()), "the first run's lock", workdir)
    began = time.monotonic()
    code, text = run(workdir, name="second")  # the default target: everything, figures too
    took = time.monotonic() - began
    assert code != 0 and LOCKED in text, text[-3000:]
    assert first.poll() is None, "the first run ended before the second was refused: nothing was tested"
    assert "localrule" not in text, "the refused run started a job"
    assert took < 120, f"refused only after {took:.0f} s"
    code, text = run(prepare(tmp_path / "elsewhere", config), name="elsewhere")
    assert code != 0 and "is in use by snakemake pid" in text and str(workdir) in text, text[-3000:]
    assert "localrule" not in text and first.poll() is None
    code, text = finish(workdir, first)
    assert code == 0, text[-4000:]
    assert_outputs_equal(workdir, reference)


# --- 3. full disk, read-only and impossible results directories --------------------------------

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs (a full or read-only disk) needs root")


@pytest.fixture
def tmpfs() -> Callable[[Path, str], None]:
    """Mount a tmpfs of a given size at a path (skips when mounting is not possible); unmounts after."""
    mounted: list[Path] = []

    def mount(path: Path, size: str) -> None:
        path.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                              capture_output=True, text=True, check=False)
        if done.returncode:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
        mounted.append(path)

    yield mount
    for path in reversed(mounted):
        if subprocess.run(["umount", str(path)], capture_output=True, check=False).returncode:
            subprocess.run(["umount", "-l", str(path)], capture_output=True, check=False)


def remount(path: Path, options: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{options}", str(path)], check=True, capture_output=True)


def hidden_leftovers(root: Path) -> list[str]:
    """Temporary siblings and running markers: none may outlive a job that ended, even by an error."""
    return sorted(str(p.relative_to(root)) for p in root.rglob(".*") if ".tmp" in p.name or p.name.endswith(".running"))


@needs_root
def test_disk_full_then_read_only_then_resume(reference: Path, tmp_path: Path, tmpfs) -> None:
    """results/ on a 48 KiB tmpfs (room for a few of the 12 run stores, 16 KiB each): the run fails naming
    ENOSPC, every store at a final path is whole, no temporary sibling is left. Read-only: fails
    naming it, writes nothing. Made big and writable again: the rerun completes to the reference."""
    workdir = prepare(tmp_path / "sweep", CONFIG)
    results = workdir / "results"
    tmpfs(results, "48k")

    code, text = run(workdir, DATA_TARGET, name="full")
    assert code != 0, text[-3000:]
    assert "No space left on device" in text
    stored = assert_final_stores_sound(workdir, reference)
    assert 0 < len(run_stores(workdir)) == stored < N_JOBS, text[-3000:]
    assert hidden_leftovers(results) == []
    states = job_states(workdir)
    failed = [job for job in states if job.state == "failed"]
    assert {job.state for job in states} == {"done", "failed"}  # keep-going: every job was tried
    for job in failed:  # attnsweep status shows why, from the job log
        assert "cannot write" in job.detail and "No space left on device" in job.detail, job.detail

    remount(results, "ro")
    code, text = run(workdir, DATA_TARGET, name="readonly")
    assert code != 0, text[-3000:]
    assert "Read-only file system" in text
    assert len(run_stores(workdir)) == stored and hidden_leftovers(results) == []

    remount(results, "rw,size=64m")
    text = run_ok(workdir, DATA_TARGET, name="resumed")
    assert text.count("localrule simulate:") == N_JOBS - stored, "stores written before the disk filled were redone"
    assert_outputs_equal(workdir, reference)
    assert hidden_leftovers(results) == []


@needs_root
def test_job_on_full_disk_says_so_in_one_line(tmp_path: Path, tmpfs, capsys: pytest.CaptureFixture) -> None:
    """`attnsweep run` (the code path of a job without the warm server) whose store does not fit:
    exit status 1, one line naming the store and ENOSPC, no traceback, nothing left on the disk."""
    from attnsweep import cli

    disk = tmp_path / "disk"
    tmpfs(disk, "4k")  # room for the running marker (one page), not for the store
    out = disk / "point.zarr"
    code = cli.main(["run", EXP, "n=16", "d=4", "rho=0.5", "gamma=1,2", "seeds=2", "device=cpu", "--quiet",
                     "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 1
    assert err.splitlines()[-1] == f"attnsweep: cannot write {out}: No space left on device", err
    assert "Traceback" not in err
    assert list(disk.iterdir()) == []


def test_results_under_a_file_refused_before_any_job(tmp_path: Path) -> None:
    """`results:` below a regular file: Snakemake stops while building the DAG, naming the path
    and the reason, before any job runs, and creates nothing."""
    (tmp_path / "blocker").write_text("not a directory\n")
    workdir = prepare(tmp_path, {**CONFIG, "results": "blocker/results"})
    code, text = run(workdir, "blocker/results/critical_scaling/boundary.csv", name="blocked")
    assert code != 0
    assert "Not a directory" in text and "blocker" in text, text[-3000:]
    assert "localrule" not in text
    assert (tmp_path / "blocker").read_text() == "not a directory\n"
