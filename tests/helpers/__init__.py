"""What the tests share: running commands and ending what they start (processes), driving
snakemake in a temp dir (workflow_runs), the repository and its documented recipes (project),
figures and stores read back (figcheck, output_contract), and ALBERT checkpoints known in closed
form (albert_checkpoint). No test module imports another, or conftest."""
