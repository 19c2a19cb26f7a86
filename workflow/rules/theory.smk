# One job per point of an experiment's theory axes (attnsweep.contract: theory_axes, theory.py): its
# theory, a store like a run store's (one file, renamed into place when whole) whose name hashes
# the theory's options alone, so new seeds or values of the other axes rerun none. reduce reads
# them. On the CPU, one thread: a theory is numpy work. A `run:` block as simulate's (why there).


rule theory:
    output:
        store=f"{RESULTS}/{{experiment}}/theory/{{job}}.zarr",
    log:
        f"{LOGS}/{{experiment}}/theory/{{job}}.log",
    threads: 1
    resources:
        gpu=0,
        runtime=theory_runtime,
    run:
        spec = job_spec(wildcards, THEORY)
        shell(
            "{PYTHON:q} -m attnsweep.cli job {spec:q} --out {output.store:q}"
            " --device cpu --threads 1 --block-mib {BLOCK_MIB} > {log:q} 2>&1"
        )
