# attnsweep: parameter sweeps of self-attention dynamics.
# Entry point: validate the config, plan the jobs of every experiment, include the generic rules.
from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/worker.smk"
include: "workflow/rules/simulate.smk"
include: "workflow/rules/aggregate.smk"
include: "workflow/rules/figures.smk"


rule all:
    input:
        final_outputs(),
    default_target: True
