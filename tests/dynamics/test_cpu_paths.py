"""attnsweep.dynamics.cpu_paths: numpy's or torch's implementation of each engine primitive,
timed once per host and shared by every process on it (their results differ in the last bits,
and a result must not depend on which process ran a job).

Truth: the cache file and what separate processes report; the forced and damaged cases by their
messages. That either path gives the engine's numbers: tests/dynamics/test_dynamics.py (``cpu_path``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from helpers import processes

from attnsweep.dynamics import cpu_paths
from attnsweep.errors import ConfigError

EVERY = {f"{p}/{d}" for p in cpu_paths.PRIMITIVES for d in cpu_paths.DTYPES}


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cache directory of this test's, no forced path, no choice in memory."""
    monkeypatch.setenv("ATTNSWEEP_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv(cpu_paths.FORCE, raising=False)
    cpu_paths.forget()
    yield tmp_path / "cache"
    cpu_paths.forget()


def test_the_host_is_timed_once_and_the_choice_kept(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = cpu_paths.choices()
    assert set(first) == EVERY and set(first.values()) <= {"numpy", "torch"}
    (kept,) = cache.glob("cpu-paths-*.json")
    assert json.loads(kept.read_text())["paths"] == first and not list(cache.glob(".*"))  # no temporary left
    cpu_paths.forget()  # a later process: reads the file, times nothing
    monkeypatch.setattr(cpu_paths, "measure", lambda: pytest.fail("timed the CPU again"))
    assert cpu_paths.choices() == first
    assert cpu_paths.path("exp", torch.float64) == first["exp/float64"]


def test_the_first_choice_kept_holds(cache: Path) -> None:
    file = cpu_paths.cache_file()
    one, other = ({"paths": dict.fromkeys(EVERY, name)} for name in ("numpy", "torch"))
    cpu_paths.keep(file, one)
    cpu_paths.keep(file, other)  # timed at the same moment, finished second
    assert cpu_paths.choices() == one["paths"]


@pytest.mark.slow  # several interpreters timing at once (~7 s); the single-process choices stay fast
def test_processes_timing_at_once_agree(cache: Path) -> None:
    """Four fresh processes, none finding a choice kept: each reports the one in the file."""
    code = "import json; from attnsweep.dynamics import cpu_paths; print(json.dumps(cpu_paths.choices()))"
    procs = [processes.start([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True) for _ in range(4)]
    said = [json.loads(proc.communicate(timeout=processes.HANG_S)[0]) for proc in procs]
    (kept,) = cache.glob("cpu-paths-*.json")
    assert all(s == json.loads(kept.read_text())["paths"] for s in said)


def test_the_key_does_not_depend_on_what_else_the_process_imported(cache: Path) -> None:
    """scipy's wheels load their own copy of OpenBLAS: a job that imported scipy first must find
    the same cache file as one that did not, or the two time the CPU apart and may choose apart."""
    code = ("import json, sys; {}from threadpoolctl import threadpool_info; from attnsweep.dynamics import cpu_paths; "
            "print(json.dumps([len(threadpool_info()), str(cpu_paths.cache_file())]))")
    said = [json.loads(processes.run([sys.executable, "-c", code.format(first)], capture_output=True, text=True,
                                     check=True).stdout) for first in ("", "import scipy.linalg; ")]
    assert said[1][0] > said[0][0]  # scipy did bring another library (else this test would test nothing)
    assert said[1][1] == said[0][1]


def test_a_forced_path_and_bad_input(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(cpu_paths.FORCE, "torch")
    assert cpu_paths.choices() == dict.fromkeys(EVERY, "torch") and not cache.exists()
    cpu_paths.forget()
    monkeypatch.setenv(cpu_paths.FORCE, "mkl")
    with pytest.raises(ConfigError, match="ATTNSWEEP_CPU_PATH: 'mkl' is not numpy or torch"):
        cpu_paths.choices()
    cpu_paths.forget()
    monkeypatch.delenv(cpu_paths.FORCE)
    file = cpu_paths.cache_file()
    file.parent.mkdir(parents=True)
    file.write_text('{"paths": {"exp/float64": "numpy"}')  # cut short
    with pytest.raises(ConfigError, match=f"{file}: damaged .*delete it"):
        cpu_paths.choices()


@pytest.mark.slow  # a whole job in a fresh interpreter (~10 s)
def test_a_job_records_its_paths(cache: Path, tmp_path: Path) -> None:
    """A sphere_clustering job on the CPU records the choice it ran with; critical_scaling's
    kernel, which uses none of these primitives, records none."""
    from attnsweep.stores.io import open_store

    run = [sys.executable, "-m", "attnsweep.cli", "run"]
    sphere = processes.run([*run, "sphere_clustering", "n=8", "d=2", "beta=1", "seeds=2", "t_max=1", "outputs=2",
                            "device=cpu", "--out", str(tmp_path / "sphere.zarr")], capture_output=True,
                           text=True)
    assert sphere.returncode == 0, sphere.stderr
    (kept,) = cache.glob("cpu-paths-*.json")
    assert json.loads(open_store(tmp_path / "sphere.zarr").attrs["cpu_paths"]) == json.loads(kept.read_text())["paths"]
    critical = processes.run([*run, "critical_scaling", "n=8", "d=4", "rho=0.5", "gamma=1", "seeds=1", "device=cpu",
                              "--out", str(tmp_path / "critical.zarr")], capture_output=True, text=True)
    assert critical.returncode == 0, critical.stderr
    assert "cpu_paths" not in open_store(tmp_path / "critical.zarr").attrs
