"""The warm fork server: same stores as a fresh process, failures and kills handled."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from attnsweep.config import load_sweep
from attnsweep.store import open_store
from attnsweep.worker import SOCKET_ENV

SECTION = {"n": [24], "d": [6], "rho": [0.3, 0.7], "gamma": [1.0, 4.0], "seeds": [3], "wildcards": []}


def spec(**section) -> str:
    config = {"dtype": "float64", "experiments": {"critical_scaling": {**SECTION, **section}}}
    (job,) = load_sweep(config).plans["critical_scaling"].jobs().values()
    return json.dumps(job.to_dict())


def job(spec_text: str, out: Path, socket: str | None, device: str = "cpu") -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k != SOCKET_ENV}
    if socket:
        env[SOCKET_ENV] = socket
    cmd = [sys.executable, "-m", "attnsweep.cli", "job", spec_text, "--out", str(out), "--device", device]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def children_of(pid: int) -> list[int]:
    """Live child processes of ``pid`` (Linux /proc)."""
    kids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            kids.append(int(stat.parent.name))
    return kids


SERVER_PID: dict[str, int] = {}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    socket = str(tmp_path_factory.mktemp("worker") / "w.sock")
    proc = subprocess.Popen([sys.executable, "-m", "attnsweep.worker", socket, "--idle", "120"])
    deadline = time.monotonic() + 60
    while not os.path.exists(socket):
        assert proc.poll() is None and time.monotonic() < deadline, "server did not start"
        time.sleep(0.1)
    SERVER_PID[socket] = proc.pid
    yield socket
    proc.terminate()
    proc.wait(timeout=30)
    assert not os.path.exists(socket)


def test_server_store_equals_fresh_process(server: str, tmp_path: Path) -> None:
    text = spec()
    warm, cold = job(text, tmp_path / "warm.zarr", server), job(text, tmp_path / "cold.zarr", None)
    for proc in (warm, cold):
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    a, b = open_store(tmp_path / "warm.zarr").load(), open_store(tmp_path / "cold.zarr").load()
    for var in a.data_vars:
        np.testing.assert_array_equal(a[var].values, b[var].values, err_msg=var)
    assert a.attrs["job"] == b.attrs["job"]


def test_server_job_output_reaches_client_log(server: str, tmp_path: Path) -> None:
    proc = job(spec(), tmp_path / "x.zarr", server)
    _, err = proc.communicate(timeout=120)
    assert "critical_scaling" in err and "done in" in err


def test_failing_job_reports_status_and_message(server: str, tmp_path: Path) -> None:
    if __import__("torch").cuda.is_available():
        pytest.skip("needs a machine without CUDA to provoke the device error")
    proc = job(spec(), tmp_path / "x.zarr", server, device="cuda")
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 2
    assert "config error: device" in err and "Traceback" not in err
    assert not (tmp_path / "x.zarr").exists()


def test_killed_client_stops_its_child(server: str, tmp_path: Path) -> None:
    out = tmp_path / "big.zarr"
    proc = job(spec(n=[768], d=[96], rho=[0.1, 0.3, 0.5, 0.7, 0.9], gamma=[1, 2, 4, 8], seeds=[0, 1, 2],
                    eta_method="hutchinson", probes=16), out, server)
    while "critical_scaling" not in proc.stderr.readline():
        assert proc.poll() is None
    assert children_of(SERVER_PID[server]), "the job should run in a child of the server"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    time.sleep(3)  # longer than the child needs to notice
    assert not children_of(SERVER_PID[server]), "the orphaned child kept running"
    assert not out.exists()
    assert all(p.name.startswith(".big.zarr.tmp-") or p.name == ".big.zarr.running" for p in tmp_path.iterdir())
    # The server still serves.
    again = job(spec(), tmp_path / "after.zarr", server)
    again.communicate(timeout=120)
    assert again.returncode == 0


def test_no_server_runs_in_process(tmp_path: Path) -> None:
    proc = job(spec(), tmp_path / "x.zarr", str(tmp_path / "absent.sock"))
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert (tmp_path / "x.zarr" / "zarr.json").exists()


def test_idle_server_exits(tmp_path: Path) -> None:
    socket = tmp_path / "idle.sock"
    proc = subprocess.Popen([sys.executable, "-m", "attnsweep.worker", str(socket), "--idle", "1"])
    assert proc.wait(timeout=60) == 0
    assert not socket.exists()


def test_server_figure_equals_fresh_process(server: str, tmp_path: Path) -> None:
    """`attnsweep aggregate figure` through the server draws the same PNG, byte for byte, as without one."""
    from attnsweep import aggregate

    store = tmp_path / "run.zarr"
    proc = job(spec(), store, None)
    assert proc.wait(timeout=120) == 0, proc.stderr.read()
    sweep, summary = aggregate.collect([store], tmp_path / "sweep.zarr"), tmp_path / "summary.zarr"
    aggregate.reduce(sweep, summary)
    aggregate.boundary(sweep, summary, tmp_path / "boundary.csv", tmp_path / "boundary.zarr")
    procs = {}
    for name, socket in (("warm", server), ("cold", None)):
        env = {k: v for k, v in os.environ.items() if k != SOCKET_ENV} | ({SOCKET_ENV: socket} if socket else {})
        step = {"name": "finite_size", "summary_path": str(summary), "boundary_path": str(tmp_path / "boundary.zarr"),
                "png": str(tmp_path / f"{name}.png"), "pdf": str(tmp_path / f"{name}.pdf")}
        cmd = [sys.executable, "-m", "attnsweep.cli", "aggregate", "figure", json.dumps(step)]
        procs[name] = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True)
    for proc in procs.values():
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    assert (tmp_path / "warm.png").read_bytes() == (tmp_path / "cold.png").read_bytes()
    assert (tmp_path / "warm.pdf").stat().st_size > 1000
