# Helpers shared by the rules: the validated sweep and the path functions built from it.
import gc
import json
import os
import re
import shutil
import sys

from attnsweep.plan.config import load_sweep
from attnsweep.plan.cost import runtime_minutes
from attnsweep.errors import ConfigError
from attnsweep.run.lock import hold as hold_results
from attnsweep.status import damaged_aggregates
from snakemake.exceptions import WorkflowError
from snakemake.logging import logger

try:
    SWEEP = load_sweep(config)
except ConfigError as err:
    # The line names the offending key, before any job is scheduled.
    raise WorkflowError(f"attnsweep: config error: {err}") from None

# The config a healing `attnsweep verify CONFIG --quarantine` names (attnsweep.errors.BadStoreError),
# for the jobs' shells and the warm worker to inherit (set, not read: no `envvars:`). The last
# config file loaded (the command line's, else the default): Snakemake documents no API that
# names them, so this reads workflow.configfiles; without one the message says CONFIG.
if workflow.configfiles:
    os.environ.update(ATTNSWEEP_CONFIG=str(workflow.configfiles[-1]))
PYTHON = sys.executable  # the interpreter running snakemake has attnsweep installed
RESULTS = SWEEP.results
LOGS = SWEEP.logs
DEVICE = SWEEP.config["device"]
BLOCK_MIB = SWEEP.config["block_mib"]
# The report's header (report/workflow.rst) reads snakemake.config: give it the values in use,
# the schema's defaults and each experiment's own dtype included, not only what the file states.
config.setdefault("device", DEVICE)
config.setdefault("dtype", SWEEP.config["dtype"])
for _name, _plan in SWEEP.plans.items():
    config["experiments"][_name].setdefault("dtype", _plan.dtype)


def rebuild_damaged_aggregates():
    """Remove each aggregate that lacks a chunk or an array's metadata (lost at rest), so that
    this run rebuilds it and what is built from it: Snakemake judges an aggregate by its timestamp
    alone, and a lost chunk reads back as NaN. A look at the names of the aggregates' files
    (attnsweep.status.damaged_aggregates: one stat a chunk, no data read, never a run store). The
    aggregates are derived data, made again from the run stores. A dry run removes nothing and
    says what a run would rebuild; its plan cannot show that (Snakemake sets its DAG settings,
    --forcerun among them, only after this file is read), but with the --forcerun it names it does."""
    for path, problem in damaged_aggregates(SWEEP):
        # workflow.output_settings.dryrun: Snakemake has no public API that says, while this file
        # is read, whether the run is a dry one (workflow.dryrun needs the executor, set later).
        if workflow.output_settings.dryrun:
            logger.warning(
                f"attnsweep: {path}: {problem}; a run rebuilds it and what is built from it (this dry "
                f"run removes nothing and its plan leaves them out: `--forcerun {path}` shows them)"
            )
            continue
        try:
            hold_results(RESULTS)  # not while another run uses RESULTS (onstart holds it on)
        except ConfigError as err:
            raise WorkflowError(f"attnsweep: {err}") from None
        try:
            shutil.rmtree(path)
        except OSError as err:  # read-only, or a link: no traceback; the next run tries again
            raise WorkflowError(f"attnsweep: {path}: {problem}; cannot remove it to rebuild it: {err}") from None
        logger.warning(f"attnsweep: {path}: {problem}; removed, to be rebuilt with what is built from it")


# The main snakemake alone, not a cluster job's or a job step's, which parse this file again
# (workflow.is_main_process: Snakemake has no public API for this either).
if workflow.is_main_process:
    rebuild_damaged_aggregates()

# Blocks of each experiment's grid; complete stores already in RESULTS are reused (attnsweep.plan.blocks).
JOBS = {name: plan.jobs(RESULTS) for name, plan in SWEEP.plans.items()}
# The theory jobs of the experiments that declare theory axes (attnsweep.contract): one per point of them.
THEORY = {name: plan.theory_jobs() for name, plan in SWEEP.plans.items()}
FIGURES = {name: plan.experiment.figures(plan.grid, plan.options) for name, plan in SWEEP.plans.items()}
try:  # collect, the one job that runs alone, reads with every core of a local run
    ALL_CORES = workflow.cores
except WorkflowError:  # a cluster run gives no --cores: profiles/slurm sets collect's threads
    ALL_CORES = 1
# The plan lives as long as this process: keep the garbage collector from walking its objects
# again on every full collection while Snakemake builds its own per-job objects (-1 s of 18 s,
# a 10^4-job dry run; benchmarks/RESULTS.md).
gc.freeze()


wildcard_constraints:
    experiment="|".join(SWEEP.plans),
    job=r"([A-Za-z_]\w*~[^/~]+/)+[0-9a-f]{12}|all/[0-9a-f]{12}",
    # the figures the experiments declare: a target naming another is "No rule to produce" it
    figure="|".join(sorted({re.escape(f.name) for figs in FIGURES.values() for f in figs})) or r"(?!)",


def run_paths(wildcards):
    """Every run store of one experiment: the inputs of collect."""
    return [f"{RESULTS}/{wildcards.experiment}/runs/{job}.zarr" for job in JOBS[wildcards.experiment]]


def theory_paths(wildcards):
    """Every theory store of one experiment (none unless it declares theory axes): inputs of reduce."""
    return [f"{RESULTS}/{wildcards.experiment}/theory/{job}.zarr" for job in THEORY[wildcards.experiment]]


def job_spec(wildcards, jobs=JOBS):
    """The identity of one simulate job (of a theory job: jobs=THEORY) as JSON text (the store
    name hashes it, so a change of it is a new store: no params trigger is needed)."""
    return json.dumps(jobs[wildcards.experiment][wildcards.job].identity(), sort_keys=True)


def job_runtime(wildcards, attempt):
    """Snakemake's runtime (minutes) of one simulate job: its estimate (attnsweep.plan.cost) with a
    margin, times the attempt, so that a job killed for time comes back with more."""
    plan = SWEEP.plans[wildcards.experiment]
    return attempt * runtime_minutes(plan.experiment.job_seconds(JOBS[wildcards.experiment][wildcards.job]))


def theory_runtime(wildcards, attempt):
    """Snakemake's runtime (minutes) of one theory job, as job_runtime's."""
    plan = SWEEP.plans[wildcards.experiment]
    return attempt * runtime_minutes(plan.experiment.theory_seconds(THEORY[wildcards.experiment][wildcards.job]))


def sweep_layout(wildcards):
    """The grid of one experiment and, refined, the rectangles it holds, as JSON text: collect
    keeps exactly these values."""
    return json.dumps(SWEEP.plans[wildcards.experiment].layout(), sort_keys=True)


def write_collect_arguments(path, runs, sweep, layout, threads):
    """The keyword arguments of attnsweep.reduce.aggregate.collect, as a JSON file (collect's second log)."""
    with open(path, "w") as fh:
        json.dump({"runs": list(runs), "out": sweep, "workers": threads, **json.loads(layout)}, fh)


def boundary_options(wildcards):
    """The experiment's boundary options (Experiment.boundary_options): the boundary step's
    argument `options`, and a param of the boundary rule of its own. Snakemake records and
    compares only params not derived from input or output paths (`step` is), so this one is
    what reruns the boundary and the figures, and no job, when one of them changes."""
    plan = SWEEP.plans[wildcards.experiment]
    return plan.experiment.boundary_options(plan.options)


def step_arguments(**paths):
    """The arguments of `attnsweep aggregate STEP` as JSON text: a step's paths and parameters."""
    return json.dumps(paths, sort_keys=True)


def figure_caption(wildcards):
    """The figure's caption as reStructuredText for the report: plain text, so every character
    that starts inline markup (|x| a substitution, *x* emphasis, x_ a reference) is escaped."""
    specs = {f.name: f.caption for f in FIGURES[wildcards.experiment]}
    return re.sub(r"([\\`*|_])", r"\\\1", specs[wildcards.figure])


def figure_spec(wildcards):
    """The figure's function and parameters (in the figure's params: a change of either redraws it)."""
    spec = {f.name: f for f in FIGURES[wildcards.experiment]}[wildcards.figure]
    return {"draw": spec.draw, "params": spec.params}


def final_outputs():
    """Every aggregate, boundary and figure of every configured experiment. The aggregates are
    targets of their own: Snakemake reruns no job for an input that is gone while its outputs
    stand (how temp() works), so with the figures alone a sweep.zarr removed after a failed
    collect would stay missing behind the older summary, boundary and figures; as a target it
    is rebuilt, and everything built from it after it."""
    outputs = []
    for name in SWEEP.plans:
        outputs += [f"{RESULTS}/{name}/{store}" for store in ("sweep.zarr", "summary.zarr", "boundary.zarr")]
        outputs += [f"{RESULTS}/{name}/boundary.csv"]
        for fig in FIGURES[name]:
            outputs += [f"{RESULTS}/{name}/figures/{fig.name}.{ext}" for ext in ("png", "pdf")]
    return outputs
