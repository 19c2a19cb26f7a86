# Reductions of one experiment's runs: sweep.zarr -> summary.zarr -> boundary.{csv,zarr}.
# reduce and boundary (and figure) call `attnsweep aggregate STEP ARGS`, ARGS their params: the
# step's paths as JSON. The warm server of worker.smk runs them when one runs (local runs),
# skipping a fresh Python's ~2 s of imports. collect runs `attnsweep collect ARGUMENTS`, which
# goes the same way, ARGUMENTS a JSON file it writes as its second log: its list of run stores
# can exceed the length of a command line.
#
# `run:` blocks calling shell(), not `shell:` or `script:`: Snakemake's linter asks every shell
# or script rule for a conda environment or container, which would have to install attnsweep
# itself (no release on a package index); the rules run in Snakemake's own environment, which
# has it. A run block is exempt, and its params are recorded and compared as a shell rule's.


rule collect:
    input:
        runs=run_paths,
    output:
        sweep=directory(f"{RESULTS}/{{experiment}}/sweep.zarr"),
    log:
        main=f"{LOGS}/{{experiment}}/collect.log",
        arguments=f"{LOGS}/{{experiment}}/collect.json",
    threads: ALL_CORES  # reader processes (attnsweep.reduce.aggregate.collect)
    params:
        layout=sweep_layout,
    run:
        write_collect_arguments(log.arguments, input.runs, output.sweep, params.layout, threads)
        shell("{PYTHON:q} -m attnsweep.cli collect {log.arguments:q} > {log.main:q} 2>&1")


rule reduce:
    input:
        sweep=rules.collect.output.sweep,
        theory=theory_paths,
    output:
        summary=directory(f"{RESULTS}/{{experiment}}/summary.zarr"),
    log:
        f"{LOGS}/{{experiment}}/reduce.log",
    params:
        step=lambda wildcards, input, output: step_arguments(
            sweep_path=input.sweep, theory=list(input.theory), out=output.summary
        ),
    run:
        shell("{PYTHON:q} -m attnsweep.cli aggregate reduce {params.step:q} > {log:q} 2>&1")


rule boundary:
    input:
        sweep=rules.collect.output.sweep,
        summary=rules.reduce.output.summary,
    output:
        csv=f"{RESULTS}/{{experiment}}/boundary.csv",
        store=directory(f"{RESULTS}/{{experiment}}/boundary.zarr"),
    log:
        f"{LOGS}/{{experiment}}/boundary.log",
    params:
        step=lambda wildcards, input, output: step_arguments(
            sweep_path=input.sweep,
            summary_path=input.summary,
            csv=output.csv,
            out=output.store,
            options=boundary_options(wildcards),
        ),
        options=boundary_options,
    run:
        shell("{PYTHON:q} -m attnsweep.cli aggregate boundary {params.step:q} > {log:q} 2>&1")
