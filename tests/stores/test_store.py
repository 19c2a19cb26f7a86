"""Stores appear only when complete: failures and kill -9 leave no final path; run stores are
one file, and the earlier directory layout still reads."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
import zarr
from helpers import processes

from attnsweep.status import job_status
from attnsweep.stores.io import open_store, write_atomic, write_file
from attnsweep.stores.probe import complete, root_attrs


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
    proc = processes.start(cmd, stderr=subprocess.PIPE, text=True)
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


def dataset() -> xr.Dataset:
    ds = xr.Dataset({"a": (("x", "y"), np.arange(12.0).reshape(3, 4)), "big": ("z", np.arange(300_000.0))},
                    coords={"x": [1, 2, 3], "y": [0.5, 1.0, 1.5, 2.0]}, attrs={"job": "{}"})
    ds["a"].attrs["units"] = "1"
    return ds


def test_one_file_store_round_trip(tmp_path: Path) -> None:
    """A run store is one zip file whose entries are those of the zarr store, each once, every
    array one chunk (raw under 64 KiB, compressed above); it opens identical, by open_store and
    by plain xarray through zarr's ZipStore."""
    path = write_file(dataset(), tmp_path / "p.zarr")
    assert path.is_file() and list(tmp_path.iterdir()) == [path]
    names = zipfile.ZipFile(path).namelist()
    assert len(names) == len(set(names))
    assert sorted(n for n in names if "/c/" in n) == ["a/c/0/0", "big/c/0", "x/c/0", "y/c/0"]
    with zipfile.ZipFile(path) as zf:
        assert zf.getinfo("a/c/0/0").file_size == 12 * 8  # raw
        assert zf.getinfo("big/c/0").file_size < 300_000 * 8 / 2  # zstd
    xr.testing.assert_identical(open_store(path).load(), dataset())
    plain = xr.open_zarr(zarr.storage.ZipStore(path, mode="r"), zarr_format=3, consolidated=False)
    xr.testing.assert_identical(plain.load(), dataset())
    assert complete(path) and root_attrs(path) == {"job": "{}"}


def test_either_layout_reads_and_replaces_the_other(tmp_path: Path) -> None:
    """A directory store (the earlier run-store layout) and a one-file store of the same data
    open alike; writing one layout over the other replaces it whole."""
    folder, single = write_atomic(dataset(), tmp_path / "d.zarr"), write_file(dataset(), tmp_path / "f.zarr")
    xr.testing.assert_identical(open_store(folder).load(), open_store(single).load())
    assert root_attrs(folder) == root_attrs(single) and complete(folder) and complete(single)
    write_file(dataset(), folder)
    assert folder.is_file()
    write_atomic(dataset(), single)
    assert single.is_dir()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.zarr", "f.zarr"]
    assert not complete(tmp_path / "none.zarr")


def test_failed_archive_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The disk fills while the archive is written: no final path, no temporary sibling, and an
    earlier store at the path is left as it was."""
    target = tmp_path / "runs" / "p.zarr"
    write_file(dataset().isel(z=slice(0, 3)), target)
    before = target.read_bytes()
    calls = []

    def full(self, name, data, *args, **kwargs):
        calls.append(name)
        if len(calls) > 2:
            raise OSError(28, "No space left on device")
        return original(self, name, data, *args, **kwargs)

    original = zipfile.ZipFile.writestr
    monkeypatch.setattr(zipfile.ZipFile, "writestr", full)
    with pytest.raises(OSError, match="No space"):
        write_file(dataset(), target)
    assert list((tmp_path / "runs").iterdir()) == [target] and target.read_bytes() == before
