"""``attnsweep refine``: the workflow run round by round until every boundary is precise.

Each round runs Snakemake up to the boundaries of the experiments with a ``refine`` section,
lets :func:`attnsweep.refine.rules.assess` decide the next round's points, records them
(:mod:`attnsweep.plan.refinement`), and runs again; when no experiment adds a round, one last run
makes every output (figures). Stopped by SIGINT (Ctrl-C), it lets Snakemake end its jobs and
says so in one line; run again, it goes on from the stores and the record.
"""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
from pathlib import Path

from attnsweep.errors import ConfigError
from attnsweep.plan.config import load_sweep, load_yaml
from attnsweep.plan.refinement import load_record, save_record
from attnsweep.refine.rules import assess
from attnsweep.run.lock import claim


def drive(config_path: str, snakemake_args: list[str]) -> int:
    """``attnsweep refine``: run the workflow, assess, record a round, until no experiment adds
    one; then run the workflow once more for every output (figures). Returns Snakemake's status."""
    log = logging.getLogger("attnsweep.refine.rules")
    refuse_directory_and_configfile(snakemake_args, "attnsweep refine")
    config = load_yaml(config_path)

    def snakemake(targets: list[str]) -> int:
        base = [sys.executable, "-m", "snakemake", *snakemake_args, "--configfile", config_path]
        if any(Path(".snakemake", "locks").glob("*")):
            clear_stale_lock(config.get("results", "results"), base)
        command = [sys.executable, "-m", "snakemake", *targets, *snakemake_args, "--configfile", config_path]
        log.info("running %s", " ".join(command))
        return run_to_its_end(command)

    while True:
        sweep = load_sweep(config)
        plans = {name: plan for name, plan in sweep.plans.items() if plan.refine is not None}
        if not plans:
            raise ConfigError(config_path, "no experiment has a refine section")
        status = snakemake([f"{sweep.results}/{name}/boundary.zarr" for name in plans])
        if status:
            return status
        added = False
        for name, plan in plans.items():
            record = assess(plan, sweep.results, load_record(sweep.results, name))
            save_record(sweep.results, name, record)
            if "final" in record:
                log.info("%s: %s after %d rounds", name, record["final"]["reason"], len(record["rounds"]))
            else:
                last = record["rounds"][-1]
                log.info("%s: round %d adds %d points (%.3g core-hours)", name, last["round"],
                         last["new_points"], last["core_hours"])
                added = True
        if not added:
            return snakemake([])


def refuse_directory_and_configfile(snakemake_args: list[str], command: str) -> None:
    """A ConfigError for Snakemake options that would run it elsewhere or on another config than
    ``command`` reads the results of."""
    for arg in snakemake_args:
        if arg in ("-d", "--directory") or arg.startswith("--directory="):
            raise ConfigError(arg, f"{command} runs Snakemake in the current directory (where it "
                                   "reads the results): cd there instead of passing --directory")
        if arg == "--configfile" or arg.startswith("--configfile="):
            raise ConfigError(arg, f"the config is {command}'s first argument")


#: Seconds an interrupted refinement waits for Snakemake to end on its own before passing SIGINT
#: on. Ctrl-C and ``timeout -s INT`` signal the whole process group, Snakemake included, and it
#: ends its local jobs within about a second; a SIGINT sent to ``attnsweep refine`` alone (``kill
#: -INT PID``) has not reached it, and a second one mid-cleanup would cut that short.
SIGINT_GRACE_S = 5.0


def run_to_its_end(command: list[str]) -> int:
    """``command``'s exit status. On SIGINT, unlike :func:`subprocess.run` (which SIGKILLs the
    child 0.25 s after), Snakemake is given the time to end its jobs and release its lock, then
    the interrupt goes on (:data:`attnsweep.errors.INTERRUPTED`); a second SIGINT kills it."""
    process = subprocess.Popen(command)
    try:
        return process.wait()
    except KeyboardInterrupt:
        try:
            try:
                process.wait(SIGINT_GRACE_S)
            except subprocess.TimeoutExpired:
                process.send_signal(signal.SIGINT)
                process.wait()
        except KeyboardInterrupt:
            process.kill()
            process.wait()
        raise


def clear_stale_lock(results: str, snakemake: list[str]) -> None:
    """Unlock the working directory after a killed run: Snakemake's lock outlives kill -9, the
    results lock (:mod:`attnsweep.run.lock`, a kernel ``flock``) does not, so when nothing holds the
    latter no run of these results is alive and the former is stale."""
    claim(results).close()  # refused, naming the holder, while a run of these results is alive
    logging.getLogger("attnsweep.refine.rules").info("removing the stale Snakemake lock of a killed run")
    subprocess.run([*snakemake, "--unlock"], check=True, capture_output=True)
