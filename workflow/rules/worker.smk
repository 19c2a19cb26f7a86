# Held for the whole run by the main Snakemake process (Snakemake runs the handlers there only:
# never in a dry run, and its spawned jobs get --no-hooks): the results directory's lock
# (attnsweep.run.lock), and a warm fork server for jobs that run on this machine
# (attnsweep.run.worker_process): simulate jobs skip the ~3 s import of torch, xarray and zarr.
from attnsweep.run.worker_process import WorkerProcess

WORKER = WorkerProcess(PYTHON, RESULTS, LOGS)


onstart:
    try:
        hold_results(RESULTS)  # until this process exits
    except ConfigError as err:
        raise WorkflowError(f"attnsweep: {err}") from None
    # workflow.local_exec: Snakemake has no public API that says whether jobs run on this machine;
    # a cluster run's jobs cannot reach the server, which would only load the login node.
    if SWEEP.config["warm_worker"] and workflow.local_exec:
        WORKER.start()


onsuccess:
    WORKER.stop()


onerror:
    WORKER.stop()
