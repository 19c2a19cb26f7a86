"""A fork server that keeps torch imported between the simulate (and reduction) jobs of one local run.

A fresh Python process pays ~2.3 s to import torch and ~1 s for xarray and zarr on a 2-core
machine, more than many jobs compute. The workflow starts one server per local run (its
``onstart``); each simulate job's ``attnsweep job`` client sends the job and its own stdout and
stderr descriptors over a Unix socket, the server forks a child that already has every module
imported, and the child runs the job through :func:`attnsweep.jobs.run_job` with the client's
output streams. The reduce, boundary and figure jobs go the same way (matplotlib, xarray and dask
imported: ~2 s of a 3 s job). The client exits with the child's status. Where no server answers (a SLURM
node, a plain shell), the client runs the job itself: results are the same either way.

The server never computes, so no OpenMP or CUDA state exists when it forks. A child whose
client disappears (killed by Snakemake) kills itself, leaving at most a temporary sibling
of its store. The server exits after ``idle_s`` seconds without a job.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import threading
from pathlib import Path
from typing import Any

SOCKET_ENV = "ATTNSWEEP_WORKER"
MAX_MESSAGE = 1 << 22


def submit(path: str, request: dict[str, Any]) -> int | None:
    """Run ``request`` on the server at ``path``; its exit status, or None if no server answers."""
    try:
        client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        client.connect(path)
    except OSError:
        return None
    with client:
        payload = json.dumps(request).encode()
        header = len(payload).to_bytes(8, "little")
        socket.send_fds(client, [header + payload], [sys.stdout.fileno(), sys.stderr.fileno()])
        reply = client.recv(64)  # the child's status, or EOF if it died
    return int(reply) if reply.strip() else 1


def run(request: dict[str, Any]) -> int:
    """Hand ``request`` to the server named by ``$ATTNSWEEP_WORKER``, or run it in this process
    where none answers; its exit status."""
    server = os.environ.get(SOCKET_ENV)
    status = submit(server, request) if server else None
    if status is None:
        run_request(request)
        return 0
    return status


AGGREGATE_STEPS = ("reduce", "boundary", "figure")  # collect keeps its own process: its input list is long


def run_request(request: dict[str, Any]) -> None:
    """Run one request in this process (the child's and the no-server path): a simulate job, or
    a step of :mod:`attnsweep.aggregate` (``step``, one of :data:`AGGREGATE_STEPS`, and its ``args``)."""
    if "step" in request:
        from attnsweep import aggregate

        if request["step"] not in AGGREGATE_STEPS:
            raise ValueError(f"unknown aggregate step {request['step']!r}; one of {AGGREGATE_STEPS}")
        getattr(aggregate, request["step"])(**request["args"])
        return
    from attnsweep.jobs import run_job
    from attnsweep.registry import JobSpec

    run_job(JobSpec.from_dict(request["spec"]), request["out"], device=request["device"],
            threads=request["threads"])


def _child(conn: socket.socket, request: dict[str, Any], fds: list[int]) -> None:
    """In the forked child: adopt the client's streams, watch the client, run the job."""
    os.dup2(fds[0], 1)
    os.dup2(fds[1], 2)
    for fd in fds:
        os.close(fd)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)

    def watch() -> None:  # the client sends nothing more: EOF means it died, so stop at once
        conn.recv(1)
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()
    import logging

    from attnsweep.errors import ConfigError

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s",
                        stream=sys.stderr, force=True)
    status = 0
    try:
        run_request(request)
    except ConfigError as err:
        print(f"attnsweep: config error: {err}", file=sys.stderr)
        status = 2
    except BaseException as err:  # report as a fresh process would (cli.main)
        import traceback

        from attnsweep.store import StoreWriteError

        if isinstance(err, StoreWriteError):  # disk full, read-only: one line
            print(f"attnsweep: {err}", file=sys.stderr)
        else:
            traceback.print_exc()
        status = 1
    sys.stdout.flush()
    sys.stderr.flush()
    conn.sendall(str(status).encode())
    os._exit(status)


def _receive(conn: socket.socket) -> tuple[dict[str, Any], list[int]]:
    """One length-prefixed JSON request and the two descriptors sent with it."""
    data, fds, _, _ = socket.recv_fds(conn, MAX_MESSAGE, 2)
    size = int.from_bytes(data[:8], "little")
    while len(data) < 8 + size:
        chunk = conn.recv(8 + size - len(data))
        if not chunk:
            raise ConnectionError("client went away mid-request")
        data += chunk
    return json.loads(data[8 : 8 + size]), list(fds)


def serve(path: str, idle_s: float = 900.0) -> None:
    """Preload the modules, then fork one child per request on the Unix socket ``path``."""
    import matplotlib.backends.backend_agg  # noqa: F401  (the figure jobs)
    import matplotlib.backends.backend_pdf  # noqa: F401
    import matplotlib.figure  # noqa: F401

    import attnsweep.aggregate  # noqa: F401  (xarray, dask)
    import attnsweep.experiments  # noqa: F401  (torch, numpy, the experiments)
    import attnsweep.jobs  # noqa: F401  (zarr)

    Path(path).unlink(missing_ok=True)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(64)
    server.settimeout(idle_s)
    children: set[int] = set()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        while True:
            try:
                conn, _ = server.accept()
            except TimeoutError:
                children -= _reap(children)
                if not children:
                    return
                continue
            try:
                request, fds = _receive(conn)
            except (OSError, ValueError):
                conn.close()
                continue
            pid = os.fork()
            if pid == 0:
                try:
                    server.close()
                    _child(conn, request, fds)
                finally:  # never fall back into the server's loop or its cleanup
                    os._exit(1)
            children.add(pid)
            conn.close()
            for fd in fds:
                os.close(fd)
            children -= _reap(children)
    finally:
        server.close()
        Path(path).unlink(missing_ok=True)


def _reap(children: set[int]) -> set[int]:
    done = set()
    for pid in children:
        if os.waitpid(pid, os.WNOHANG)[0]:
            done.add(pid)
    return done


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description="attnsweep fork server for local simulate jobs")
    parser.add_argument("socket")
    parser.add_argument("--idle", type=float, default=900.0, help="exit after this many idle seconds")
    args = parser.parse_args()
    serve(args.socket, args.idle)


if __name__ == "__main__":
    main()
