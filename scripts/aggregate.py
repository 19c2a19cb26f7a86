"""Snakemake script of the rules after simulate: one thin call into attnsweep.aggregate per rule."""

import json
import logging
import sys

from attnsweep import aggregate

smk = snakemake  # noqa: F821  (injected by Snakemake)
sys.stderr = open(smk.log[0], "a", buffering=1)
logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(name)s %(message)s")

STEPS = {
    "collect": lambda: aggregate.collect(smk.input.runs, smk.output.sweep, json.loads(smk.params.grid)),
    "reduce": lambda: aggregate.reduce(smk.input.sweep, smk.output.summary),
    "boundary": lambda: aggregate.boundary(smk.input.sweep, smk.input.summary, smk.output.csv, smk.output.store),
    "figure": lambda: aggregate.figure(smk.wildcards.figure, smk.input.summary, smk.input.boundary,
                                       smk.output.png, smk.output.pdf),
}
STEPS[smk.rule]()
