"""The warm worker's process (:mod:`attnsweep.run.worker`), started and stopped by a local run's
``onstart``, ``onsuccess`` and ``onerror`` handlers (``workflow/rules/worker.smk``).

Its socket lives in a fresh directory from :func:`tempfile.mkdtemp` (mode 0700, unpredictable
name): on a shared machine nobody else can reach the socket or take its path first. The server
serves only this user (``SO_PEERCRED``) and requests that write inside the results directory, and
ends with the run that started it (``--parent``), a killed one too.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from attnsweep.run.worker import SOCKET_ENV

START_S = 120.0  # a hang guard on the server's imports (a few seconds), not a time it must meet
IDLE_S = 600  # the server exits after this long without a job, whatever else happens


class WorkerProcess:
    """One warm worker for the jobs of this run: :meth:`start` it, and :meth:`stop` it when the run ends."""

    def __init__(self, python: str, results: str, logs: str):
        self.python, self.results, self.logs = python, os.path.abspath(results), logs
        self.proc: subprocess.Popen | None = None
        self.directory: str | None = None

    def start(self) -> None:
        """Start the server and wait until it listens; the jobs' shells find it through
        ``$ATTNSWEEP_WORKER``, set here for them to inherit (a job that finds no server runs in its
        own process, with the same result)."""
        os.makedirs(self.logs, exist_ok=True)
        self.directory = tempfile.mkdtemp(prefix="attnsweep-worker-")
        socket_path = os.path.join(self.directory, "worker.sock")
        with open(Path(self.logs, "worker.log"), "a") as log:
            self.proc = subprocess.Popen(
                [self.python, "-m", "attnsweep.run.worker", socket_path, "--results", self.results,
                 "--idle", str(IDLE_S), "--parent", str(os.getpid())],
                stdout=log, stderr=log)
        os.environ[SOCKET_ENV] = socket_path
        deadline = time.monotonic() + START_S
        while not os.path.exists(socket_path) and self.proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)

    def stop(self) -> None:
        """End the server and remove its directory (the server removes only its socket)."""
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=30)
            self.proc = None
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = None
        os.environ.pop(SOCKET_ENV, None)
