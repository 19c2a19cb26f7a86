"""Whole-process benchmarks of one simulate job: fixed overhead, and one long-context point.

- ``overhead``: a job with almost no compute (n = 2, d = 1, one rho and gamma, one probe) run
  as the simulate rule runs it (``python -m attnsweep.cli job SPEC``), so its wall time is the
  per-job fixed cost: process start, imports, store write; once in a fresh process and once
  through the warm fork server of local runs (``attnsweep.run.worker``). The import of torch and
  of xarray/zarr alone are timed for the breakdown. Target: <= 1.5 s.
- ``long``: one grid point at n = 65536, d = 128 (``attnsweep run``): wall time and peak
  resident memory of the process. Target: <= 4 GB. Hutchinson by default: at n far above
  d^2 it is the cheaper eta (exact costs O(n^2 d^2) per gamma there).

Each figure is the median of ``--repeats`` runs, timed from outside with perf_counter; peak
memory is the larger of the child's getrusage and the summed PSS of its whole process tree
(sampled every 20 ms), so work spread over helper processes is counted once in full.

usage: python benchmarks/bench_process.py [overhead|long] [--repeats 5] [--probes 16]
       [--eta-method hutchinson|exact]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path


def tree_pss_kib(pid: int) -> int:
    """Summed proportional set size of ``pid`` and its descendants, KiB (0 once gone)."""
    total, todo = 0, [pid]
    while todo:
        proc = Path("/proc", str(todo.pop()))
        try:
            rollup = (proc / "smaps_rollup").read_text()
            total += int(next(line.split()[1] for line in rollup.splitlines() if line.startswith("Pss:")))
            for task in (proc / "task").iterdir():
                todo += [int(child) for child in (task / "children").read_text().split()]
        except (OSError, StopIteration, ValueError):
            continue
    return total


def run(cmd: list[str]) -> tuple[float, float]:
    """Wall seconds and peak memory (GiB) of one child process and its descendants."""
    start = time.perf_counter()
    pid = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).pid
    peak, done = [0], threading.Event()

    def sample() -> None:
        while not done.wait(0.02):
            peak[0] = max(peak[0], tree_pss_kib(pid))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, status, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - start
    done.set()
    sampler.join()
    if status != 0:
        raise SystemExit(f"command failed ({status}): {' '.join(cmd)}")
    return wall, max(usage.ru_maxrss, peak[0]) / 2**20


def median_of(cmd: list[str], repeats: int) -> tuple[float, float, float, float]:
    run(cmd)  # warm-up: page cache
    walls, peaks = zip(*(run(cmd) for _ in range(repeats)))
    return statistics.median(walls), min(walls), max(walls), max(peaks)


def overhead(repeats: int) -> None:
    spec = {"experiment": "critical_scaling", "dtype": "float32", "seeds": [0],
            "grid": {"n": [2], "d": [2], "rho": [0.5], "gamma": [1.0], "alpha": [0.0]},
            "options": {"noise": "scaled", "eta_method": "exact", "probes": 1, "pair_subsample_n": 16384,
                        "pair_samples": 4194304, "quantile_tokens": 512}}
    with tempfile.TemporaryDirectory() as tmp:
        job = [sys.executable, "-m", "attnsweep.cli", "job", json.dumps(spec),
               "--out", f"{tmp}/x.zarr", "--device", "cpu", "--threads", "1"]
        rows = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "import torch": [sys.executable, "-c", "import torch"],
            "import xarray, zarr": [sys.executable, "-c", "import xarray, zarr"],
            "whole job (n=2)": job,
        }
        for label, cmd in rows.items():
            med, lo, hi, _ = median_of(cmd, repeats)
            print(f"  {label:<28} median {med:.2f} s  (min {lo:.2f}, max {hi:.2f})")
        # The same job through the warm fork server that local Snakemake runs start.
        socket = f"{tmp}/worker.sock"
        server = subprocess.Popen([sys.executable, "-m", "attnsweep.run.worker", socket, "--idle", "60"])
        while not os.path.exists(socket):
            time.sleep(0.1)
        try:
            warm = ["env", f"ATTNSWEEP_WORKER={socket}", *job]
            med, lo, hi, _ = median_of(warm, repeats)
            print(f"  {'whole job via warm server':<28} median {med:.2f} s  (min {lo:.2f}, max {hi:.2f})")
        finally:
            server.terminate()
            server.wait()


def long_context(repeats: int, probes: int, eta_method: str) -> None:
    out = tempfile.mkdtemp()
    try:
        cmd = [sys.executable, "-m", "attnsweep.cli", "run", "critical_scaling", "n=65536", "d=128",
               "rho=0.5", "gamma=2", "seeds=1", f"eta_method={eta_method}", f"probes={probes}", "device=cpu",
               f"threads={os.cpu_count()}", "--quiet", "--out", f"{out}/point.zarr"]
        walls, peaks = [], []
        for _ in range(repeats):
            shutil.rmtree(f"{out}/point.zarr", ignore_errors=True)
            wall, peak = run(cmd)
            walls.append(wall)
            peaks.append(peak)
        what = f"{probes} probes" if eta_method == "hutchinson" else "exact eta"
        print(f"  n=65536 d=128, {what}: wall median {statistics.median(walls):.1f} s "
              f"(min {min(walls):.1f}, max {max(walls):.1f}), peak RSS max {max(peaks):.2f} GiB")
    finally:
        shutil.rmtree(out, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("which", choices=["overhead", "long"])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--probes", type=int, default=16)
    parser.add_argument("--eta-method", default="hutchinson", choices=["hutchinson", "exact"])
    args = parser.parse_args()
    print(f"machine: {os.uname().nodename}, {os.cpu_count()} cpus, python {sys.version.split()[0]}")
    if args.which == "overhead":
        overhead(args.repeats)
    else:
        long_context(args.repeats, args.probes, args.eta_method)


if __name__ == "__main__":
    main()
