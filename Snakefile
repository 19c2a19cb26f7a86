# A project of attnsweep sweeps (`attnsweep init` writes a copy of this file): the workflow of the
# installed attnsweep package, workflow/Snakefile, used as a Snakemake module with this
# directory's config/ and profiles/. In a checkout that workflow is this repository's own.
from attnsweep.project_files import snakefile as attnsweep_snakefile

# A config that names experiments (--configfile config/sweeps/X.yaml) is the whole sweep, its unset
# keys the schema's defaults; one that names none (nothing, or --config device=cpu) is an overlay
# on the default config. Otherwise every sweep would also run every experiment of the default.
if "experiments" not in config:

    configfile: "config/config.yaml"


module attnsweep:
    snakefile:
        attnsweep_snakefile()
    config:
        config


use rule * from attnsweep


# Snakemake runs only the main Snakefile's handlers: these hold the results lock and start and
# stop the warm worker (without them every job runs in a fresh process, unguarded).
onstart:
    attnsweep.onstart()


onsuccess:
    attnsweep.onsuccess()


onerror:
    attnsweep.onerror()
