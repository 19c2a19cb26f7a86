# Reductions of one experiment's runs: sweep.zarr -> summary.zarr -> boundary.{csv,zarr}.


rule collect:
    input:
        runs=run_paths,
    output:
        sweep=directory(f"{RESULTS}/{{experiment}}/sweep.zarr"),
    params:
        grid=sweep_grid,
    log:
        f"{LOGS}/{{experiment}}/collect.log",
    threads: ALL_CORES  # reader processes (attnsweep.aggregate.collect)
    script:
        "../../scripts/aggregate.py"


rule reduce:
    input:
        sweep=rules.collect.output.sweep,
    output:
        summary=directory(f"{RESULTS}/{{experiment}}/summary.zarr"),
    log:
        f"{LOGS}/{{experiment}}/reduce.log",
    script:
        "../../scripts/aggregate.py"


rule boundary:
    input:
        sweep=rules.collect.output.sweep,
        summary=rules.reduce.output.summary,
    output:
        csv=f"{RESULTS}/{{experiment}}/boundary.csv",
        store=directory(f"{RESULTS}/{{experiment}}/boundary.zarr"),
    log:
        f"{LOGS}/{{experiment}}/boundary.log",
    script:
        "../../scripts/aggregate.py"
