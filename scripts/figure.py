"""Snakemake script of rule figure: one figure as PNG and PDF."""

import sys

sys.path.insert(0, snakemake.scriptdir)  # noqa: F821
from _log import to_log  # noqa: E402

from attnsweep.aggregate import figure  # noqa: E402

to_log(snakemake.log[0])  # noqa: F821
figure(
    snakemake.wildcards.figure,  # noqa: F821
    snakemake.input.summary,  # noqa: F821
    snakemake.input.boundary,  # noqa: F821
    snakemake.output.png,  # noqa: F821
    snakemake.output.pdf,  # noqa: F821
)
