"""Fixtures shared across test modules, and the CI rule on skips."""

from __future__ import annotations

import os
import shutil
import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from helpers import processes
from helpers.project import refine_command, tiny

#: Tests that skip under CI (the environment variable CI set, as `.ci/run` runs): (nodeid, reason).
SKIPPED: list[tuple[str, str]] = []
#: Processes the tests started and left running (tests/helpers/processes.py), found at the end of the session.
LEFTOVERS: list[str] = []


def made_once(tmp_path_factory: pytest.TempPathFactory, name: str, make: Callable[[Path], None]) -> Path:
    """The directory ``name`` that ``make`` fills, made once per test session however many xdist
    workers ask: the first takes a file lock and makes it, the others wait for it and share it
    (pytest-xdist's recipe for a session fixture run once); a worker whose ``make`` failed leaves
    it to the next to try afresh."""
    from filelock import FileLock

    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):  # each worker's base is a folder of the session's
        root = root.parent
    path, done = root / name, root / f"{name}.done"
    # A hang guard: a tiny run or refinement takes under a minute (processes.HANG_S says why it is ten).
    with FileLock(root / f"{name}.lock", timeout=processes.HANG_S):
        if not done.exists():
            shutil.rmtree(path, ignore_errors=True)
            path.mkdir()
            make(path)
            done.touch()
    return path


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """``tiny_run(experiment)``: the directory of one uninterrupted Snakemake run of the tiny
    config, figures included, made on first use and shared read-only by every test after it."""
    from helpers.workflow_runs import prepare, run_ok

    def run(experiment: str) -> Path:
        make = lambda workdir: run_ok(prepare(workdir, tiny(experiment)), name="reference")
        return made_once(tmp_path_factory, f"tiny-{experiment}", make)

    return run


@pytest.fixture
def one_torch_thread() -> Iterator[None]:
    """torch limited to one intra-op thread for the test, restored after it."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def tiny_refine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The directory of one uninterrupted local refinement of tests/tiny_configs/refine.yaml
    (one core), shared read-only by the refinement and SLURM suites."""

    def make(workdir: Path) -> None:
        done = processes.run(refine_command(workdir, "--cores", "1"), cwd=workdir, capture_output=True, text=True)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    return made_once(tmp_path_factory, "refine-reference", make)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The SLURM module first: it is the longest (its sweeps wait on SLURM's polls) and gains most
    from running beside the rest; then the modules with slow tests, the fast ones last.
    ``pytest -n 3 --dist loadfile`` hands files out in this order (:func:`pytest_configure` turns
    off xdist's own reordering, by count of tests, which put the SLURM module last but one), so
    the last files, which decide how long one worker waits for the other at the end, are seconds
    long, not minutes."""
    slow = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: (item.path.name != "test_slurm.py", item.path not in slow))


# ------------------------------------------------------------------ CI: only GPU tests may skip


def in_ci() -> bool:
    """CI is set to anything but empty, 0 or false (CI services set CI=true)."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Under CI, record every skip of a test not marked ``gpu`` (a skip in setup or in the call)."""
    if in_ci() and report.skipped and "gpu" not in report.keywords:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        SKIPPED.append((report.nodeid, reason))


def pytest_collectreport(report: pytest.CollectReport) -> None:
    """Under CI, a module skipped whole at collection (``allow_module_level``) counts as well."""
    if in_ci() and report.skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        SKIPPED.append((report.nodeid, reason))


def pytest_configure(config: pytest.Config) -> None:
    """Adopt orphaned descendants (tests/helpers/processes.py), so that the session's end sees them all.

    Give the tests' processes SIGINT as a terminal's user has it: a runner that started pytest with
    SIGINT ignored (a script's background job, ``pytest ... &``) passes the ignore on through every
    exec, and the tests of Ctrl-C would signal processes that cannot hear it (a handler, unlike an
    ignore, is reset to the default by exec).

    And give each xdist worker's torch its share of the cores, not one thread per core: with every
    worker's threads on every core, torch's threads wait on each other at each operation (a tiny
    mixture_training job on 2 cores beside the other worker's torch: 0.34 s on one thread, 1.7-1.9 s
    on two). The processes the tests start choose their own threads, as in a user's run."""
    processes.adopt_orphans()
    if hasattr(config.option, "loadscopereorder"):  # pytest-xdist: keep pytest_collection_modifyitems' order
        config.option.loadscopereorder = False
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))
    if workers and os.environ.get("PYTEST_XDIST_WORKER"):
        import torch

        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        torch.set_num_threads(max(1, cores // workers))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    """End every process the test's body started (tests/helpers/processes.py), whether it passed or failed."""
    first = len(processes.STARTED)
    try:
        return (yield)
    finally:
        processes.end_since(first)


def under_xdist_controller(config: pytest.Config) -> bool:
    return config.pluginmanager.has_plugin("dsession")


@pytest.hookimpl(trylast=True)  # after the runner's own sessionfinish has torn down every fixture
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the session if a test left a process running (each one is ended and named), and,
    under CI, if a test other than the CUDA tests skipped: the machine has root and no GPU
    (`.ci/run`), so only tests marked ``gpu`` may skip there."""
    config = session.config
    if not under_xdist_controller(config):  # xdist workers check their own descendants
        left = processes.leftovers()
        if hasattr(config, "workerinput"):
            config.workeroutput["leftovers"] = left
        else:
            LEFTOVERS.extend(left)
    if (SKIPPED or LEFTOVERS) and exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_testnodedown(node, error) -> None:
    """Under xdist: the processes a worker found left over at its end."""
    LEFTOVERS.extend(getattr(node, "workeroutput", {}).get("leftovers", []))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if SKIPPED:
        terminalreporter.section("skipped under CI (only tests marked gpu may skip)", red=True)
        for nodeid, reason in SKIPPED:
            terminalreporter.line(f"{nodeid}: {reason}")
    if LEFTOVERS:
        terminalreporter.section("processes left running by the tests (ended now)", red=True)
        for line in LEFTOVERS:
            terminalreporter.line(line)
