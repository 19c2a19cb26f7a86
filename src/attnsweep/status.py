"""Where a sweep stands, read from its results tree (``attnsweep status CONFIG``).

Each simulate job (and each theory job, :attr:`attnsweep.contract.Experiment.theory_axes`) is in
one of six states:

- ``done``: its store is complete (stores are renamed into place only when whole);
- ``bad``: its store is there but damaged or another job's, as far as a look at its size, its
  zip directory and its root ``zarr.json`` tells (:func:`attnsweep.stores.probe.quick_problem`;
  ``attnsweep verify`` reads every byte);
- ``running``: its marker ``.NAME.zarr.running`` names a live process on this host, or a
  process on another host (a cluster node), which cannot be checked from here;
- ``interrupted``: the marker names a dead process on this host (killed: kill -9, OOM, node loss),
  its log exists but is empty (killed as it started; the job client writes the marker at
  once, so a live job shows so for a few milliseconds at most), or its log says it was stopped
  by SIGINT (Ctrl-C, ``timeout -s INT``: :data:`attnsweep.errors.INTERRUPTED`);
- ``failed``: it has a log but no store and no marker (the job ended with an error; the last
  log line says which);
- ``pending``: nothing yet.

A rerun of the workflow redoes exactly the jobs that are not ``done`` or ``bad`` (a bad
store stands until ``attnsweep verify CONFIG --quarantine`` moves it aside). The aggregates are
not done where one is missing while its run stores are all done, older than what it is built
from (as Snakemake compares them; a directory output by its ``.snakemake_timestamp``), or lacks
a chunk or an array's metadata (:func:`damaged_aggregates`: the next run rebuilds it).
"""

from __future__ import annotations

import json
import math
import os
import socket
import time
from collections import defaultdict
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from attnsweep.errors import INTERRUPTED
from attnsweep.grid import format_value
from attnsweep.plan.refinement import load_record, seeds_for
from attnsweep.stores.marker import marker_path
from attnsweep.stores.probe import AGGREGATES, complete, missing_part, quick_problem

if TYPE_CHECKING:
    from attnsweep.jobspec import JobSpec
    from attnsweep.plan.config import Sweep
    from attnsweep.plan.experiment_plan import Plan

STATES = ("done", "running", "interrupted", "failed", "pending", "bad")


@dataclass(frozen=True)
class JobStatus:
    point: str
    state: str
    detail: str = ""
    block: str = ""  # the batched values of the job, e.g. "rho 0.8 | gamma 3 values in [1, 4]"


def block_text(spec: JobSpec, point: str) -> str:
    """The values of the axes a job batches (those not in its path ``point``)."""
    fanned = {part.split("~")[0] for part in point.split("/")[:-1]}
    parts = []
    for axis, values in {**spec.grid, "seed": spec.seeds}.items():
        if axis in fanned:
            continue
        text = [format_value(v) for v in values]
        shown = ", ".join(text) if len(text) <= 3 else f"{len(text)} values in [{text[0]}, {text[-1]}]"
        parts.append(f"{axis} {shown}")
    return " | ".join(parts)


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs on this host; a zombie (killed, not yet reaped) does not."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:  # a container whose init does not reap keeps killed jobs as zombies
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:  # gone meanwhile, or no /proc at all (macOS: trust the signal)
        return not Path("/proc/self/stat").exists()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1].rsplit("\r", 1)[-1][:200] if lines else "(empty log)"


def job_status(point: str, store: Path, log: Path, spec: JobSpec | None = None) -> JobStatus:
    """The state of one simulate job (of ``spec``, if given: then its store is looked at too)
    from its store, marker and log."""
    if complete(store):
        problem = quick_problem(store, spec) if spec is not None else None
        return JobStatus(point, "bad", problem) if problem else JobStatus(point, "done")
    marker = marker_path(store)
    if marker.is_file():
        try:
            info = json.loads(marker.read_text())
        except (OSError, ValueError):  # being written this instant
            return JobStatus(point, "running")
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(info["started"]))
        where = f"pid {info['pid']} on {info['host']}, since {since}"
        if info["host"] != socket.gethostname():
            return JobStatus(point, "running", f"{where} (another host: not checked)")
        return JobStatus(point, "running" if _alive(info["pid"]) else "interrupted", where)
    if log.is_file():
        text = log.read_text(errors="replace")
        if not text.strip():
            # The shell made the log, the job wrote nothing and left no marker: it was killed
            # before it began (a job that fails always says why).
            return JobStatus(point, "interrupted", "killed before it started (empty log)")
        if INTERRUPTED in text:
            return JobStatus(point, "interrupted", "stopped by SIGINT (Ctrl-C)")
        return JobStatus(point, "failed", _last_line(text))
    return JobStatus(point, "pending")


def sweep_status(sweep: Sweep) -> dict[str, list[JobStatus]]:
    """Every simulate job of every experiment, in plan order."""
    return {
        name: [
            replace(job_status(job, Path(sweep.results, name, "runs", f"{job}.zarr"),
                               Path(sweep.logs, name, "simulate", f"{job}.log"), spec), block=block_text(spec, job))
            for job, spec in plan.jobs(sweep.results).items()
        ]
        for name, plan in sweep.plans.items()
    }


def theory_status(sweep: Sweep, name: str) -> list[JobStatus]:
    """Every theory job of experiment ``name`` (none unless it declares theory axes), in the
    states of a simulate job, its point named ``theory/...``."""
    return [
        job_status(f"theory/{job}", Path(sweep.results, name, "theory", f"{job}.zarr"),
                   Path(sweep.logs, name, "theory", f"{job}.log"), spec)
        for job, spec in sweep.plans[name].theory_jobs().items()
    ]


def damaged_aggregates(sweep: Sweep) -> list[tuple[Path, str]]:
    """Each aggregate of ``sweep`` that lacks a chunk (shard) or an array's metadata, with what it
    lacks (:func:`attnsweep.stores.probe.missing_part`: names only, no data read; only the aggregates,
    never a run store). Snakemake judges an aggregate by its timestamp alone, and a lost chunk reads
    back as its fill value (NaN): the workflow removes these at the start of a run, to rebuild them
    and what is built from them (``rules/common.smk``)."""
    found = []
    for name in sweep.plans:
        for store in AGGREGATES:
            path = Path(sweep.results, name, store)
            problem = missing_part(path) if path.is_dir() else None
            if problem is not None:
                found.append((path, problem))
    return found


def _mtime(path: Path) -> float | None:
    """When Snakemake takes ``path`` to have been made (None if absent)."""
    stamp = path / ".snakemake_timestamp"
    try:
        return (stamp if stamp.is_file() else path).stat().st_mtime
    except OSError:
        return None


def aggregate_lines(sweep: Sweep, name: str, jobs: list[JobStatus]) -> list[str]:
    """Why the aggregates of experiment ``name`` are not done, once any of them was made: one
    missing while every run store is there (a reduction that failed), one older than what it
    is built from, or one that lacks a chunk (:func:`damaged_aggregates`)."""
    root = Path(sweep.results, name)
    built = {"sweep.zarr": (), "summary.zarr": ("sweep.zarr",), "boundary.zarr": ("sweep.zarr", "summary.zarr"),
             "boundary.csv": ("sweep.zarr", "summary.zarr")}
    times = {out: _mtime(root / out) for out in built}
    # The figures drawn (the experiment's list of figures would import matplotlib: +0.5 s).
    figures = [_mtime(path) for path in (root / "figures").glob("*") if path.suffix in (".png", ".pdf")]
    if all(t is None for t in (*times.values(), *figures)):
        return []  # not reduced yet
    runs = [_mtime(root / "runs" / f"{job.point}.zarr") for job in jobs if job.state in ("done", "bad")]
    lines = []
    for out, inputs in built.items():
        if times[out] is None:
            if len(runs) == len(jobs):
                lines.append(f"  not done: {out} is missing (a reduction that failed?); `snakemake` makes it")
            continue
        newer = [i for i in inputs if (times[i] or 0) > times[out]]
        if not inputs and runs and max(runs) > times[out]:
            newer = ["a run store"]
        if newer:
            lines.append(f"  not done: {out} is older than {' and '.join(newer)}; `snakemake` makes it again")
    for out in AGGREGATES:
        problem = missing_part(root / out) if times[out] is not None and (root / out).is_dir() else None
        if problem is not None:
            lines.append(f"  not done: {out}: {problem}; `snakemake` rebuilds it and what is built from it")
    inputs = max(times["summary.zarr"] or 0, times["boundary.zarr"] or 0)
    older = sum(t is not None and t < inputs for t in figures)
    if older:
        lines.append(f"  not done: {older} figure files are older than summary.zarr or boundary.zarr; "
                     "`snakemake` draws them again")
    return lines


def report(sweep: Sweep, show: tuple[str, ...] = ("running", "interrupted", "failed", "bad")) -> str:
    """A summary per experiment, then one line per job in the states of ``show``."""
    lines = []
    for name, jobs in sweep_status(sweep).items():
        counts = {state: sum(job.state == state for job in jobs) for state in STATES}
        lines.append(f"{name}: {len(jobs)} jobs: " + ", ".join(f"{counts[s]} {s}" for s in STATES
                                                              if s != "bad" or counts[s]))
        outputs = ["sweep.zarr", "summary.zarr", "boundary.csv"]
        have = [out for out in outputs if Path(sweep.results, name, out).exists()]
        figures = list(Path(sweep.results, name, "figures").glob("*.png"))
        theory = theory_status(sweep, name)
        if theory:
            done = {state: sum(job.state == state for job in theory) for state in STATES}
            lines.append(f"  theory: {len(theory)} jobs: " + ", ".join(f"{done[s]} {s}" for s in STATES if done[s]))
        lines.append(f"  aggregates: {', '.join(have) or 'none yet'}; {len(figures)} figures")
        lines += aggregate_lines(sweep, name, jobs)
        if counts["bad"]:
            lines.append(f"  {counts['bad']} bad stores: `attnsweep verify CONFIG --quarantine`, then `snakemake`")
        if sweep.plans[name].refine is not None:
            lines += refinement_lines(sweep.plans[name], sweep.results)
        lines += [f"  {job.state:<11} {job.point} [{job.block}]  {job.detail}".rstrip()
                  for job in jobs if job.state in show]
        lines += [f"  {job.state:<11} {job.point}  {job.detail}".rstrip() for job in theory if job.state in show]
    return "\n".join(lines)


def refinement_lines(plan: Plan, results: str | Path) -> list[str]:
    """Status lines of a refined experiment: its rounds, and per row of its latest assessment
    the interval's half-width against the precision."""
    record = load_record(results, plan.name)
    lines = [f"  refinement: {len(record['rounds'])} rounds recorded (at most {plan.refine.rounds}), "
             f"precision {format_value(plan.refine.precision)}{' relative' if plan.refine.relative else ''}"]
    for r in record["rounds"]:
        counts = defaultdict(int)
        for d in r["assessment"]:
            counts[d["action"]] += 1
        acts = ", ".join(f"{n} {a}" for a, n in sorted(counts.items()))
        lines.append(f"  round {r['round']}: {r['new_points']} new points, about {r['core_hours']:.3g} "
                     f"core-hours ({acts})")
    latest = record.get("final") or (record["rounds"][-1] if record["rounds"] else None)
    if latest is None:
        return [*lines, "  no round assessed yet: run attnsweep refine"]
    if "reason" in latest:
        lines.append(f"  stopped: {latest['reason']}")
    else:
        lines.append(f"  round {latest['round']} is decided; its points run on the next attnsweep refine")
    cap = plan.refine.max_seeds
    short = []  # (seeds needed, half-width over the precision at max_seeds) of rows max_seeds stops
    for d in latest["assessment"]:
        if d["estimate"] == "":
            continue
        half = (d["high"] - d["low"]) / 2 if d["low"] != "" and d["high"] != "" else math.inf
        line = (f"    {d['boundary']} {d['row']}: {format_value(d['estimate'])} "
                f"[{d['low']}, {d['high']}] half-width {half:.3g} vs {d['wanted']}: {d['action']}")
        held = d.get("seeds")  # absent from records of earlier versions
        if held and math.isfinite(half) and half > d["wanted"] > 0:
            need = seeds_for(held, half, d["wanted"])
            line += f"; {held} seeds, about {need} for the precision"
            if need > cap:
                ratio = half * math.sqrt(held / cap) / d["wanted"]
                short.append((need, ratio))
                line += f" (at max_seeds {cap}: {ratio:.2g} times it)"
        lines.append(line)
    if short:
        needs, ratios = zip(*short)
        ends = sorted({f"{min(ratios):.2g}", f"{max(ratios):.2g}"}, key=float)
        lines.append(f"  by the 1/sqrt(seeds) law, rows needing more than max_seeds = {cap}: {len(short)} (up to "
                     f"{max(needs)} seeds), ending at {'-'.join(ends)} times the precision")
    return lines
