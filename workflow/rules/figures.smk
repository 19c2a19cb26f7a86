# One job per figure; each PNG enters `snakemake --report` with its caption.


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
    script:
        "../../scripts/aggregate.py"
