"""A fork server that keeps torch imported between the simulate (and reduction) jobs of one local run.

A fresh Python process pays ~2.3 s to import torch and ~1 s for xarray and zarr on a 2-core
machine, more than many jobs compute. The workflow starts one server per local run (its
``onstart``); each simulate job's ``attnsweep job`` client sends the job and its own stdout and
stderr descriptors over a Unix socket, the server forks a child that already has every module
imported, and the child runs the job through :func:`attnsweep.run.job.run_job` with the client's
output streams. The collect, reduce, boundary and figure jobs go the same way (matplotlib, xarray
and dask imported: ~2 s of a 3 s job). The client exits with the child's status. Where no server answers (a SLURM
node, a plain shell), the client runs the job itself: results are the same either way.

Local runs happen on shared machines, and the server writes wherever a request says, as its
user. So: the socket lives in a directory only that user can enter (:mod:`attnsweep.run.worker_process` makes it with
:func:`tempfile.mkdtemp`: mode 0700, unpredictable name; the server and every client check it
with :func:`private_problem`, and a client that finds it unsafe runs the job itself rather than
hand its job and streams to whoever made it); the server serves only connections whose peer
credentials (``SO_PEERCRED``) are its own uid; and it forks for a request only if
:func:`check_request` finds it a well-formed job or step writing inside the run's results
directory.

The server never computes, so no OpenMP or CUDA state exists when it forks. A child whose
client disappears (killed by Snakemake, stopped by Ctrl-C) kills itself, leaving at most a
temporary sibling of its store. The server exits after ``idle_s`` seconds without a job, and
(Linux, ``--parent``) when the run that started it ends, killed or not.
"""

from __future__ import annotations

import contextlib
import ctypes
import inspect
import json
import os
import signal
import socket
import stat
import struct
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from types import UnionType
from typing import Any, Union, get_args, get_origin, get_type_hints

from attnsweep.errors import ConfigError

SOCKET_ENV = "ATTNSWEEP_WORKER"
MAX_MESSAGE = 1 << 22
REFUSED = 2  # the client's exit status for a request the server refuses (as for a config error)
PR_SET_PDEATHSIG = 1  # linux/prctl.h


def private_problem(directory: str) -> str | None:
    """Why ``directory`` must not hold the server's socket, or None if only this user can enter it.

    Checked with :func:`os.lstat`: a symlink, a directory of another user or one that group or
    others may enter could be (or be swapped for) someone else's, whose socket would receive
    our jobs and output streams, or whose path we could not bind.
    """
    try:
        info = os.lstat(directory)
    except OSError as err:
        return f"{directory}: {err.strerror}"
    if not stat.S_ISDIR(info.st_mode):
        return f"{directory} is not a directory"
    if info.st_uid != os.geteuid():
        return f"{directory} belongs to uid {info.st_uid}, not {os.geteuid()}"
    if info.st_mode & 0o077:
        return f"{directory} has mode {stat.S_IMODE(info.st_mode):o}: others may enter it"
    return None


def submit(path: str, request: dict[str, Any]) -> int | None:
    """Run ``request`` on the server at ``path``; its exit status, or None if no server answers
    or its directory is not private (then one line on stderr says why)."""
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.lexists(directory):
        return None
    problem = private_problem(directory)
    if problem:
        print(f"attnsweep: not using the worker at {path}: {problem}; running here", file=sys.stderr)
        return None
    try:
        client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        client.connect(path)
    except OSError:
        return None
    with client:
        # Relative paths in the request are the client's: the server resolves them against its cwd.
        payload = json.dumps({**request, "cwd": os.getcwd()}).encode()
        header = len(payload).to_bytes(8, "little")
        socket.send_fds(client, [header + payload], [sys.stdout.fileno(), sys.stderr.fileno()])
        reply = b""
        while not reply.endswith(b"\n") and (chunk := client.recv(4096)):
            reply += chunk
    status, _, message = reply.decode(errors="replace").strip().partition(" ")
    if message:
        print(f"attnsweep: {message}", file=sys.stderr)
    return int(status) if status else 1  # EOF: the child died


def run(request: dict[str, Any]) -> int:
    """Hand ``request`` to the server named by ``$ATTNSWEEP_WORKER``, or run it in this process
    where none answers; its exit status."""
    server = os.environ.get(SOCKET_ENV)
    status = submit(server, request) if server else None
    if status is None:
        run_request(request)
        return 0
    return status


JOB_KEYS = {"spec", "out", "device", "threads", "cwd"}
DEVICES = ("auto", "cpu", "cuda")


class RefusedRequest(ValueError):
    """A request that is not a well-formed job or step of this run; ``str()`` is one line."""


def check_request(request: Any, results: str) -> dict[str, Any]:
    """``request`` if it is a simulate job or an aggregate step of the run whose (absolute)
    results directory is ``results``; :class:`RefusedRequest` otherwise. Its paths are normalised
    and stay relative where the client wrote them so, to its ``cwd`` (kept), where the served
    child runs: a message names a path as the user's run does.

    A second line of defence behind ``SO_PEERCRED``: whatever reaches the server, it writes only
    a ``.zarr`` store or a step's files inside the run's results directory.
    """
    if not isinstance(request, dict) or not isinstance(request.get("cwd"), str) \
            or not os.path.isabs(request["cwd"]):
        raise RefusedRequest("a request is a JSON object naming the client's absolute cwd")

    def inside(key: str, value: Any) -> str:
        if not isinstance(value, str):
            raise RefusedRequest(f"{key}: expected a path, got {value!r:.80}")
        path = os.path.normpath(os.path.join(request["cwd"], value))
        if path == results or os.path.commonpath([path, results]) != results:
            raise RefusedRequest(f"{key}: {path:.200} is outside the results directory {results}")
        # the path checked, not the one written: the kernel resolves a link before a "..", normpath not
        return path if os.path.isabs(value) else os.path.relpath(path, request["cwd"])

    if "step" in request:
        return _check_step(request, inside)
    from attnsweep import registry  # numpy and more: the client checks nothing, the server preloads it
    from attnsweep.jobspec import JobSpec  # idem

    if set(request) != JOB_KEYS:
        raise RefusedRequest(f"a job request has the keys {sorted(JOB_KEYS)}, not {sorted(request)}"[:300])
    spec, threads = request["spec"], request["threads"]
    spec_keys = set(inspect.signature(JobSpec).parameters)
    if not isinstance(spec, dict) or not set(spec) <= spec_keys:
        raise RefusedRequest(f"spec: a JSON object with keys among {sorted(spec_keys)}")
    try:
        registry.get(JobSpec.from_dict(spec).experiment)
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        raise RefusedRequest(f"spec: not a job spec ({type(err).__name__}: {err})"[:300]) from None
    if request["device"] not in DEVICES:
        raise RefusedRequest(f"device: one of {DEVICES}")
    if threads is not None and (type(threads) is not int or threads < 1):
        raise RefusedRequest("threads: a positive integer or null")
    out = inside("out", request["out"])
    if not out.endswith(".zarr"):
        raise RefusedRequest(f"out: {out:.200} is not a .zarr store")
    return {"spec": spec, "out": out, "device": request["device"], "threads": threads, "cwd": request["cwd"]}


def _check_step(request: dict[str, Any], inside: Callable[[str, Any], str]) -> dict[str, Any]:
    """The aggregate half of :func:`check_request`: a step of :data:`attnsweep.reduce.aggregate.STEPS` whose
    ``args`` are exactly its function's parameters: paths (and lists of paths) inside the
    results, others of their annotated (plain) type."""
    from attnsweep.reduce import aggregate  # heavy (xarray, zarr, dask): the server preloads it

    if set(request) != {"step", "args", "cwd"} or request["step"] not in aggregate.STEPS:
        raise RefusedRequest(f"a step request has the keys args, cwd, step; step one of {aggregate.STEPS}")
    function = getattr(aggregate, request["step"])
    hints = get_type_hints(function)
    parameters = inspect.signature(function).parameters
    required = {name for name, p in parameters.items() if p.default is inspect.Parameter.empty}
    args = request["args"]
    if not isinstance(args, dict) or not required <= set(args) <= set(parameters):
        raise RefusedRequest(f"{request['step']}: args are {sorted(required)}, and may be "
                             f"{sorted(set(parameters) - required)}")
    checked = {}
    for key, value in args.items():
        if Path in get_args(hints[key]):
            checked[key] = inside(key, value)
        elif get_origin(hints[key]) is Sequence and Path in get_args(get_args(hints[key])[0]):  # paths
            if not isinstance(value, list):
                raise RefusedRequest(f"{key}: expected a list of paths, got {value!r:.80}")
            checked[key] = [inside(key, item) for item in value]
        elif _fits(value, hints[key]):
            checked[key] = value
        else:
            raise RefusedRequest(f"{key}: expected {hints[key]}, got {value!r:.80}")
    return {"step": request["step"], "args": checked, "cwd": request["cwd"]}


def _fits(value: Any, hint: Any) -> bool:
    """Whether the JSON ``value`` is of the plain annotated type ``hint``: a class, ``None``, a
    union of them, or a ``dict``, ``list`` or ``Sequence`` of them (no paths: the caller checks
    those)."""
    origin, args = get_origin(hint), get_args(hint)
    if hint is type(None):
        return value is None
    if origin in (Union, UnionType):
        return any(_fits(value, arg) for arg in args)
    if origin is dict:
        return isinstance(value, dict) and all(_fits(k, args[0]) and _fits(v, args[1]) for k, v in value.items())
    if origin in (list, Sequence):
        return isinstance(value, list) and all(_fits(item, args[0]) for item in value)
    return isinstance(hint, type) and isinstance(value, hint)


def run_request(request: dict[str, Any]) -> None:
    """Run one request in this process (the child's and the no-server path): a simulate job, or
    a step of :mod:`attnsweep.reduce.aggregate` (``step``, one of its ``STEPS``, and its ``args``)."""
    if "step" in request:
        from attnsweep.reduce import aggregate  # heavy: in the server or an aggregate process only

        if request["step"] not in aggregate.STEPS:
            raise ConfigError("step", f"unknown aggregate step {request['step']!r} "
                                      f"(one of {', '.join(aggregate.STEPS)})")
        getattr(aggregate, request["step"])(**request["args"])
        return
    from attnsweep.jobspec import JobSpec  # numpy: idem
    from attnsweep.run.job import run_job  # heavy: torch, xarray, zarr

    run_job(JobSpec.from_dict(request["spec"]), request["out"], device=request["device"],
            threads=request["threads"])


def _child(conn: socket.socket, request: dict[str, Any], fds: list[int]) -> None:
    """In the forked child: adopt the client's streams and working directory, watch the client, run the job."""
    os.dup2(fds[0], 1)
    os.dup2(fds[1], 2)
    for fd in fds:
        os.close(fd)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)

    def watch() -> None:  # the client sends nothing more: EOF means it died, so stop at once
        conn.recv(1)
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()
    import logging  # the forked child's own set-up

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s",
                        stream=sys.stderr, force=True)
    status = 0
    try:
        os.chdir(request.pop("cwd"))  # the request's relative paths are the client's (check_request)
        run_request(request)
    except ConfigError as err:
        print(f"attnsweep: config error: {err}", file=sys.stderr)
        status = 2
    except BaseException as err:  # report as a fresh process would (cli.main)
        import traceback  # the failure path only

        from attnsweep.errors import BadStoreError  # idem
        from attnsweep.stores.io import StoreWriteError  # preloaded in the server

        if isinstance(err, (StoreWriteError, BadStoreError)):  # disk full, read-only, a bad input: one line
            print(f"attnsweep: {err}", file=sys.stderr)
        else:
            traceback.print_exc()
        status = 1
    sys.stdout.flush()
    sys.stderr.flush()
    conn.sendall(f"{status}\n".encode())
    os._exit(status)


def _receive(conn: socket.socket) -> tuple[bytes, list[int]]:
    """One length-prefixed request (JSON, parsed by the caller) and the descriptors sent with it."""
    data, fds, _, _ = socket.recv_fds(conn, MAX_MESSAGE, 2)
    size = int.from_bytes(data[:8], "little")
    while len(data) < 8 + size:
        chunk = conn.recv(8 + size - len(data))
        if not chunk:
            for fd in fds:
                os.close(fd)
            raise ConnectionError("client went away mid-request")
        data += chunk
    return data[8 : 8 + size], list(fds)


def _peer(conn: socket.socket) -> tuple[int, int]:
    """The connecting process's pid and uid, as the kernel recorded them at connect()."""
    pid, uid, _ = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                      struct.calcsize("3i")))
    return pid, uid


def _log(message: str) -> None:
    print(f"attnsweep.run.worker: {message}", file=sys.stderr, flush=True)


def end_with(parent: int) -> None:
    """Stop (SIGTERM) when ``parent``, the run that started this server, ends, however it ends
    (kill -9 included), not ``idle_s`` later: Linux's ``prctl(PR_SET_PDEATHSIG)``, elsewhere only
    the idle timeout. The run's thread that started the server lives as long as the run."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:  # it ended before the prctl took hold
        sys.exit(0)


def serve(path: str, results: str, idle_s: float = 900.0, parent: int | None = None) -> None:
    """Preload the modules, then fork one child per accepted request on the Unix socket ``path``,
    whose directory must be private (:func:`private_problem`); requests may write only inside
    ``results``. With ``parent``, the server ends with that process (:func:`end_with`)."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # ends through the cleanup below
    if parent is not None:
        end_with(parent)
    problem = private_problem(os.path.dirname(os.path.abspath(path)))
    if problem:
        raise SystemExit(f"attnsweep.run.worker: not serving at {path}: {problem}")
    results = os.path.abspath(results)
    # Ctrl-C signals the whole process group, this server and its children too: they leave it to
    # their owners. The run stops the server (onerror: SIGTERM), a child stops with its client.
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    import matplotlib.backends.backend_agg  # noqa: F401  (the figure jobs)
    import matplotlib.backends.backend_pdf  # noqa: F401
    import matplotlib.figure  # noqa: F401

    import attnsweep.reduce.aggregate  # noqa: F401  (xarray, dask)
    import attnsweep.run.job  # noqa: F401  (zarr)
    from attnsweep import registry  # the preload itself

    registry.load_all()  # torch, numpy, every experiment (installed ones too)

    Path(path).unlink(missing_ok=True)  # a stale socket of ours: nobody else can enter the directory
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    umask = os.umask(0o077)
    try:
        server.bind(path)
    finally:
        os.umask(umask)
    server.listen(64)
    server.settimeout(idle_s)
    children: set[int] = set()
    served = 0
    _log(f"pid {os.getpid()} serving the jobs of {results}")
    try:
        while True:
            try:
                conn, _ = server.accept()
            except TimeoutError:
                children -= _reap(children)
                if not children:
                    return
                continue
            peer, uid = _peer(conn)
            if uid != os.geteuid():  # the kernel records the peer's effective uid
                _log(f"refused a connection from pid {peer}, uid {uid}")
                conn.close()
                continue
            try:
                payload, fds = _receive(conn)
            except OSError:
                conn.close()
                continue
            try:
                if len(fds) != 2:
                    raise RefusedRequest("a request comes with the client's stdout and stderr")
                request = check_request(json.loads(payload), results)
            except ValueError as err:  # RefusedRequest, or not JSON
                reason = " ".join(str(err).split())  # one line: the reply ends at a newline
                _log(f"refused a request of pid {peer}: {reason}")
                with contextlib.suppress(OSError):
                    conn.sendall(f"{REFUSED} refused by the worker: {reason}\n".encode())
                conn.close()
                for fd in fds:
                    os.close(fd)
                continue
            pid = os.fork()
            if pid == 0:
                try:
                    server.close()
                    _child(conn, request, fds)
                finally:  # never fall back into the server's loop or its cleanup
                    os._exit(1)
            children.add(pid)
            served += 1
            conn.close()
            for fd in fds:
                os.close(fd)
            children -= _reap(children)
    finally:
        server.close()
        Path(path).unlink(missing_ok=True)
        _log(f"pid {os.getpid()} stopped after serving {served} requests")


def _reap(children: set[int]) -> set[int]:
    done = set()
    for pid in children:
        if os.waitpid(pid, os.WNOHANG)[0]:
            done.add(pid)
    return done


def main() -> None:
    import argparse  # the server's own command line only

    parser = argparse.ArgumentParser(description="attnsweep fork server for local simulate jobs")
    parser.add_argument("socket", help="its path, in a directory only this user can enter")
    parser.add_argument("--results", required=True, help="the run's results directory: requests write only inside it")
    parser.add_argument("--idle", type=float, default=900.0, help="exit after this many idle seconds")
    parser.add_argument("--parent", type=int, help="the pid of the run that starts it: end with it")
    args = parser.parse_args()
    try:
        serve(args.socket, args.results, args.idle, args.parent)
    except SystemExit as stop:  # SIGTERM, the run's end: serve's cleanup has run
        if stop.code not in (0, None):
            raise
    # Skip the interpreter's teardown of torch and the rest (over a second, which every run's
    # end waits on, WorkerProcess.stop): the server writes through flushed lines only, and its
    # children are their clients' to end.
    os._exit(0)


if __name__ == "__main__":
    main()
