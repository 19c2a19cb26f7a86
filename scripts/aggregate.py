"""Snakemake script of collect, reduce and boundary: one thin call into attnsweep.aggregate per rule
(figure runs ``attnsweep figure``, through the warm server).

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
    }
    steps[smk.rule]()
