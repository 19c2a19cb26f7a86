# One job = one block of the grid = one zarr v3 store, renamed into place when complete;
# its name hashes what its numbers depend on (attnsweep.blocks).
# A shell job (not `script:`) keeps snakemake's own imports out of the per-job overhead, and
# hands the job to the warm server of worker.smk when one runs.


rule simulate:
    output:
        store=directory(f"{RESULTS}/{{experiment}}/runs/{{job}}.zarr"),
    params:
        spec=job_spec,
    log:
        f"{LOGS}/{{experiment}}/simulate/{{job}}.log",
    threads: SWEEP.config["threads"]
    resources:
        gpu=0,
    shell:
        # Only the spec is a param: a change of interpreter, device or block size reruns no job.
        # They stay {fields}: Snakemake's code trigger compares this template, not its values.
        "{PYTHON:q} -m attnsweep.cli job {params.spec:q} --out {output.store:q}"
        " --device {DEVICE} --threads {threads} --block-mib {BLOCK_MIB} > {log:q} 2>&1"
