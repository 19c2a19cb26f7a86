# Reductions of one experiment's runs: sweep.zarr -> summary.zarr -> boundary.{csv,zarr}.
# reduce and boundary (and figure) are `run:` blocks that call `attnsweep aggregate STEP ARGS`,
# which the warm server of worker.smk runs when one runs (local runs), skipping a fresh
# Python's ~2 s of imports; collect runs `attnsweep collect` in a process of its own, its
# arguments in a file beside its log: its list of run stores can exceed the length of one
# command-line argument.


rule collect:
    input:
        runs=run_paths,
    output:
        sweep=directory(f"{RESULTS}/{{experiment}}/sweep.zarr"),
    log:
        f"{LOGS}/{{experiment}}/collect.log",
    threads: ALL_CORES  # reader processes (attnsweep.aggregate.collect)
    params:
        layout=sweep_layout,
    run:
        arguments = collect_arguments(input.runs, output.sweep, params.layout, threads, log[0])
        shell("{PYTHON:q} -m attnsweep.cli collect {arguments:q} > {log:q} 2>&1")


rule reduce:
    input:
        sweep=rules.collect.output.sweep,
    output:
        summary=directory(f"{RESULTS}/{{experiment}}/summary.zarr"),
    log:
        f"{LOGS}/{{experiment}}/reduce.log",
    run:
        step = json.dumps({"sweep_path": input.sweep, "out": output.summary})
        shell("{PYTHON:q} -m attnsweep.cli aggregate reduce {step:q} > {log:q} 2>&1")


rule boundary:
    input:
        sweep=rules.collect.output.sweep,
        summary=rules.reduce.output.summary,
    output:
        csv=f"{RESULTS}/{{experiment}}/boundary.csv",
        store=directory(f"{RESULTS}/{{experiment}}/boundary.zarr"),
    log:
        f"{LOGS}/{{experiment}}/boundary.log",
    run:
        step = json.dumps(
            {"sweep_path": input.sweep, "summary_path": input.summary, "csv": output.csv, "out": output.store}
        )
        shell("{PYTHON:q} -m attnsweep.cli aggregate boundary {step:q} > {log:q} 2>&1")
