"""Planning a sweep: the config validated into each experiment's plan, its grid cut into jobs
(blocks, reused stores, refined points), and each job's time and memory estimated. Light: no
torch, xarray or zarr, since Snakemake plans every run (a dry run, each cluster job)."""
