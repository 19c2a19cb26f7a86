"""The code path every simulate and theory job takes, from Snakemake or from ``attnsweep run``."""

from __future__ import annotations

import json
import logging
import resource
import time
from pathlib import Path

import torch
from threadpoolctl import threadpool_limits

from attnsweep import registry
from attnsweep.dynamics import cpu_paths
from attnsweep.jobspec import JobSpec
from attnsweep.run.allocator import keep_freed_memory
from attnsweep.run.device import resolve_device, resolve_dtype
from attnsweep.stores.io import provenance, write_file
from attnsweep.stores.marker import running_marker

log = logging.getLogger("attnsweep")


def run_job(spec: JobSpec, out: str | Path, device: str = "auto", threads: int | None = None,
            progress: bool = True) -> Path:
    """Simulate ``spec`` on ``device`` (a theory job: compute the experiment's theory) and write
    its store, one file, atomically to ``out``.

    A marker next to ``out`` names this process while it works (``attnsweep status``).
    """
    experiment = registry.get(spec.experiment)
    keep_freed_memory()  # no page faults for the tensors every step allocates anew
    torch_device = resolve_device(device)  # type: ignore[arg-type]
    dtype = resolve_dtype(spec.dtype)  # type: ignore[arg-type]
    if threads:
        torch.set_num_threads(threads)
    with running_marker(out):
        # Marker first, then the first log line: a job killed after it began to log is never
        # mistaken for a failed one by `attnsweep status`.
        log.info("%s: %s on %s/%s -> %s", spec.experiment, spec.grid, torch_device, spec.dtype, out)
        start = time.perf_counter()
        # BLAS (numpy's products) takes the job's threads too: at its default of every core it
        # oversubscribed the cores a sweep's other jobs hold: an n = 1024 job 3.1x slower (RESULTS.md)
        with threadpool_limits(torch.get_num_threads(), user_api="blas"):
            if spec.step == "theory":
                ds = experiment.theory(spec)
            else:
                ds = experiment.simulate(spec, torch_device, dtype, progress=progress)
        wall = time.perf_counter() - start
        ds.attrs.update(provenance(
            experiment=spec.experiment,
            paper=experiment.paper,
            job=spec.to_dict(),
            device=str(torch_device),
            device_name=torch.cuda.get_device_name(torch_device) if torch_device.type == "cuda" else "cpu",
            dtype=spec.dtype,
            torch_threads=torch.get_num_threads(),
            wall_time_s=round(wall, 3),
            # Of this process; a child of the warm server also counts the server's imports.
            peak_rss_mib=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        ))
        if cpu_paths.consulted():  # a dynamics engine ran its primitives on the CPU
            ds.attrs["cpu_paths"] = json.dumps(cpu_paths.choices())
        path = write_file(ds, out)
    log.info("%s: done in %.2f s", out, wall)
    return path
