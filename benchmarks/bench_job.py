"""One simulate job of a sweep config, in this process, as the simulate rule runs it: for timing a
change to an engine against its parent on a job the sweeps really run.

``--set KEY=VALUE`` (VALUE in YAML) replaces a key of the config's one experiment section, to cut
the job down to a size a benchmark can repeat; the first job of the plan runs, single-threaded
unless the config says otherwise, without progress output, with the job's allocator settings.
Prints the job's cost estimate (``job_seconds``) and nothing else: time two whole processes from
outside and pair them (benchmarks/RESULTS.md gives the commands and the numbers).

usage: python benchmarks/bench_job.py CONFIG [--set KEY=VALUE ...]
  e.g. python benchmarks/bench_job.py config/sweeps/noisy_clustering_d3.yaml \\
           --set n=[256] beta=[8.0] seeds=1 burn_in=1.0 window=1.0
"""

from __future__ import annotations

import argparse

import yaml


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config")
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()

    import torch

    from attnsweep.plan.config import load_sweep
    from attnsweep.run.allocator import keep_freed_memory
    from attnsweep.run.device import resolve_dtype

    keep_freed_memory()  # as attnsweep.run.job does at the start of every job

    with open(args.config) as f:
        config = yaml.safe_load(f)
    (name, section), = config["experiments"].items()
    for item in args.set:
        key, _, value = item.partition("=")
        section[key] = yaml.safe_load(value)
    torch.set_num_threads(int(config.get("threads", 1)))
    plan = load_sweep(config).plans[name]
    job = next(iter(plan.jobs().values()))
    plan.experiment.simulate(job, torch.device("cpu"), resolve_dtype(config.get("dtype", "float32")), progress=False)
    print(f"estimate {plan.experiment.job_seconds(job):.2f} s")


if __name__ == "__main__":
    main()
