# One job = one block of the grid = one zarr v3 store, renamed into place when complete.
# A shell job (not `script:`) keeps snakemake's own imports out of the per-job overhead, and
# hands the job to the warm server of worker.smk when one runs.


rule simulate:
    output:
        store=directory(f"{RESULTS}/{{experiment}}/runs/{{point}}.zarr"),
    params:
        spec=job_spec,
        device=SWEEP.config["device"],
    log:
        f"{LOGS}/{{experiment}}/simulate/{{point}}.log",
    benchmark:
        f"{RESULTS}/{{experiment}}/benchmarks/simulate/{{point}}.tsv"
    threads: SWEEP.config["threads"]
    resources:
        gpu=0,
    shell:
        # PYTHON is not a param: a param would rerun every job when the interpreter path changes.
        "{PYTHON:q} -m attnsweep.cli job {params.spec:q} --out {output.store:q}"
        " --device {params.device} --threads {threads} > {log:q} 2>&1"
