# Held for the whole run: the results directory's lock (attnsweep.lock), and a warm fork server
# for local runs (attnsweep.worker): simulate jobs skip the ~3 s import of torch, xarray and
# zarr. The server starts only when jobs run on this machine; a job that finds no server runs
# in its own process with the same result.
import subprocess
import tempfile
import time


WORKER_SOCKET = os.path.join(tempfile.gettempdir(), f"attnsweep-worker-{os.getpid()}.sock")
WORKER = {}


def start_worker():
    """Start the server and wait until it listens (imports take a few seconds)."""
    os.makedirs(LOGS, exist_ok=True)
    log = open(os.path.join(LOGS, "worker.log"), "a")
    WORKER["proc"] = subprocess.Popen(
        [PYTHON, "-m", "attnsweep.worker", WORKER_SOCKET, "--idle", "600"], stdout=log, stderr=log
    )
    os.environ["ATTNSWEEP_WORKER"] = WORKER_SOCKET  # inherited by the jobs' shells
    deadline = time.monotonic() + 120
    while not os.path.exists(WORKER_SOCKET) and WORKER["proc"].poll() is None:
        if time.monotonic() > deadline:
            break
        time.sleep(0.1)


def stop_worker():
    proc = WORKER.pop("proc", None)
    if proc is not None:
        proc.terminate()
        proc.wait(timeout=30)


onstart:
    if not (workflow.remote_exec or workflow.subprocess_exec):  # the main snakemake only
        try:
            WORKER["results_lock"] = claim_results(RESULTS)  # held until this process exits
        except ConfigError as err:
            raise WorkflowError(f"attnsweep: {err}") from None
    if SWEEP.config["warm_worker"] and workflow.local_exec and not workflow.dryrun:
        start_worker()


onsuccess:
    stop_worker()


onerror:
    stop_worker()
