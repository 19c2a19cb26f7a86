"""Snakemake script of rule simulate: one job, one store (see attnsweep.jobs.run_job)."""

import sys

sys.path.insert(0, snakemake.scriptdir)  # noqa: F821
from _log import to_log  # noqa: E402

from attnsweep.jobs import run_job  # noqa: E402
from attnsweep.registry import JobSpec  # noqa: E402

to_log(snakemake.log[0])  # noqa: F821
run_job(
    JobSpec.from_dict(snakemake.params.job),  # noqa: F821
    snakemake.output.store,  # noqa: F821
    device=snakemake.params.device,  # noqa: F821
    threads=snakemake.threads,  # noqa: F821
)
