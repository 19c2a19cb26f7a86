# One job per figure; each PNG enters `snakemake --report` with its caption. Like simulate, a
# `run:` block whose command the warm server of worker.smk runs when one runs (local runs): a
# figure then costs its drawing, not a fresh Python's imports of matplotlib, xarray and dask.


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
    params:
        caption=figure_caption,
    log:
        f"{LOGS}/{{experiment}}/figures/{{figure}}.log",
    run:
        shell(
            "{PYTHON:q} -m attnsweep.cli figure {wildcards.figure:q} --summary {input.summary:q}"
            " --boundary {input.boundary:q} --png {output.png:q} --pdf {output.pdf:q} > {log:q} 2>&1"
        )
