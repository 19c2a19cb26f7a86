"""Snakemake script of rule boundary: sweep + summary -> boundary.csv, boundary.zarr."""

import sys

sys.path.insert(0, snakemake.scriptdir)  # noqa: F821
from _log import to_log  # noqa: E402

from attnsweep.aggregate import boundary  # noqa: E402

to_log(snakemake.log[0])  # noqa: F821
boundary(
    snakemake.input.sweep,  # noqa: F821
    snakemake.input.summary,  # noqa: F821
    snakemake.output.csv,  # noqa: F821
    snakemake.output.store,  # noqa: F821
)
