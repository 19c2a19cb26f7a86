"""Stores appear only when complete: failures and kill -9 leave no final path."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from attnsweep.status import job_status
from attnsweep.store import open_store, write_atomic


def test_failed_write_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ds = xr.Dataset({"a": ("x", np.arange(3.0))})
    target = tmp_path / "runs" / "p.zarr"

    def broken(self, store, **kwargs):
        Path(store, "zarr.json").parent.mkdir(parents=True)
        Path(store, "zarr.json").write_text("{}")  # half-written
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(xr.Dataset, "to_zarr", broken)
    with pytest.raises(OSError, match="No space"):
        write_atomic(ds, target)
    assert list((tmp_path / "runs").iterdir()) == []


def test_rewrite_replaces_whole_store(tmp_path: Path) -> None:
    target = tmp_path / "p.zarr"
    write_atomic(xr.Dataset({"a": ("x", np.zeros(4))}), target)
    write_atomic(xr.Dataset({"b": ("y", np.ones(2))}), target)
    ds = open_store(target)
    assert list(ds.data_vars) == ["b"] and ds["b"].values.tolist() == [1.0, 1.0]


def test_kill_9_mid_job_leaves_no_final_store(tmp_path: Path) -> None:
    out = tmp_path / "point.zarr"
    cmd = [sys.executable, "-m", "attnsweep.cli", "run", "critical_scaling", "n=512", "d=64",
           "rho=0.1,0.3,0.5,0.7,0.9", "gamma=1,2,4,8", "seeds=3", "eta_method=hutchinson", "probes=16", "device=cpu",
           "--out", str(out)]
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    # Wait until the job is computing (its first log line), then kill it outright.
    assert "critical_scaling:" in proc.stderr.readline()
    time.sleep(1.0)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not out.exists()
    leftovers = [p.name for p in tmp_path.iterdir()]
    # partial stores in temporary siblings, and the marker that shows the job as interrupted
    assert all(name.startswith(".point.zarr.tmp-") or name == ".point.zarr.running" for name in leftovers)
    assert job_status("point", out, tmp_path / "no.log").state == "interrupted"
