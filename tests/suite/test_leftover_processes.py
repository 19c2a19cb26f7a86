"""scripts/leftover-processes.py, CI's last step: a process that names a directory in its command
line or works in it, or a tests' daemon started since CI began, fails it, named by pid; once the
process has ended, it passes. Its own shells, which name the directory too, never count.

The checker runs here as CI runs it, a separate interpreter, and with ``-S`` (no site-packages):
it needs nothing but the standard library and /proc. A process from ``processes.start`` has
exec'd its command when ``Popen`` returns (CPython waits for the exec to succeed), so the
checker sees its real command line, not the forked copy of pytest's.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import processes

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "leftover-processes.py"
SLEEPER = [sys.executable, "-S", "-c", "import time; time.sleep(600)"]  # ended by each test long before

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="the checker reads /proc (Linux)")


def check(clone: Path, *args: str, cwd: Path | str = "/") -> subprocess.CompletedProcess:
    return processes.run([sys.executable, "-S", str(SCRIPT), str(clone), *args], cwd=cwd,
                         capture_output=True, text=True)


# Where a test is about the clone's name only: no daemon counts (a real slurmd or munged of the
# SLURM tests, which may run beside these, would otherwise fail the check).
NO_DAEMON = ("--daemon", "no-such-daemon")


def named(done: subprocess.CompletedProcess) -> set[int]:
    """The pids a failing check names, one `PID COMMAND LINE` line each after its header."""
    return {int(line.split()[0]) for line in done.stderr.splitlines()[1:]}


def test_a_process_naming_the_clone_fails_the_check_until_it_ends(tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    (clone / "sub").mkdir(parents=True)
    by_argument = processes.start([*SLEEPER, str(clone / "Snakefile")], cwd="/")
    by_cwd = processes.start(SLEEPER, cwd=clone / "sub")
    # A longer name that starts the same is another directory, not the clone.
    beside = processes.start([*SLEEPER, f"{clone}-2/Snakefile"], cwd="/")

    done = check(clone, *NO_DAEMON, "--grace", "0")
    assert done.returncode == 1, done
    assert named(done) == {by_argument.pid, by_cwd.pid}, done.stderr
    assert f"{by_argument.pid} {sys.executable} -S -c import time; time.sleep(600) {clone}/Snakefile" in done.stderr

    for proc in (by_argument, by_cwd):
        processes.end(proc)
    done = check(clone, *NO_DAEMON)  # the default grace: passes at once, as nothing is left to wait for
    assert done.returncode == 0, done
    assert beside.poll() is None  # still running, and not flagged
    processes.end(beside)


def test_its_own_shells_are_not_flagged(tmp_path: Path) -> None:
    """The checker and the shell that runs it both work in the clone and the shell's command line
    names it (as .ci/run's does); neither counts. `; exit $?` keeps bash from exec'ing the checker,
    so the shell is a parent, not replaced."""
    clone = tmp_path / "clone"
    clone.mkdir()
    script = f"{sys.executable} -S {SCRIPT} {clone} {' '.join(NO_DAEMON)} --grace 0; exit $?"
    done = processes.run(["bash", "-c", script], cwd=clone, capture_output=True, text=True)
    assert done.returncode == 0, done


def test_a_daemon_started_since_ci_began_fails_the_check(tmp_path: Path) -> None:
    """A process by a daemon's name (/proc/PID/comm) fails the check when it started after the
    --since-pid process, whatever its command line names; one that started no later does not. The
    daemon here is `sleep` under a name of its own, so that the test's verdict does not depend on
    a real slurmd or munged of another test or of the machine."""
    clone = tmp_path / "clone"
    clone.mkdir()
    (tmp_path / "bin").mkdir()
    daemon_binary = tmp_path / "bin" / "fakedaemon-ci"  # within the 15 characters of a comm
    shutil.copy(shutil.which("sleep"), daemon_binary)
    daemon = processes.start([str(daemon_binary), "600"], cwd="/")
    comm = Path(f"/proc/{daemon.pid}/comm")
    deadline = time.monotonic() + processes.HANG_S  # the fork runs as python until its exec
    while comm.read_text().strip() != daemon_binary.name:
        assert time.monotonic() < deadline, comm.read_text()
        time.sleep(0.01)

    done = check(clone, "--daemon", daemon_binary.name, "--since-pid", str(os.getpid()), "--grace", "0")
    assert done.returncode == 1 and named(done) == {daemon.pid}, done
    # Started no later than the --since-pid process (itself): a daemon of the site, not of CI.
    assert check(clone, "--daemon", daemon_binary.name, "--since-pid", str(daemon.pid), "--grace", "0").returncode == 0
    # Not one of the default daemons (SLURM's and munge's; a real one, of the SLURM tests beside
    # this one, may be flagged here, so only this process's absence is asserted).
    assert daemon.pid not in named(check(clone, "--since-pid", str(os.getpid()), "--grace", "0"))

    processes.end(daemon)
    done = check(clone, "--daemon", daemon_binary.name, "--since-pid", str(os.getpid()))
    assert done.returncode == 0, done
