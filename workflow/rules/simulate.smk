# One job = one block of the grid = one zarr v3 store, renamed into place when complete.


rule simulate:
    output:
        store=directory(f"{RESULTS}/{{experiment}}/runs/{{point}}.zarr"),
    params:
        job=job_spec,
        device=SWEEP.config["device"],
    log:
        f"{LOGS}/{{experiment}}/simulate/{{point}}.log",
    benchmark:
        f"{RESULTS}/{{experiment}}/benchmarks/simulate/{{point}}.tsv"
    threads: SWEEP.config["threads"]
    resources:
        gpu=0,
    script:
        "../../scripts/simulate.py"
