"""A real SLURM cluster on 127.0.0.1: the sweep through `profiles/slurm` equals a local run.

The module starts munge + slurmctld + slurmd with scripts/slurm-local-start.sh (root only; it
installs the Debian packages when they are missing) and stops them by PID at the end. The node
advertises 2 GPUs (gres files that are /dev/null twins) and 64 GB, so the profile runs as a user
would run it: simulate asks `--gpus=1` and `8000 * attempt` MB. The only command-line additions
are what a cluster without accounting needs (`--slurm-status-command squeue`), an earlier first
poll and kept SLURM logs. The partition is the cluster's default (`debug`), as the profile's empty
`slurm_partition` asks: a `--default-resources` on the command line would replace the profile's
whole list (mem_mb and runtime with it). To keep the module short, its SLURM sweeps and the sweep
with a cancelled job run at once; the local reference of each is the tiny run the other suites
share (conftest.tiny_run). Each experiment's tiny config is tests/tiny_configs/<experiment>.yaml.

The cancelled job: a failed job must cost its own work and nobody else's. With SLURM arrays
(plugin 2.8.0, jobstep 0.6.1; issue 447), every task of an array ran under a Snakemake that
targeted the array's first job, and a cancelled later task deleted the first task's finished
store, which then ran again: the profile keeps arrays off (profiles/README.md). The test makes
the order that exposes this every time, not by chance: it stops one simulate job's command
(SIGSTOP; never the first task of an array, under the opt-in `--slurm-array-jobs simulate`),
waits until every other simulate job of the sweep has COMPLETED with its store written, and only
then cancels the stopped job; every other store must keep its inode and mtime, and every other
job must have run once.

A SLURM sweep runs for one experiment, not every one: the profile, the group job and the time
limits are the same rules for all, and a SLURM job costs some 10-20 s of CPU (the plugin's jobstep
runs Snakemake within Snakemake, once for each rule of a group job), a third of the suite's 2 cores
when every experiment had a sweep. What differs between experiments on a node is that the job runs
in a fresh process; test_worker checks that for every experiment, and test_cpu_paths that a fresh
process takes the CPU paths any other does (sphere_clustering once differed on SLURM in its last
digits for that reason, when it had a sweep here). critical_scaling is the card's experiment, and
the cancelled and refined sweeps'.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import psutil
import pytest
import xarray as xr
from helpers import processes
from helpers.project import CONFIGS, refine_command

from attnsweep.plan.config import load_sweep, load_yaml
from attnsweep.plan.cost import runtime_minutes
from attnsweep.stores.io import open_store

REPO = Path(__file__).resolve().parents[2]
SNAKEFILE = REPO / "Snakefile"
PROFILE = REPO / "profiles" / "slurm"
START, STOP = REPO / "scripts" / "slurm-local-start.sh", REPO / "scripts" / "slurm-local-stop.sh"
SWEPT = ("critical_scaling",)  # the experiments with a SLURM sweep (above: why)
RETRIED = "critical_scaling"  # the sweep in which one running simulate task is cancelled
PORTS = (6817, 6818)  # the start script's defaults
# A hang guard on the module's sweeps, not a time they must meet: the module took 8:16 alone on a
# 2-core Zen 3 (before the changes of issue 31), 3:26 here beside three other busy processes; 30
# minutes is over three times the slowest, reached only by a hang.
HANG_S = 1800.0
DAEMONS = ("slurmctld", "slurmd", "munged")
#: Job processes that SLURM no longer counts as part of their job; the stop script must end them.
STRAYS: list[psutil.Process] = []
# Dataset attrs that describe where and how long a job ran, not what it computed.
PROVENANCE = re.compile(r"hostname|git_commit|wall_time|rss|elapsed")
SLURM_ARGS = [
    "--slurm-status-command", "squeue",  # no accounting here: sacct would hang the run
    # The first poll 1 s after a submission (default 40; each poll that finds nothing finished adds
    # 10 s): the refinement submits 7 times, each after the last has finished.
    "--slurm-init-seconds-before-status-checks", "1",
    "--slurm-keep-successful-logs",
]
# The venv must be on PATH inside the jobs (sbatch --export=ALL), which run `python -m snakemake`.
ENV = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
ENV.pop("SLURM_CONF", None)

pytestmark = [pytest.mark.slurm, pytest.mark.slow]


def skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root to run slurmctld/slurmd and write /etc/slurm/slurm.conf"
    if importlib.util.find_spec("snakemake_executor_plugin_slurm") is None:
        return "snakemake-executor-plugin-slurm is not installed (pip install -e .[slurm])"
    binaries = ("slurmctld", "slurmd", "munged", "sbatch")
    if not all(shutil.which(b) for b in binaries) and not shutil.which("apt-get"):
        return "SLURM binaries are missing and apt-get is not available to install them"
    import socket

    for port in PORTS:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return f"port {port} is in use (a SLURM cluster already runs on this machine)"
    return None


def daemon_pids(state: Path) -> dict[str, int]:
    pids = {}
    for name in DAEMONS:
        pidfile = state / "run" / f"{name}.pid"
        if pidfile.exists():
            pids[name] = int(pidfile.read_text().split()[0])
    return pids


def running(pid: int, name: str) -> bool:
    """A live process `name` (a zombie waiting for PID 1 to reap it counts as stopped)."""
    try:
        comm = Path(f"/proc/{pid}/comm").read_text().strip()
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return comm == name and state != "Z"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    state = tmp_path_factory.mktemp("slurm-state")
    # 4 CPUs and 2 GPUs advertised (on 2 cores): both sweeps below queue their jobs at once.
    env = {**ENV, "LOCAL_SLURM_CPUS": "4", "LOCAL_SLURM_GPUS": "2", "LOCAL_SLURM_MEM_MB": "64000"}
    started = subprocess.run([START, str(state)], env=env, capture_output=True, text=True, timeout=600)
    pids = daemon_pids(state)
    try:
        if started.returncode != 0:
            if "apt-get install failed" in started.stderr:
                pytest.skip(f"SLURM could not be installed: {started.stderr.strip()[-500:]}")
            pytest.fail(f"slurm-local-start.sh failed:\n{started.stdout}{started.stderr}")
        assert {"slurmctld", "slurmd"} <= set(pids), pids
        yield state
    finally:
        stopped = subprocess.run([STOP, str(state)], env=ENV, capture_output=True, text=True, timeout=120)
        assert stopped.returncode == 0, stopped.stderr
        deadline = time.monotonic() + 15
        while any(running(pid, name) for name, pid in pids.items()) and time.monotonic() < deadline:
            time.sleep(0.2)
        left = {name: pid for name, pid in pids.items() if running(pid, name)}
        assert not left, f"daemons still running after slurm-local-stop.sh: {left}"
        # The stop script also ends the job processes SLURM lost (test_a_job_process_slurm_loses_...);
        # it waits for them (TERM, then KILL after 10 s) before it returns.
        lost = [p.pid for p in STRAYS if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
        assert not lost, f"job processes still running after slurm-local-stop.sh: {lost}"
        assert not Path("/etc/slurm/slurm.conf").is_symlink(), "/etc/slurm/slurm.conf not restored"


def tiny_config(experiment: str) -> Path:
    path = CONFIGS / f"{experiment}.yaml"
    if not path.exists():
        pytest.fail(f"experiment {experiment!r} has no tiny SLURM config: add {path.relative_to(REPO)}")
    return path


def snakemake(workdir: Path, experiment: str, *args: str, slurm: bool) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "snakemake", "-s", str(SNAKEFILE), "-d", str(workdir),
           "--configfile", str(tiny_config(experiment))]
    if slurm:
        cmd += ["--workflow-profile", str(PROFILE), *SLURM_ARGS]
    else:
        cmd += ["--cores", "2"]  # the default profile, warm worker included
    workdir.mkdir(parents=True, exist_ok=True)
    with open(workdir / "snakemake.out", "w") as log:
        return processes.start([*cmd, *args], cwd=workdir, env=ENV, stdout=log, stderr=subprocess.STDOUT)


def finish(proc: subprocess.Popen, workdir: Path, deadline: float) -> str:
    try:
        proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        processes.end(proc)
    text = (workdir / "snakemake.out").read_text()
    assert proc.returncode == 0, f"snakemake in {workdir}: rc {proc.returncode}:\n{text[-4000:]}"
    return text


def slurm_history(workdir: Path) -> list[dict[str, str]]:
    """The jobs slurmctld still knows (MinJobAge=3600 s) that ran in `workdir` (one per task of an array)."""
    out = subprocess.run(["scontrol", "-o", "show", "job"], capture_output=True, text=True, timeout=30).stdout
    jobs = [dict(re.findall(r"(\w+)=(\S*)", line)) for line in out.splitlines() if line.startswith("JobId=")]
    for job in jobs:  # the id the plugin and squeue use: <array job>_<task> for array tasks
        job["id"] = f"{job['ArrayJobId']}_{job['ArrayTaskId']}" if "ArrayTaskId" in job else job["JobId"]
    return [j for j in jobs if Path(j.get("WorkDir", "/")) == workdir]


def planned_stores(experiment: str) -> set[Path]:
    """The run stores (relative to a run's directory) that the tiny config's simulate jobs write."""
    plan = load_sweep(load_yaml(tiny_config(experiment))).plans[experiment]
    return {Path("results") / experiment / "runs" / f"{job}.zarr" for job in plan.jobs()}


def comment(experiment: str, store: Path) -> str:
    """The SLURM comment the plugin gives the simulate job (not an array task) that writes ``store``."""
    job = store.relative_to(Path("results") / experiment / "runs").with_suffix("").as_posix()
    return f"rule_simulate_wildcards_{experiment}_{job}".replace("/", "_")


def stop_one_job_command(workdir: Path, sweep: subprocess.Popen) -> tuple[str, Path] | None:
    """SIGSTOP the command (``python -m attnsweep.cli job ... --out STORE``) of one simulate job of
    ``workdir`` before it has written its store, never the first task of an array; its SLURM id and
    store. The job stays RUNNING for SLURM and its Snakemake waits for it, as for a slow job. None
    when the sweep ended first. (Root, as the module is: /proc of another user's job is readable.)"""
    while sweep.poll() is None:
        for proc in psutil.process_iter(["cmdline", "cwd"]):
            cmd = proc.info["cmdline"] or []
            if cmd[1:4] != ["-m", "attnsweep.cli", "job"] or proc.info["cwd"] != str(workdir) or "--out" not in cmd:
                continue
            try:
                env = proc.environ()
                if "SLURM_ARRAY_TASK_ID" in env and env["SLURM_ARRAY_TASK_ID"] == env.get("SLURM_ARRAY_TASK_MIN"):
                    continue  # the first task of an array: its store is the one a later task's failure deletes
                proc.suspend()
            except psutil.NoSuchProcess:
                continue
            store = Path(cmd[cmd.index("--out") + 1])
            if (workdir / store).exists():  # it had finished its work: let it end, take another
                proc.resume()
                continue
            task = env.get("SLURM_ARRAY_TASK_ID")
            return (f"{env['SLURM_ARRAY_JOB_ID']}_{task}" if task else env["SLURM_JOB_ID"]), store
        time.sleep(0.1)
    return None


def cancel_after_the_others(workdir: Path, sweep: subprocess.Popen, experiment: str, record: dict) -> None:
    """From outside, as an admin, a time limit or a dying node would: cancel one running simulate
    job, after every other simulate job of the sweep has COMPLETED, written its store and been
    taken as finished by the sweep's Snakemake, which touches a job's outputs before it logs
    `Finished jobid` (the order in which a job that wrongly cleans up another job's output
    deletes a finished store). Records the job, its store, and the inode and mtime of every other
    store at the moment of the cancel."""
    stopped = stop_one_job_command(workdir, sweep)
    if stopped is None:
        return
    job, store = stopped
    others = planned_stores(experiment) - {store}
    while sweep.poll() is None:
        done = [j for j in slurm_history(workdir) if j["Comment"].startswith("rule_simulate") and j["id"] != job]
        logged = re.findall(r"Finished jobid: \d+ \(Rule: simulate\)", (workdir / "snakemake.out").read_text())
        if (len(done) == len(others) == len(logged) and all(j["JobState"] == "COMPLETED" for j in done)
                and all((workdir / other).exists() for other in others)):
            finished = {other: (workdir / other).stat() for other in others}
            subprocess.run(["scancel", job], check=True, timeout=30)
            record.update(job=job, store=store,
                          finished={other: (st.st_ino, st.st_mtime_ns) for other, st in finished.items()})
            return
        time.sleep(0.3)


@pytest.fixture(scope="module")
def sweeps(cluster, tmp_path_factory, tiny_run, request) -> dict:
    """Per experiment of SWEPT: a SLURM sweep to boundary.csv, and the local run of the same config that
    the other suites share (``tiny_run``, made here while SLURM works if no suite made it yet);
    for RETRIED also a SLURM sweep of the simulate jobs in which one job is cancelled while it runs;
    and the tiny refinement (two rounds) through the profile, against its local run (``tiny_refine``,
    also made while SLURM works: asked for here, not as an argument, which would make it first)."""
    root = tmp_path_factory.mktemp("sweeps")
    procs = {}
    for name in SWEPT:
        target = f"results/{name}/boundary.csv"
        procs[("slurm", name)] = snakemake(root / "slurm" / name, name, target, slurm=True)
    refined = root / "refine" / "critical_scaling"
    refined.mkdir(parents=True)
    with open(refined / "snakemake.out", "w") as log:
        procs[("refine", "critical_scaling")] = processes.start(
            refine_command(refined, "--workflow-profile", str(PROFILE), *SLURM_ARGS), cwd=refined, env=ENV,
            stdout=log, stderr=subprocess.STDOUT)
    retried = root / "retried" / RETRIED
    procs[("retried", RETRIED)] = snakemake(retried, RETRIED, "--until", "simulate", slurm=True)
    cancelled: dict = {}
    watcher = threading.Thread(
        target=cancel_after_the_others, args=(retried, procs[("retried", RETRIED)], RETRIED, cancelled)
    )
    watcher.start()
    deadline = time.monotonic() + HANG_S
    try:
        local = {name: tiny_run(name) for name in SWEPT}
        request.getfixturevalue("tiny_refine")
        texts = {key: finish(proc, root / key[0] / key[1], deadline) for key, proc in procs.items()}
    finally:
        for proc in procs.values():  # every sweep with its jobs' processes, finished or not
            processes.end(proc)
        watcher.join()  # it returns once its sweep has ended
    jobs = {key: slurm_history(root / key[0] / key[1]) for key in procs}
    return {"root": root, "local": local, "text": texts, "jobs": jobs, "cancelled": cancelled, "refined": refined}


def assert_same_store(a: Path, b: Path) -> None:
    """Every variable, coordinate and variable attr identical, bit for bit; of the dataset attrs
    only provenance (host, commit, wall times) may differ."""
    x, y = open_store(a).load(), open_store(b).load()
    differing = {k for k in set(x.attrs) | set(y.attrs) if x.attrs.get(k) != y.attrs.get(k)}
    assert all(PROVENANCE.search(k) for k in differing), f"{a.name}: attrs differ: {differing}"
    x.attrs, y.attrs = {}, {}
    assert set(x.data_vars) == set(y.data_vars) and x.data_vars
    for var in x.data_vars:
        xr.testing.assert_identical(x[var], y[var])
    assert x.identical(y), a


def run_stores(workdir: Path, experiment: str) -> list[Path]:
    runs = workdir / "results" / experiment / "runs"
    return sorted(p.relative_to(runs) for p in runs.rglob("*.zarr") if not p.name.startswith("."))


@pytest.mark.parametrize("experiment", SWEPT)
def test_slurm_sweep_equals_local_run(sweeps: dict, experiment: str) -> None:
    workdir, local = sweeps["root"] / "slurm" / experiment, sweeps["local"][experiment]
    jobs = sweeps["jobs"][("slurm", experiment)]
    n_runs = len(run_stores(local, experiment))
    assert n_runs > 1

    # Every job went through sbatch: slurmctld lists them, completed, in the default partition;
    # simulate as one job each (no arrays: profiles/README.md), one GPU each, each store's job
    # once; the reductions as one group job.
    assert jobs and all(j["JobState"] == "COMPLETED" for j in jobs), jobs
    assert {j["Partition"] for j in jobs} == {"debug"}
    simulate = [j for j in jobs if j["Comment"].startswith("rule_simulate")]
    assert not any("ArrayTaskId" in j for j in simulate), simulate
    stores = {Path("results") / experiment / "runs" / store for store in run_stores(local, experiment)}
    assert Counter(j["Comment"] for j in simulate) == {comment(experiment, s): 1 for s in stores}, simulate
    # Each job's time limit is its own estimate with the margin (attnsweep.plan.cost), not a constant.
    limits = {time_limit(m) for m in runtime_limits(experiment)}
    assert all(j["TresPerJob"] == "gres:gpu:1" and j["TimeLimit"] in limits for j in simulate), (simulate, limits)
    assert [j["Comment"] for j in jobs if j not in simulate] == ["rule_aggregate_boundary_collect_reduce"]
    logs = {p.name for p in (workdir / ".snakemake" / "slurm_logs").rglob("*.log")}
    assert logs == {f"{j['id']}.log" for j in jobs}

    assert run_stores(workdir, experiment) == run_stores(local, experiment)
    for name in ("sweep.zarr", "summary.zarr"):
        assert_same_store(workdir / "results" / experiment / name, local / "results" / experiment / name)
    csv = f"results/{experiment}/boundary.csv"
    assert (workdir / csv).read_text() == (local / csv).read_text()


def runtime_limits(experiment: str) -> set[int]:
    """The runtimes (minutes) the rule gives the tiny config's simulate jobs at attempt 1."""
    plan = load_sweep(load_yaml(tiny_config(experiment))).plans[experiment]
    return {runtime_minutes(seconds) for seconds in plan.seconds().values()}


def time_limit(minutes: int) -> str:
    """SLURM's TimeLimit text of a limit in minutes."""
    return f"{minutes // 60:02d}:{minutes % 60:02d}:00"


def attempt(job: dict[str, str]) -> int:
    """A simulate job's attempt, from its memory: the profile's 8000 MB x attempt, plus, for a task of
    an array (the opt-in), the plugin's room for the encoded commands (3x their bytes in MiB: 1 MB
    for a tiny sweep, far below the next attempt's 8000)."""
    value, unit = float(job["MinMemoryNode"][:-1]), job["MinMemoryNode"][-1]
    return int(value * {"M": 1, "G": 1024, "T": 1024**2}[unit] // 8000)


def test_cancelled_job_is_retried(sweeps: dict) -> None:
    """A cancelled simulate job reruns alone: no finished store is deleted or rewritten because of it."""
    experiment = RETRIED
    workdir, local = sweeps["root"] / "retried" / experiment, sweeps["local"][experiment]
    cancelled = sweeps["cancelled"]
    assert cancelled, "no running simulate job was seen to cancel"
    victim, store = cancelled["job"], cancelled["store"]
    text = sweeps["text"][("retried", experiment)]
    # First the point of it: every store that was finished when the job was cancelled is the same
    # file at the end (a store is renamed into place when whole, so a rerun gives a new inode), and
    # no Snakemake, the main one or a job's, removed it as the output of a failed job.
    assert len(cancelled["finished"]) == len(planned_stores(experiment)) - 1 > 0
    for other, (inode, mtime) in cancelled["finished"].items():
        st = (workdir / other).stat() if (workdir / other).exists() else None
        assert st and (st.st_ino, st.st_mtime_ns) == (inode, mtime), (
            f"{other}, finished before SLURM job {victim} (writing {store}) was cancelled, was deleted or rewritten")
    removed = re.findall(r"Removing output files of failed job \w+ since they might be corrupted:\n(.*)", text)
    assert not [line for line in removed for other in cancelled["finished"] if str(other) in line], removed
    # The sweep still finished (rc 0, checked in the fixture): `retries` resubmitted the one job.
    jobs = {j["id"]: j for j in sweeps["jobs"][("retried", experiment)]}
    cancelled_job = jobs[victim]
    assert cancelled_job["JobState"] == "CANCELLED", jobs
    assert f"SLURM-job '{victim}' failed, SLURM status is: 'CANCELLED'" in text, text[-3000:]
    assert text.count("Trying to restart job") == 1, text[-3000:]
    # Each other store's job ran once, the cancelled one twice: its retry a second SLURM job,
    # attempt 2 (twice the memory and runtime of attempt 1), the only job past attempt 1.
    seen = [(j["id"], j["Comment"], j["JobState"], j["MinMemoryNode"]) for j in jobs.values()]
    stores = {Path("results") / experiment / "runs" / s for s in run_stores(local, experiment)}
    assert stores == planned_stores(experiment) and store in stores
    assert Counter(j["Comment"] for j in jobs.values()) == {
        comment(experiment, s): 1 + (s == store) for s in stores}, seen
    retries = [j for j in jobs.values() if attempt(j) > 1]
    assert len(retries) == 1 and retries[0]["JobState"] == "COMPLETED", seen
    assert "ArrayTaskId" not in retries[0] and retries[0]["Comment"] == comment(experiment, store), seen
    assert retries[0]["MinMemoryNode"] == "16000M" and attempt(cancelled_job) == 1, seen
    limits = runtime_limits(experiment)
    assert cancelled_job["TimeLimit"] in {time_limit(m) for m in limits}
    assert retries[0]["TimeLimit"] in {time_limit(2 * m) for m in limits}
    assert all(j["JobState"] == "COMPLETED" for j in jobs.values() if j is not cancelled_job), seen
    assert run_stores(workdir, experiment) == run_stores(local, experiment)
    runs = Path("results") / experiment / "runs"
    for other in run_stores(workdir, experiment):
        assert_same_store(workdir / runs / other, local / runs / other)


def test_slurm_refinement_equals_local(sweeps: dict, tiny_refine: Path) -> None:
    """Two rounds of the tiny refinement, each an ordinary run through the profile as SLURM jobs:
    the same decisions, record and stores as the local refinement, bit for bit."""
    slurm, local = sweeps["refined"] / "results" / "critical_scaling", tiny_refine / "results" / "critical_scaling"
    assert (slurm / "refine.json").read_text() == (local / "refine.json").read_text()
    assert len(json.loads((slurm / "refine.json").read_text())["rounds"]) == 2
    assert any(job["Comment"].startswith("rule_simulate") for job in sweeps["jobs"][("refine", "critical_scaling")])
    for store in ("sweep.zarr", "summary.zarr", "boundary.zarr"):
        assert_same_store(slurm / store, local / store)


def ignores_sigterm(pid: int) -> bool:
    """Whether process ``pid`` has SIGTERM ignored (/proc/PID/status: SigIgn, a mask of signal - 1)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    mask = int(re.search(r"^SigIgn:\s*([0-9a-f]+)", status, re.M).group(1), 16)
    return bool(mask >> (signal.SIGTERM - 1) & 1)


def test_a_job_process_slurm_loses_is_left_to_the_stop_script(cluster: Path, tmp_path: Path) -> None:
    """The cluster tracks a job's processes by their parent links (proctrack/linuxproc): when a
    cancelled job's shell exits first, a process that outlives SIGTERM (here one that ignores it;
    in a sweep, a Snakemake still shutting down) is reparented, the job is reported ended at once,
    and the process runs on. scripts/slurm-local-stop.sh ends such processes: the cluster
    fixture checks, after the stop, that this one is gone."""
    marker = tmp_path / "stray"
    code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"
    wrap = shlex.join([sys.executable, "-S", "-c", code, str(marker)])
    submitted = subprocess.run(["sbatch", "--parsable", "-o", str(tmp_path / "slurm.out"), "--wrap", wrap],
                               cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=30, check=True)
    job = submitted.stdout.strip().split(";")[0]
    deadline = time.monotonic() + HANG_S  # a hang guard: the job starts on an idle CPU in about a second
    stray = None
    while stray is None and time.monotonic() < deadline:  # until it runs and ignores SIGTERM
        found = [p for p in psutil.process_iter(["cmdline"]) if str(marker) in (p.info["cmdline"] or [])]
        stray = next((p for p in found if ignores_sigterm(p.pid)), None)
        time.sleep(0.1)
    assert stray is not None, f"job {job} never started its process"
    STRAYS.append(stray)
    subprocess.run(["scancel", job], check=True, timeout=30)
    while subprocess.run(["squeue", "-h", "-j", job], capture_output=True, text=True, timeout=30).stdout.strip():
        assert time.monotonic() < deadline, f"job {job} still active after scancel"
        time.sleep(0.1)
    # SLURM has ended the job (squeue no longer lists it) and nothing will signal the process again.
    assert stray.is_running() and stray.status() != psutil.STATUS_ZOMBIE
