"""Snakemake script of the rules after simulate: one thin call into attnsweep.aggregate per rule.

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
    steps = {
        "collect": lambda: aggregate.collect(smk.input.runs, smk.output.sweep, json.loads(smk.params.grid),
                                              workers=smk.threads),
        "reduce": lambda: aggregate.reduce(smk.input.sweep, smk.output.summary),
        "boundary": lambda: aggregate.boundary(smk.input.sweep, smk.input.summary, smk.output.csv,
                                               smk.output.store),
        "figure": lambda: aggregate.figure(smk.wildcards.figure, smk.input.summary, smk.input.boundary,
                                           smk.output.png, smk.output.pdf),
    }
    steps[smk.rule]()
