"""Snakemake script of rule reduce: sweep.zarr -> summary.zarr."""

import sys

sys.path.insert(0, snakemake.scriptdir)  # noqa: F821
from _log import to_log  # noqa: E402

from attnsweep.aggregate import reduce  # noqa: E402

to_log(snakemake.log[0])  # noqa: F821
reduce(snakemake.input.sweep, snakemake.output.summary)  # noqa: F821
