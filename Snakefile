# attnsweep: parameter sweeps of self-attention dynamics.
# Entry point: validate the config, plan the jobs of every experiment, include the generic rules.
from snakemake.utils import min_version

min_version("9.0")


# A config file given on the command line is the whole sweep (its unset keys take the schema's
# defaults), not an overlay on the default config: otherwise every sweep in config/sweeps/ would
# also run every experiment of the default config.
if not workflow.overwrite_configfiles:

    configfile: "config/config.yaml"


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/worker.smk"
include: "workflow/rules/simulate.smk"
include: "workflow/rules/aggregate.smk"
include: "workflow/rules/figures.smk"


rule all:
    default_target: True
    input:
        final_outputs(),
