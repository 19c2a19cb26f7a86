"""The warm fork server: same stores as a fresh process, failures and kills handled, and on a
shared machine no other user served and no request outside the run's results accepted."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket as sockets
import stat
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import psutil
import pytest
from helpers import processes
from helpers.project import BUILT_IN, tiny

from attnsweep.plan.config import load_sweep
from attnsweep.run import worker
from attnsweep.run.worker import SOCKET_ENV
from attnsweep.stores.io import open_store

SECTION = {"n": [24], "d": [6], "rho": [0.3, 0.7], "gamma": [1.0, 4.0], "seeds": [3], "wildcards": []}


def spec(**section) -> str:
    config = {"dtype": "float64", "experiments": {"critical_scaling": {**SECTION, **section}}}
    (job,) = load_sweep(config).plans["critical_scaling"].jobs().values()
    return json.dumps(job.to_dict())


def job(spec_text: str, out: Path, socket: str | None, device: str = "cpu") -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k != SOCKET_ENV}
    if socket:
        env[SOCKET_ENV] = socket
    cmd = [sys.executable, "-m", "attnsweep.cli", "job", spec_text, "--out", str(out), "--device", device]
    return processes.start(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def children_of(pid: int) -> list[int]:
    """Live child processes of ``pid`` (Linux /proc)."""
    kids = []
    for status in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = status.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            kids.append(int(status.parent.name))
    return kids


class Server(NamedTuple):
    socket: str
    pid: int
    log: Path
    results: Path  # every test's tmp_path is inside it


def start_server(socket: str, results: Path, log: Path, idle: float = 120) -> subprocess.Popen:
    with log.open("a") as stream:
        return processes.start([sys.executable, "-m", "attnsweep.run.worker", socket, "--results", str(results),
                                 "--idle", str(idle)], stderr=stream)


def listening(path: str) -> bool:
    try:
        return stat.S_ISSOCK(os.stat(path).st_mode)
    except FileNotFoundError:
        return False


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A server as worker.smk starts one: its socket in a fresh mkdtemp directory. A stale file
    at the socket's path (a previous server's, say) does not stop it."""
    directory = tempfile.mkdtemp(prefix="attnsweep-worker-")
    socket = os.path.join(directory, "worker.sock")
    Path(socket).touch()
    results, log = tmp_path_factory.getbasetemp(), tmp_path_factory.mktemp("server-log") / "worker.log"
    proc = start_server(socket, results, log)
    deadline = time.monotonic() + processes.HANG_S
    while not listening(socket):
        assert proc.poll() is None and time.monotonic() < deadline, "server did not start"
        time.sleep(0.1)
    assert not os.stat(socket).st_mode & 0o077, "the socket is bound with umask 077"
    yield Server(socket, proc.pid, log, results)
    proc.terminate()
    proc.wait(timeout=processes.HANG_S)
    assert not os.path.exists(socket)
    os.rmdir(directory)


@pytest.mark.slow  # two processes a job, each importing torch
@pytest.mark.parametrize("experiment", BUILT_IN)
def test_server_store_equals_fresh_process(server: Server, tmp_path: Path, experiment: str) -> None:
    """Each experiment's tiny job (tests/tiny_configs) served warm and run in a fresh process, as on
    a SLURM node: the same store bit for bit. The warm server has imported every experiment and the
    fresh process only one; a choice that depends on what a process imported (cpu_paths' host key
    did) splits them, as test_slurm once found on sphere_clustering."""
    jobs = load_sweep(tiny(experiment)).plans[experiment].jobs()
    text = json.dumps(next(iter(jobs.values())).to_dict())
    warm, cold = job(text, tmp_path / "warm.zarr", server.socket), job(text, tmp_path / "cold.zarr", None)
    for proc in (warm, cold):
        _, err = proc.communicate(timeout=processes.HANG_S)
        assert proc.returncode == 0, err
    a, b = open_store(tmp_path / "warm.zarr").load(), open_store(tmp_path / "cold.zarr").load()
    assert a.data_vars and a.attrs["job"] == b.attrs["job"]
    for var in a.data_vars:
        np.testing.assert_array_equal(a[var].values, b[var].values, err_msg=var)


@pytest.mark.slow  # a collect with two reader processes, served and in a fresh process
def test_server_collect_equals_fresh_process(server: Server, tmp_path: Path) -> None:
    """`attnsweep collect` (the collect rule's command) served warm, its reader processes started
    from the served child, writes the sweep a fresh process writes, bit for bit; that it went to
    the server shows in a request the server refuses."""
    from helpers.workflow_runs import assert_same_store

    from attnsweep.run.job import run_job

    plan = load_sweep({"dtype": "float64", "experiments": {"critical_scaling": {
        **SECTION, "d": [6, 7], "wildcards": ["d"]}}}).plans["critical_scaling"]
    runs = [str(tmp_path / f"run{i}.zarr") for i in range(len(plan.jobs()))]
    for out, spec_ in zip(runs, plan.jobs().values()):
        run_job(spec_, out, device="cpu")

    def collect(out: Path, socket: str | None) -> subprocess.CompletedProcess:
        arguments = tmp_path / f"{out.stem}.json"  # as write_collect_arguments (workflow/rules/common.smk)
        arguments.write_text(json.dumps({"runs": runs, "out": str(out), "grid": plan.coords(), "points": None,
                                         "workers": 2, "stores_per_worker": 1}))
        env = {k: v for k, v in os.environ.items() if k != SOCKET_ENV} | ({SOCKET_ENV: socket} if socket else {})
        return processes.run([sys.executable, "-m", "attnsweep.cli", "collect", str(arguments)], env=env,
                             capture_output=True, text=True)

    for name, socket in (("warm", server.socket), ("cold", None)):
        done = collect(tmp_path / f"{name}.zarr", socket)
        assert done.returncode == 0, done.stderr
    assert_same_store(tmp_path / "warm.zarr", tmp_path / "cold.zarr")
    outside = Path(tempfile.mkdtemp())  # not under the server's results directory
    try:
        refused = collect(outside / "sweep.zarr", server.socket)
        assert refused.returncode == 2 and "refused by the worker: out:" in refused.stderr, refused.stderr
        assert list(outside.iterdir()) == []
    finally:
        shutil.rmtree(outside)


def test_server_job_output_reaches_client_log(server: Server, tmp_path: Path) -> None:
    proc = job(spec(), tmp_path / "x.zarr", server.socket)
    _, err = proc.communicate(timeout=processes.HANG_S)
    assert "critical_scaling" in err and "done in" in err


def test_failing_job_reports_status_and_message(server: Server, tmp_path: Path) -> None:
    """A job that fails in the child (its store cannot be written: a file stands where its folder
    should be) reports the child's status and one line, on any machine."""
    (tmp_path / "blocker").write_text("")
    out = tmp_path / "blocker" / "x.zarr"
    proc = job(spec(), out, server.socket)
    _, err = proc.communicate(timeout=processes.HANG_S)
    assert proc.returncode == 1, err
    assert "attnsweep: cannot write" in err and "Traceback" not in err, err
    assert not out.exists()


def test_killed_client_stops_its_child(server: Server, tmp_path: Path) -> None:
    out = tmp_path / "big.zarr"
    proc = job(spec(n=[768], d=[96], rho=[0.1, 0.3, 0.5, 0.7, 0.9], gamma=[1, 2, 4, 8], seeds=[0, 1, 2],
                    eta_method="hutchinson", probes=16), out, server.socket)
    while "critical_scaling" not in proc.stderr.readline():
        assert proc.poll() is None
    assert children_of(server.pid), "the job should run in a child of the server"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    # The child exits when its client's socket closes (attnsweep.run.worker); the guard only ends a hang.
    deadline = time.monotonic() + processes.HANG_S
    while children_of(server.pid):
        assert time.monotonic() < deadline, "the orphaned child kept running"
        time.sleep(0.05)
    assert not out.exists()
    assert all(p.name.startswith(".big.zarr.tmp-") or p.name == ".big.zarr.running" for p in tmp_path.iterdir())
    # The server still serves.
    again = job(spec(), tmp_path / "after.zarr", server.socket)
    again.communicate(timeout=processes.HANG_S)
    assert again.returncode == 0


def test_no_server_runs_in_process(tmp_path: Path) -> None:
    proc = job(spec(), tmp_path / "x.zarr", str(tmp_path / "absent.sock"))
    _, err = proc.communicate(timeout=processes.HANG_S)
    assert proc.returncode == 0, err
    assert (tmp_path / "x.zarr").is_file()  # the run store, one file


@pytest.mark.slow  # a server of its own (~6 s of preloading before it idles); the full suite's
def test_idle_server_exits(tmp_path: Path) -> None:
    socket = tmp_path / "idle.sock"
    proc = start_server(str(socket), tmp_path, tmp_path / "worker.log", idle=1)
    assert proc.wait(timeout=processes.HANG_S) == 0
    assert not socket.exists()


@pytest.mark.slow  # ~11 s (a figure drawn twice, each in its own interpreter); stores: the fast tier
def test_server_figure_equals_fresh_process(server: Server, tmp_path: Path) -> None:
    """`attnsweep aggregate figure` through the server draws the same PNG, byte for byte, as without one."""
    from attnsweep.reduce import aggregate

    store = tmp_path / "run.zarr"
    proc = job(spec(), store, None)
    assert proc.wait(timeout=processes.HANG_S) == 0, proc.stderr.read()
    sweep, summary = aggregate.collect([store], tmp_path / "sweep.zarr"), tmp_path / "summary.zarr"
    aggregate.reduce(sweep, summary)
    aggregate.boundary(sweep, summary, tmp_path / "boundary.csv", tmp_path / "boundary.zarr")
    procs = {}
    for name, socket in (("warm", server.socket), ("cold", None)):
        env = {k: v for k, v in os.environ.items() if k != SOCKET_ENV} | ({SOCKET_ENV: socket} if socket else {})
        step = {"draw": "finite_size", "params": {}, "summary_path": str(summary),
                "boundary_path": str(tmp_path / "boundary.zarr"),
                "png": str(tmp_path / f"{name}.png"), "pdf": str(tmp_path / f"{name}.pdf")}
        cmd = [sys.executable, "-m", "attnsweep.cli", "aggregate", "figure", json.dumps(step)]
        procs[name] = processes.start(cmd, env=env, stderr=subprocess.PIPE, text=True)
    for proc in procs.values():
        _, err = proc.communicate(timeout=processes.HANG_S)
        assert proc.returncode == 0, err
    assert (tmp_path / "warm.png").read_bytes() == (tmp_path / "cold.png").read_bytes()
    assert (tmp_path / "warm.pdf").stat().st_size > 1000


# --- a shared machine: who may connect, and what they may ask ---------------------------------


@pytest.fixture(scope="module")
def other_user():
    """A throw-away system user, as (uid, gid)."""
    if os.geteuid() != 0:
        pytest.skip("creating a second user needs root (CI runs as root)")
    if not shutil.which("useradd"):
        pytest.skip("creating a second user needs useradd")
    name = f"attnsweep-test-{uuid.uuid4().hex[:8]}"
    subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
                   check=True, capture_output=True)
    try:
        import pwd

        entry = pwd.getpwnam(name)
        yield entry.pw_uid, entry.pw_gid
    finally:
        subprocess.run(["userdel", name], capture_output=True)


def send_as(user: tuple[int, int] | None, socket: str, request: Any) -> str:
    """Send ``request`` as it stands to the server at ``socket``, from a forked child running as
    ``user`` (None: this user); the reply line, "closed" if the server hung up without one, or
    the name of the error connect() raised."""
    read, write = os.pipe()
    if os.fork() == 0:
        outcome = "child failed"
        try:
            os.close(read)
            if user is not None:
                os.setgroups([])
                os.setgid(user[1])
                os.setuid(user[0])
            null = os.open(os.devnull, os.O_WRONLY)
            with sockets.socket(sockets.AF_UNIX, sockets.SOCK_STREAM) as conn:
                conn.connect(socket)
                payload = json.dumps(request).encode()
                sockets.send_fds(conn, [len(payload).to_bytes(8, "little") + payload], [null, null])
                reply = b""
                while not reply.endswith(b"\n") and (chunk := conn.recv(4096)):
                    reply += chunk
            outcome = reply.decode().strip() or "closed"
        except (ConnectionResetError, BrokenPipeError):
            outcome = "closed"
        except BaseException as err:
            outcome = type(err).__name__
        finally:
            os.write(write, outcome.encode())
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as stream:
        outcome = stream.read().decode()
    os.wait()
    return outcome


def job_request(out: Path, cwd: Path) -> dict[str, Any]:
    """A well-formed simulate request, as `attnsweep job` sends it."""
    return {"spec": json.loads(spec()), "out": str(out), "device": "cpu", "threads": 1, "cwd": str(cwd)}


def test_request_paths_are_the_checked_ones_as_the_client_wrote_them(tmp_path: Path) -> None:
    """The served child works in the client's directory on the paths the check normalised: relative
    where the client wrote them so (a message names them as the run does), and never through a
    link's "..", which the kernel would resolve outside the results though the check saw inside."""
    outside = tmp_path / "outside"
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "link").symlink_to(outside)
    results = str(tmp_path / "results")
    checked = worker.check_request(job_request(Path("results/link/../runs/x.zarr"), tmp_path), results)
    assert checked["out"] == os.path.join("results", "runs", "x.zarr") and checked["cwd"] == str(tmp_path)
    absolute = worker.check_request(job_request(tmp_path / "results" / "x.zarr", tmp_path), results)
    assert absolute["out"] == str(tmp_path / "results" / "x.zarr")


def test_other_user_cannot_reach_the_socket(server: Server, other_user: tuple[int, int], tmp_path: Path) -> None:
    """The socket's directory is 0700: another user's connect() fails; the same request of ours runs."""
    request = job_request(tmp_path / "x.zarr", tmp_path)
    assert send_as(other_user, server.socket, request) == "PermissionError"
    assert not (tmp_path / "x.zarr").exists()
    assert send_as(None, server.socket, request) == "0"
    assert (tmp_path / "x.zarr").is_file()  # the run store, one file


def test_other_user_refused_by_peer_credentials(server: Server, other_user: tuple[int, int],
                                                tmp_path: Path) -> None:
    """With the directory and socket opened to everyone (a careless chmod), the server itself
    still serves no other uid (SO_PEERCRED) and says so in its log."""
    directory = os.path.dirname(server.socket)
    os.chmod(directory, 0o711)
    os.chmod(server.socket, 0o666)
    try:
        outcome = send_as(other_user, server.socket, job_request(tmp_path / "x.zarr", tmp_path))
    finally:
        os.chmod(server.socket, 0o600)
        os.chmod(directory, 0o700)
    assert outcome == "closed"
    assert list(tmp_path.iterdir()) == []
    assert f"uid {other_user[0]}" in server.log.read_text()


def malformed(tmp_path: Path, outside: Path) -> dict[str, Any]:
    """Requests the server must refuse, by what is wrong with them."""
    job = job_request(tmp_path / "x.zarr", tmp_path)
    step = {"step": "figure", "cwd": str(tmp_path),
            "args": {"draw": "finite_size", "params": {}, "summary_path": str(tmp_path / "summary.zarr"),
                     "boundary_path": str(tmp_path / "boundary.zarr"), "png": str(tmp_path / "f.png"),
                     "pdf": str(tmp_path / "f.pdf")}}
    reduce = {"step": "reduce", "cwd": str(tmp_path),
              "args": {"sweep_path": str(tmp_path / "sweep.zarr"), "out": str(tmp_path / "summary.zarr"),
                       "theory": [str(tmp_path / "t.zarr")]}}
    collect = {"step": "collect", "cwd": str(tmp_path),
               "args": {"runs": [str(tmp_path / "r.zarr")], "out": str(tmp_path / "s.zarr"), "grid": {"n": [16]},
                        "points": None, "workers": 1}}
    return {
        "out outside the results": {**job, "out": str(outside / "x.zarr")},
        "out escaping by ..": {**job, "out": os.path.relpath(outside / "x.zarr", tmp_path)},
        "out not a store": {**job, "out": str(tmp_path / "x.txt")},
        "cwd relative": {**job, "cwd": "results"},
        "an extra key": {**job, "shell": "true"},
        "a missing key": {k: v for k, v in job.items() if k != "threads"},
        "unknown device": {**job, "device": "gpu"},
        "threads not an integer": {**job, "threads": "4"},
        "spec of no experiment": {**job, "spec": {**job["spec"], "experiment": "nope"}},
        "spec with an extra key": {**job, "spec": {**job["spec"], "command": "true"}},
        "spec not an object": {**job, "spec": "x"},
        "not an object": [job],
        "unknown step": {**step, "step": "verify"},
        "step with an extra key": {**step, "out": str(tmp_path / "x.zarr")},
        "step with an extra argument": {**step, "args": {**step["args"], "dpi": "1"}},
        "step missing an argument": {**step, "args": {k: v for k, v in step["args"].items() if k != "pdf"}},
        "step writing outside": {**step, "args": {**step["args"], "png": str(outside / "f.png")}},
        "step argument of the wrong type": {**step, "args": {**step["args"], "draw": 3}},
        "step parameters not an object": {**step, "args": {**step["args"], "params": "n=16"}},
        "spec of an unknown step": {**job, "spec": {**job["spec"], "step": "shell"}},
        "theory stores outside the results": {**reduce, "args": {**reduce["args"], "theory": [str(outside / "t")]}},
        "theory stores not a list": {**reduce, "args": {**reduce["args"], "theory": str(tmp_path / "t")}},
        "collect writing outside": {**collect, "args": {**collect["args"], "out": str(outside / "s.zarr")}},
        "collect runs outside": {**collect, "args": {**collect["args"], "runs": [str(outside / "r.zarr")]}},
        "collect grid not a mapping of lists": {**collect, "args": {**collect["args"], "grid": {"n": 16}}},
        "collect workers not an integer": {**collect, "args": {**collect["args"], "workers": "2"}},
    }


@pytest.mark.parametrize("case", list(malformed(Path("/r"), Path("/o"))))
def test_malformed_request_refused(server: Server, tmp_path: Path, case: str) -> None:
    """A request that is not a well-formed job or step of the run is refused, before any fork,
    with one line to the client and status 2; nothing is written."""
    outside = Path(tempfile.mkdtemp())  # not under the server's results directory
    try:
        reply = send_as(None, server.socket, malformed(tmp_path, outside)[case])
        assert reply.startswith("2 refused by the worker: "), reply
        assert "\n" not in reply
        assert list(outside.iterdir()) == [] and list(tmp_path.iterdir()) == []
    finally:
        shutil.rmtree(outside)


def unsafe_directory(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> tuple[Path, Path]:
    """A directory that someone else could have made or may enter, as (the path a client is given,
    the real directory)."""
    real = tmp_path / "d"
    real.mkdir(mode=0o700)
    if kind == "world-writable":  # like /tmp, where the old predictable socket path was
        os.chmod(real, 0o1777)
    elif kind == "group-writable":
        os.chmod(real, 0o770)
    elif kind == "another user's":
        uid, gid = request.getfixturevalue("other_user")
        os.chown(real, uid, gid)
    else:
        (tmp_path / "link").symlink_to(real)
        return tmp_path / "link", real
    return real, real


@pytest.mark.parametrize("kind", ["world-writable", "group-writable", "another user's", "symlink"])
def test_client_ignores_a_socket_others_could_control(kind: str, tmp_path: Path, request: pytest.FixtureRequest,
                                                      capfd: pytest.CaptureFixture) -> None:
    """A listening socket in a directory that is not the user's own and private is not used: no
    connection, one line saying why, and the client runs the job itself (status None)."""
    given, real = unsafe_directory(kind, tmp_path, request)
    sockets.setdefaulttimeout(5)  # a client that did connect would wait for a reply forever
    try:
        with sockets.socket(sockets.AF_UNIX, sockets.SOCK_STREAM) as listener:
            listener.bind(str(real / "worker.sock"))
            listener.listen(1)
            listener.setblocking(False)
            assert worker.submit(str(given / "worker.sock"), job_request(tmp_path / "x.zarr", tmp_path)) is None
            with pytest.raises(BlockingIOError):
                listener.accept()
    finally:
        sockets.setdefaulttimeout(None)
    assert "not using the worker" in capfd.readouterr().err


def test_run_with_a_foreign_socket_completes_in_process(tmp_path: Path) -> None:
    """`attnsweep job` pointed at someone's socket in a world-writable directory: the job runs in
    the client's own process to a complete store, and the socket sees no connection."""
    directory = tmp_path / "shared"
    directory.mkdir()
    os.chmod(directory, 0o1777)
    with sockets.socket(sockets.AF_UNIX, sockets.SOCK_STREAM) as listener:
        listener.bind(str(directory / "attnsweep-worker-1.sock"))
        listener.listen(1)
        listener.setblocking(False)
        proc = job(spec(), tmp_path / "x.zarr", str(directory / "attnsweep-worker-1.sock"))
        _, err = proc.communicate(timeout=processes.HANG_S)
        with pytest.raises(BlockingIOError):
            listener.accept()
    assert proc.returncode == 0, err
    assert "not using the worker" in err
    assert open_store(tmp_path / "x.zarr").attrs["experiment"] == "critical_scaling"


@pytest.mark.parametrize("kind", ["world-writable", "group-writable", "symlink"])
def test_server_refuses_a_directory_others_could_control(kind: str, tmp_path: Path,
                                                         request: pytest.FixtureRequest) -> None:
    """The server will not listen where others could take or reach its socket: one line, exit 1."""
    given, _ = unsafe_directory(kind, tmp_path, request)
    log = tmp_path / "worker.log"
    proc = start_server(str(given / "worker.sock"), tmp_path, log, idle=1)  # one that serves exits 0
    assert proc.wait(timeout=processes.HANG_S) == 1
    assert len(log.read_text().splitlines()) == 1 and "not serving" in log.read_text()
    assert not (given / "worker.sock").exists()


@pytest.mark.slow  # idem
def test_server_ends_with_the_run_that_started_it(tmp_path: Path) -> None:
    """kill -9 of the run (the server's parent, as worker.smk starts it) stops the server at once,
    through its cleanup (socket removed), not ``idle`` seconds later."""
    socket, log = tmp_path / "s.sock", tmp_path / "worker.log"
    run = f"""
import subprocess, sys, os, time
with open({str(log)!r}, "a") as log:
    server = subprocess.Popen([sys.executable, "-m", "attnsweep.run.worker", {str(socket)!r}, "--results",
                               {str(tmp_path)!r}, "--idle", "{2 * processes.HANG_S}", "--parent", str(os.getpid())],
                              stderr=log)
print(server.pid, flush=True)
time.sleep({processes.HANG_S})
"""
    parent = processes.start([sys.executable, "-c", run], stdout=subprocess.PIPE, text=True)
    server = psutil.Process(int(parent.stdout.readline()))
    deadline = time.monotonic() + processes.HANG_S
    while not listening(str(socket)):
        assert server.is_running() and time.monotonic() < deadline, log.read_text()
        time.sleep(0.1)
    parent.kill()
    parent.wait()
    server.wait(timeout=processes.HANG_S)  # the guard ends a hang, well before the idle timeout
    assert not socket.exists()
    assert "stopped after serving 0 requests" in log.read_text()
