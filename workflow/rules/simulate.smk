# One job = one block of the grid = one store, one file (a zip archive of a zarr v3 store,
# attnsweep.stores.io), renamed into place when complete; its name hashes what its numbers depend
# on (attnsweep.plan.blocks). A run store of an earlier version, a directory at the same path, is
# read in place (Snakemake checks the file/directory kind of an output only after it runs it).
#
# A `run:` block rather than `shell:`: Snakemake formats a shell rule's command three times
# per job when it logs the job, dry runs included (~0.5 ms a job, a fifth of a 10^4-job dry
# run); here the command is formatted once, when the job runs. The default profile sets
# `force-use-threads` so that the block runs in Snakemake's own thread pool (cluster jobsteps
# get it anyway); the command still runs in its own process, handed to the warm server of
# worker.smk when one runs. Snakemake's code trigger compares this block's text, so a change
# of PYTHON, DEVICE, BLOCK_MIB or threads reruns no job; the spec is not a param either: the
# store name hashes it.
# mem_mb is a constant, the largest job's estimate (attnsweep.plan.config.check_job_memory), so that
# Snakemake does not evaluate an expression per job; runtime is each job's own time estimate
# (attnsweep.plan.cost, job_runtime), a few microseconds a job, so that SLURM gets a limit that fits.


rule simulate:
    output:
        store=f"{RESULTS}/{{experiment}}/runs/{{job}}.zarr",
    log:
        f"{LOGS}/{{experiment}}/simulate/{{job}}.log",
    threads: SWEEP.config["threads"]
    resources:
        gpu=0,
        mem_mb=SWEEP.job_mib,
        runtime=job_runtime,
    run:
        spec = job_spec(wildcards)
        shell(
            "{PYTHON:q} -m attnsweep.cli job {spec:q} --out {output.store:q}"
            " --device {DEVICE} --threads {threads} --block-mib {BLOCK_MIB} > {log:q} 2>&1"
        )
