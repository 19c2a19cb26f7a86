"""benchmarks/gpu_refine.sh on the CPU: a piece given time enough ends the tiny refinement, and
what it packs for the trip back is that refinement: the same record as an ``attnsweep refine`` run
directly (refinement is deterministic), with the logs of the jobs it ran."""

from __future__ import annotations

import os
import shutil
import sys
import tarfile
from pathlib import Path

import pytest
from helpers import processes
from helpers.project import refine_command
from helpers.workflow_runs import assert_same_store

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def test_a_piece_with_time_enough_packs_the_whole_refinement(tmp_path: Path, tiny_refine: Path) -> None:
    """The piece starts from the uninterrupted refinement less its last simulate job and the
    aggregates (as a piece before it left them): it runs that job, reduces, finds the boundary
    precise and draws the figures; a piece from nothing would run the same code three rounds over."""
    work, out, unpacked = tmp_path / "project", tmp_path / "out", tmp_path / "unpacked"
    shutil.copytree(tiny_refine, work, ignore=shutil.ignore_patterns("logs", "locks", "*.out"))
    results = work / "results" / "critical_scaling"
    last = max(results.glob("runs/**/*.zarr"), key=lambda p: p.stat().st_mtime_ns)
    for path in (last, *(results / name for name in ("sweep.zarr", "summary.zarr", "boundary.zarr"))):
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    command = refine_command(work, "--cores", "1")  # writes work/config.yaml
    refine_args = command[command.index("config.yaml") + 1:]
    # SECONDS is the hang guard: the refinement's last round takes well under a minute (processes.HANG_S);
    # the outer guard adds the script's own 30 s before it SIGKILLs a refine that ignored SIGINT,
    # and as long again for packing a few hundred kB
    done = processes.run(["bash", str(ROOT / "benchmarks" / "gpu_refine.sh"), "config.yaml",
                          str(int(processes.HANG_S)), str(out), *refine_args],
                         cwd=work, env={**os.environ, "PYTHON": sys.executable},
                         timeout=processes.HANG_S + 60, capture_output=True, text=True)
    log = (out / "refine.log").read_text()
    assert done.returncode == 0, done.stderr[-3000:] + log[-3000:]
    assert "refine exit status 0" in log
    with tarfile.open(out / "piece.tgz") as archive:
        archive.extractall(unpacked, filter="data")
    record = Path("results", "critical_scaling", "refine.json")
    assert (unpacked / record).read_text() == (tiny_refine / record).read_text()
    assert_same_store(unpacked / last.relative_to(work), tiny_refine / last.relative_to(work))  # zip times differ
    job = last.relative_to(results / "runs").with_suffix(".log")
    assert [p.relative_to(unpacked / "logs" / "critical_scaling" / "simulate")
            for p in (unpacked / "logs" / "critical_scaling" / "simulate").rglob("*.log")] == [job]
