"""The suite's own process hygiene (tests/helpers/processes.py, tests/conftest.py): a process a test leaves
running fails the session and is ended, however it left (a child, an orphaned grandchild); a
process a test's body started through ``processes.start`` is ended with its children when the test
fails; ``processes.run`` ends a command's children when the command returns.

Truth: the process table (psutil) after an inner pytest session run on a test file written here,
with this suite's conftest as a plugin, in one process and under xdist."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import psutil
import pytest
from helpers import processes

TESTS = Path(__file__).resolve().parents[1]  # conftest.py and helpers/
# Each sleeper is named by a duration no other process uses; they never end on their own in a run.
LEAKY = '''
import subprocess

from helpers import processes


def test_leaves_a_child():
    subprocess.Popen(["sleep", "{child}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def test_leaves_an_orphan():
    subprocess.run(["sh", "-c", "sleep {orphan} >/dev/null 2>&1 & exit 0"], check=True)  # its parent exits at once


def test_fails_with_a_started_group():
    processes.start(["sh", "-c", "sleep {started} & sleep {started}"], stdout=subprocess.DEVNULL)
    assert False
'''


def sleepers(seconds: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        if proc.info["cmdline"] == ["sleep", seconds] and proc.info["status"] != psutil.STATUS_ZOMBIE:
            found.append(proc)
    return found


# The xdist case starts a session of two workers (~20 s): the full suite runs it, the fast tier the other.
XDIST = pytest.param(["-n", "2"], marks=pytest.mark.slow)


@pytest.mark.parametrize("workers", [[], XDIST], ids=["one process", "xdist"])
def test_a_leftover_process_fails_the_session_and_is_ended(tmp_path: Path, workers: list[str]) -> None:
    tag = f"{os.getpid() % 1000}{len(workers)}"
    child, orphan, started = (f"7{tag}1", f"7{tag}2", f"7{tag}3")
    (tmp_path / "test_leaky.py").write_text(LEAKY.format(child=child, orphan=orphan, started=started))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    env.pop("CI", None)  # the inner session's skips are not this one's
    done = processes.run([sys.executable, "-m", "pytest", "-p", "conftest", "-p", "no:cacheprovider", "-q",
                          "--rootdir", str(tmp_path), *workers, str(tmp_path / "test_leaky.py")],
                         cwd=tmp_path, env=env, capture_output=True, text=True)
    said = done.stdout + done.stderr
    assert done.returncode == pytest.ExitCode.TESTS_FAILED, said
    assert "1 failed, 2 passed" in said, said
    summary = said[said.index("processes left running by the tests"):]
    assert f"sleep {child}" in summary and f"sleep {orphan}" in summary, summary
    assert f"sleep {started}" not in summary, summary  # ended with the test that started it
    deadline = time.monotonic() + processes.HANG_S  # SIGKILL is sent; the kernel ends them at once
    while alive := [p for s in (child, orphan, started) for p in sleepers(s)]:
        assert time.monotonic() < deadline, alive
        time.sleep(0.05)


def test_run_ends_what_the_command_left_in_its_group() -> None:
    seconds = f"8{os.getpid() % 1000}"
    command = ["sh", "-c", f"sleep {seconds} >/dev/null 2>&1 & echo started"]
    done = processes.run(command, capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout == "started\n"
    deadline = time.monotonic() + processes.HANG_S
    while alive := sleepers(seconds):
        assert time.monotonic() < deadline, alive
        time.sleep(0.05)
