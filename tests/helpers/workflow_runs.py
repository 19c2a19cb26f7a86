"""Helpers of the tests that run the workflow as a user does: `snakemake` in a temporary
working directory, each run in its own process group (:mod:`processes`), and its results read
back and compared bit for bit."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import yaml

from attnsweep.stores.io import open_store
from helpers import processes

REPO = Path(__file__).resolve().parents[2]
SNAKEFILE = REPO / "Snakefile"
WAIT_S = processes.HANG_S


def prepare(workdir: Path, config: dict) -> Path:
    """``workdir`` with ``config`` as its ``config.yaml``."""
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "config.yaml").write_text(yaml.safe_dump(config))
    return workdir


def start(workdir: Path, *args: str, name: str) -> subprocess.Popen:
    """`snakemake` in its own session (process group), output to ``workdir/name.out``."""
    cmd = [sys.executable, "-m", "snakemake", "-s", str(SNAKEFILE), "--directory", str(workdir),
           "--configfile", str(workdir / "config.yaml"), "--cores", "2", *args]
    out = open(workdir / f"{name}.out", "w")  # noqa: SIM115  (closed by the child's exit)
    proc = processes.start(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    out.close()
    proc.name = name  # type: ignore[attr-defined]
    return proc


def output(workdir: Path, proc: subprocess.Popen) -> str:
    return (workdir / f"{proc.name}.out").read_text(errors="replace")  # type: ignore[attr-defined]


def finish(workdir: Path, proc: subprocess.Popen, timeout: float = WAIT_S) -> tuple[int, str]:
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        processes.end(proc)
        pytest.fail(f"snakemake ran over {timeout} s:\n{output(workdir, proc)[-3000:]}")
    return proc.returncode, output(workdir, proc)


def run(workdir: Path, *args: str, name: str) -> tuple[int, str]:
    return finish(workdir, start(workdir, *args, name=name))


def run_ok(workdir: Path, *args: str, name: str) -> str:
    code, text = run(workdir, *args, name=name)
    assert code == 0, text[-4000:]
    return text


def wait_for(proc: subprocess.Popen, condition: Callable[[], bool], what: str, workdir: Path) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert proc.poll() is None, f"the run ended before {what}:\n{output(workdir, proc)[-3000:]}"
        assert time.monotonic() < deadline, f"no {what} after {WAIT_S} s"
        time.sleep(0.05)


def live_processes(pgid: int, workdir: Path) -> list[str]:
    """Processes, not zombies, in the process group ``pgid`` or working inside ``workdir``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cwd = os.readlink(entry / "cwd")
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # gone meanwhile, or a kernel thread
            continue
        state, _, pgrp = stat.rsplit(")", 1)[1].split()[:3]
        if state != "Z" and (int(pgrp) == pgid or cwd == str(workdir) or cwd.startswith(f"{workdir}/")):
            found.append(f"{entry.name} {cmd[:150]}")
    return found


def kill_tree(proc: subprocess.Popen, workdir: Path) -> None:
    """SIGKILL to the whole process group of the run: snakemake, jobs, the warm worker and its children."""
    assert proc.poll() is None, f"the run ended before its kill:\n{output(workdir, proc)[-3000:]}"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 15
    while (alive := live_processes(proc.pid, workdir)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive, f"survived SIGKILL of the run's process group: {alive}"


def final_stores(root: Path) -> dict[str, Path]:
    """Every zarr store at a final path under ``root`` (not a hidden temporary sibling): run
    stores are files, aggregates directories."""
    stores = {}
    for dirpath, dirnames, filenames in os.walk(root):  # tolerates directories renamed meanwhile
        descend = []
        for name in dirnames + filenames:
            if name.endswith(".zarr") and not name.startswith("."):
                path = Path(dirpath, name)
                stores[path.relative_to(root).as_posix()] = path
            elif name in dirnames and not name.startswith("."):
                descend.append(name)
        dirnames[:] = descend
    return stores


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype.kind in "biufc":
        return np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes()
    return bool(np.array_equal(a, b))


def assert_same_store(path: Path, ref: Path) -> None:
    """Same variables, dimensions, dtypes and bits as the reference store (attrs ignored)."""
    ds, want = open_store(path).load(), open_store(ref).load()
    assert sorted(ds.data_vars) == sorted(want.data_vars), f"{path}: variables differ"
    assert sorted(ds.coords) == sorted(want.coords), f"{path}: coordinates differ"
    for name in [*want.data_vars, *want.coords]:
        assert ds[name].dims == want[name].dims, f"{path}: {name} dims differ"
        assert same_bits(ds[name].values, want[name].values), f"{path}: {name} differs from the reference"


def chord_crossing(x: np.ndarray, y: np.ndarray, level: float) -> float:
    """First upward crossing of ``level`` by ``y`` on the grid ``x``, linearly interpolated (the
    level sets that show a transition's width, t_10 and t_90); NaN when there is none (written
    here, not attnsweep's)."""
    for k in range(1, len(x)):
        if y[k - 1] < level <= y[k]:
            return float(x[k - 1] + (level - y[k - 1]) / (y[k] - y[k - 1]) * (x[k] - x[k - 1]))
    return math.nan


def crossing(x: np.ndarray, y: np.ndarray, level: float) -> float:
    """First upward crossing of ``level`` by ``y`` on the grid ``x``, read through the cubic
    through the four values around it (the bracketing pair and a neighbour each side, moved
    inwards at the grid's ends; docs/statistics.md): numpy's roots of that cubic, in the
    bracket's own coordinate. NaN when y never goes from below the level to at or above it
    (written here, not attnsweep's)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    for k in range(1, len(x)):
        if y[k - 1] < level <= y[k]:
            start = min(max(k - 2, 0), max(len(x) - 4, 0))
            idx = np.arange(start, min(start + 4, len(x)))
            u = (x[idx] - x[k - 1]) / (x[k] - x[k - 1])
            roots = np.roots(np.polyfit(u, y[idx] - level, len(idx) - 1))
            inside = roots[(abs(roots.imag) < 1e-9) & (roots.real >= -1e-12) & (roots.real <= 1 + 1e-12)].real
            return float(x[k - 1] + inside.min() * (x[k] - x[k - 1]))
    return math.nan
