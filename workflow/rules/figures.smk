# One job per figure; each PNG enters `snakemake --report` with its caption. Like reduce and
# boundary (aggregate.smk), a `run:` block whose command the warm server runs (local runs).


rule figure:
    input:
        summary=rules.reduce.output.summary,
        boundary=rules.boundary.output.store,
    output:
        png=report(
            f"{RESULTS}/{{experiment}}/figures/{{figure}}.png",
            caption="../report/figure.rst",
            category="{experiment}",
            labels={"figure": "{figure}"},
        ),
        pdf=f"{RESULTS}/{{experiment}}/figures/{{figure}}.pdf",
    log:
        f"{LOGS}/{{experiment}}/figures/{{figure}}.log",
    params:
        caption=figure_caption,
        step=lambda wildcards, input, output: step_arguments(
            **figure_spec(wildcards),
            summary_path=input.summary,
            boundary_path=input.boundary,
            png=output.png,
            pdf=output.pdf,
        ),
    run:
        shell("{PYTHON:q} -m attnsweep.cli aggregate figure {params.step:q} > {log:q} 2>&1")
