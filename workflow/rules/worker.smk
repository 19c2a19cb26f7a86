# Held for the whole run: the results directory's lock (attnsweep.lock), and a warm fork server
# for local runs (attnsweep.worker): simulate jobs skip the ~3 s import of torch, xarray and
# zarr. The server starts only when jobs run on this machine; a job that finds no server runs
# in its own process with the same result.
import shutil
import subprocess
import tempfile
import time

WORKER = {}


def start_worker():
    """Start the server and wait until it listens (imports take a few seconds).

    Its socket lives in a fresh directory from mkdtemp (mode 0700, unpredictable name): on a
    shared machine nobody else can reach the socket or take its path first. The server serves
    only this user (SO_PEERCRED) and requests that write inside RESULTS.
    """
    os.makedirs(LOGS, exist_ok=True)
    log = open(os.path.join(LOGS, "worker.log"), "a")
    WORKER["dir"] = tempfile.mkdtemp(prefix="attnsweep-worker-")
    socket_path = os.path.join(WORKER["dir"], "worker.sock")
    # --parent: the server ends with this run, a killed one too
    server = ["attnsweep.worker", socket_path, "--results", os.path.abspath(RESULTS)]
    WORKER["proc"] = subprocess.Popen(
        [PYTHON, "-m", *server, "--idle", "600", "--parent", str(os.getpid())],
        stdout=log,
        stderr=log,
    )
    # Set here for the jobs' shells to inherit, not read from the user's environment (so no
    # `envvars:`; written as update() because `snakemake --lint` takes a subscript for a read).
    os.environ.update(ATTNSWEEP_WORKER=socket_path)
    deadline = time.monotonic() + 120
    while not os.path.exists(socket_path) and WORKER["proc"].poll() is None:
        if time.monotonic() > deadline:
            break
        time.sleep(0.1)


def stop_worker():
    proc = WORKER.pop("proc", None)
    if proc is not None:
        proc.terminate()
        proc.wait(timeout=30)
    if "dir" in WORKER:  # the server removes its socket, not the directory it was given
        shutil.rmtree(WORKER.pop("dir"), ignore_errors=True)


onstart:
    if not (workflow.remote_exec or workflow.subprocess_exec):  # the main snakemake only
        try:
            hold_results(RESULTS)  # until this process exits
        except ConfigError as err:
            raise WorkflowError(f"attnsweep: {err}") from None
    if SWEEP.config["warm_worker"] and workflow.local_exec and not workflow.dryrun:
        start_worker()


onsuccess:
    stop_worker()


onerror:
    stop_worker()
