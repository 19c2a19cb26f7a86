"""Snakemake script of rule collect: run stores -> sweep.zarr."""

import sys

sys.path.insert(0, snakemake.scriptdir)  # noqa: F821
from _log import to_log  # noqa: E402

from attnsweep.aggregate import collect  # noqa: E402

to_log(snakemake.log[0])  # noqa: F821
collect(snakemake.input.runs, snakemake.output.sweep)  # noqa: F821
