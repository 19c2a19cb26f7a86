#!/usr/bin/env python3
"""Fail, naming each one, if processes from a clone still run: CI's last step (.ci/run).

    usage: scripts/leftover-processes.py CLONE [--since-pid PID] [--daemon NAME ...] [--grace SECONDS]

Left over is a live process (not a zombie, not a kernel thread) that
- names CLONE, or a path inside it, in its command line, or has its working directory there
  (a snakemake, a job, the warm worker, a SLURM job step's snakemake of the tests' cluster), or
- is one of the daemons the tests start (/proc/PID/comm: slurmctld, slurmd, slurmstepd, munged by
  default; --daemon replaces the list) and started after the process --since-pid (CI passes its
  own shell): a site's munge or SLURM that ran before CI began is not flagged.
This process and its ancestors (the shells that run it) are never flagged. Those found are given
--grace seconds to exit, then each one left is printed as `PID COMMAND LINE` and the exit status
is 1 (0: nothing left). It reads /proc (Linux) with the standard library only: it runs after the
tests, whether or not the venv works.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from pathlib import Path

DAEMONS = ("slurmctld", "slurmd", "slurmstepd", "munged")
# A process that is ending leaves in milliseconds; the slowest the tests stop is a SLURM job step,
# which slurmstepd kills KillWait = 5 s (scripts/slurm-local-start.sh) after SIGTERM. 10 s is
# twice that; what is left over runs on for minutes (the warm worker's idle limit is 600 s).
GRACE_S = 10.0


def stat(pid: int) -> tuple[str, int, int] | None:
    """(state, parent pid, start time in clock ticks after boot) of ``pid``; None if it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()  # the name, in parentheses, may hold spaces
    return fields[0], int(fields[1]), int(fields[19])


def ancestors() -> set[int]:
    """This process and every process above it."""
    pids, pid = set(), os.getpid()
    while pid > 0 and pid not in pids:
        pids.add(pid)
        info = stat(pid)
        pid = info[1] if info else 0
    return pids


def read(path: str) -> str:
    try:
        return Path(path).read_text(errors="replace")
    except OSError:
        return ""


def leftovers(clone: str, since: int | None, daemons: tuple[str, ...]) -> list[tuple[int, str]]:
    """``(pid, command line)`` of every process left over (the module docstring says which)."""
    roots = {os.path.abspath(clone), os.path.realpath(clone)}
    # CLONE itself or a path inside it, not a longer name that starts the same (CLONE-2).
    names = re.compile("|".join(re.escape(root) for root in roots) + r"(?![^/\s'\":;,=)])")
    mine = ancestors()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in mine:
            continue
        pid = int(entry)
        info = stat(pid)
        raw = read(f"/proc/{pid}/cmdline")
        if info is None or info[0] in "ZX" or not raw:  # gone, a zombie, or a kernel thread
            continue
        command = raw.rstrip("\0").replace("\0", " ")
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:  # gone, or another user's (without root)
            cwd = ""
        named = names.search(command) or any(cwd == root or cwd.startswith(root + "/") for root in roots)
        daemon = read(f"/proc/{pid}/comm").strip() in daemons and (since is None or info[2] > since)
        if named or daemon:
            found.append((pid, command))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("clone", help="the clone's directory")
    parser.add_argument("--since-pid", type=int, help="flag daemons started after this process only")
    parser.add_argument("--daemon", action="append", help=f"a daemon's name (default: {', '.join(DAEMONS)})")
    parser.add_argument("--grace", type=float, default=GRACE_S, help="seconds those found have to exit")
    args = parser.parse_args(argv)
    since = None
    if args.since_pid is not None:
        info = stat(args.since_pid)
        if info is None:
            parser.error(f"--since-pid {args.since_pid}: no such process")
        since = info[2]
    daemons = tuple(args.daemon or DAEMONS)
    deadline = time.monotonic() + args.grace
    found = leftovers(args.clone, since, daemons)
    while found and time.monotonic() < deadline:
        time.sleep(0.2)
        found = leftovers(args.clone, since, daemons)
    if not found:
        print(f"leftover-processes: nothing from {args.clone} runs")
        return 0
    print(f"leftover-processes: {len(found)} still running from {args.clone} (after {args.grace:g} s):",
          file=sys.stderr)
    for pid, command in found:
        print(f"{pid} {command[:500]}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
