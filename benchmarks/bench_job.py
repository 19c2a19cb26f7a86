"""One simulate job of a sweep config, through the code path the simulate rule takes
(:func:`attnsweep.run.job.run_job`: the allocator, the job's threads for torch and BLAS, the store
written, here into a temporary folder): for timing a change to an engine against its parent on a
job the sweeps really run.

``--set KEY=VALUE`` (VALUE in YAML) replaces a key of the config's one experiment section, to cut
the job down to a size a benchmark can repeat; the first job of the plan runs, on the CPU with the
config's threads, without progress output. Prints the job's cost estimate (``job_seconds``) and
nothing else: time two whole processes from outside and pair them (benchmarks/RESULTS.md gives the
commands and the numbers).

usage: python benchmarks/bench_job.py CONFIG [--set KEY=VALUE ...]
  e.g. python benchmarks/bench_job.py config/sweeps/noisy_clustering_d3.yaml \\
           --set n=[256] beta=[8.0] seeds=1 burn_in=1.0 window=1.0
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import yaml


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config")
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()

    from attnsweep.plan.config import load_sweep
    from attnsweep.run.job import run_job

    with open(args.config) as f:
        config = yaml.safe_load(f)
    (name, section), = config["experiments"].items()
    for item in args.set:
        key, _, value = item.partition("=")
        section[key] = yaml.safe_load(value)
    sweep = load_sweep(config)
    plan = sweep.plans[name]
    job = next(iter(plan.jobs().values()))
    with tempfile.TemporaryDirectory() as folder:
        run_job(job, Path(folder) / "job.zarr", device="cpu", threads=sweep.config["threads"], progress=False)
    print(f"estimate {plan.experiment.job_seconds(job):.2f} s")


if __name__ == "__main__":
    main()
