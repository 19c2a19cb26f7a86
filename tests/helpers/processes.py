"""Processes the tests start, and the check that none outlives the session.

Every command a test runs leads a process group of its own (``start_new_session``), so that one
``killpg`` ends it with every child still in its group: snakemake's jobs, the warm fork server
and its children, the rounds of ``attnsweep refine``. ``run`` ends the group whether the command
returned, timed out or the test failed; ``end`` does the same for a ``start``ed process, and
every process a test's body ``start``ed is ended after it, passed or failed (``STARTED``,
tests/conftest.py).

A process that leaves the group (a daemon's double fork, ``setsid``) escapes ``killpg``. For
those, :func:`adopt_orphans` makes the pytest process a child subreaper (Linux ``prctl``): an
orphaned descendant is re-parented to it instead of to PID 1, so :func:`leftovers` at the end of
the session sees every process the tests started and did not end, however deep.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys

import psutil

PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h
# Every wait of a test is for an event (a command's exit, a file, a line of output); its deadline
# only ends a hang. The longest single command outside the SLURM module (which has its own guard),
# a snakemake run or refinement of a tiny config, takes under a minute on 2 loaded cores (the
# longest test, four killed runs and a resume, 72 s in all); ten minutes is over ten times that.
HANG_S = 600.0
# Children of the pytest process that belong to it, not to a test, and exit with it: the helpers
# of multiprocessing's forkserver and resource tracker (started by in-process calls of collect).
OWN_HELPERS = ("from multiprocessing.forkserver import main", "from multiprocessing.resource_tracker import main")


#: Every process ``start`` made, in order; conftest ends those a test's body made when it ends.
STARTED: list[subprocess.Popen] = []


def start(cmd: list[str], **kwargs) -> subprocess.Popen:
    """``subprocess.Popen`` as the leader of a new session and process group."""
    proc = subprocess.Popen(cmd, start_new_session=True, **kwargs)
    STARTED.append(proc)
    return proc


def end(proc: subprocess.Popen) -> None:
    """SIGKILL to the process group that ``proc`` leads (it and every child still in it); wait
    until each of them is gone, not only ``proc``: a signal is delivered when its process is next
    scheduled, and on loaded cores a killed child may still run when the session's check looks."""
    with contextlib.suppress(ProcessLookupError):  # the group is empty already
        os.killpg(proc.pid, signal.SIGKILL)
    members = []
    for child in psutil.Process().children(recursive=True):  # orphans come here (adopt_orphans)
        with contextlib.suppress(psutil.NoSuchProcess, ProcessLookupError):
            if child.pid != proc.pid and os.getpgid(child.pid) == proc.pid:
                members.append(child)
    proc.wait()
    psutil.wait_procs(members, timeout=HANG_S)  # reaps those that are this process's children


def run(cmd: list[str], *, timeout: float = HANG_S, input: str | bytes | None = None, check: bool = False,
        capture_output: bool = False, **kwargs) -> subprocess.CompletedProcess:
    """``subprocess.run`` in a process group of its own, ended with all its children when the
    command returns, fails its ``timeout`` (a hang guard: ``TimeoutExpired`` as from
    subprocess.run) or the test is interrupted."""
    if capture_output:
        kwargs.update(stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if input is not None:
        kwargs["stdin"] = subprocess.PIPE
    proc = subprocess.Popen(cmd, start_new_session=True, **kwargs)
    try:
        stdout, stderr = proc.communicate(input, timeout=timeout)
    finally:
        end(proc)
    done = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    if check:
        done.check_returncode()
    return done


def end_since(first: int) -> None:
    """End every process ``start`` made from ``STARTED[first]`` on, and forget them."""
    for proc in STARTED[first:]:
        end(proc)
    del STARTED[first:]


def adopt_orphans() -> bool:
    """Make this process the subreaper of its descendants (Linux); False where that is not possible."""
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0


def leftovers() -> list[str]:
    """Live descendants of this process besides its own helpers, each ended here and named
    ``PID command line``; finished ones (zombies adopted as orphans) are reaped."""
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            if child.status() == psutil.STATUS_ZOMBIE:
                if child.ppid() == os.getpid():
                    os.waitpid(child.pid, os.WNOHANG)
                continue
            command = " ".join(child.cmdline())
            if child.ppid() == os.getpid() and any(helper in command for helper in OWN_HELPERS):
                continue
            child.kill()
        except (psutil.NoSuchProcess, ChildProcessError):
            continue
        found.append(f"{child.pid} {command[:200]}")
    return found
