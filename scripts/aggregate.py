"""Snakemake script of the collect rule: one thin call into attnsweep.aggregate (reduce, boundary
and figure run ``attnsweep aggregate``, through the warm server).

Everything sits under the ``__main__`` guard: collect's reader processes import this script
again (as multiprocessing does with a main module), without Snakemake's ``snakemake`` object.
"""

import json
import logging
import sys

from attnsweep import aggregate

if __name__ == "__main__":
    smk = snakemake  # noqa: F821  (injected by Snakemake)
    sys.stderr = open(smk.log[0], "a", buffering=1)
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    layout = json.loads(smk.params.layout)
    aggregate.collect(smk.input.runs, smk.output.sweep, layout["grid"], layout["points"], workers=smk.threads)
