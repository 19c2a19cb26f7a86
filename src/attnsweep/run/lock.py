"""One run at a time per results directory, whatever the working directory.

Snakemake's own lock lives in the working directory's ``.snakemake/``, so two working
directories whose configs name one ``results:`` both compute every job and collide on its
stores. :func:`claim` takes an exclusive ``flock`` on ``RESULTS/.attnsweep.run.lock`` for the life
of the process: the kernel drops it on any exit, ``kill -9`` included, so it never goes stale.
It guards runs on one host (``flock`` over NFS depends on the server).
"""

from __future__ import annotations

import fcntl
import os
import socket
from pathlib import Path
from typing import IO

from attnsweep.errors import ConfigError


def claim(results: str | Path) -> IO[str]:
    """Lock ``results`` for this process; keep the returned file open for as long as it runs."""
    path = Path(results, ".attnsweep.run.lock")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(path, "a+")  # noqa: SIM115  (held open as the lock: the caller keeps it)
    except OSError as err:
        raise ConfigError("results", f"cannot write {path.parent}: {err.strerror}") from None
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "another run"
        handle.close()
        raise ConfigError("results", f"{path.parent.resolve()} is in use by {holder}: wait for it, "
                                     "or give this run another results directory") from None
    try:  # who holds it, for the message of a refused run; the lock works without it
        handle.seek(0)
        handle.truncate()
        handle.write(f"snakemake pid {os.getpid()} on {socket.gethostname()} in {os.getcwd()}\n")
        handle.flush()
    except OSError:
        pass
    return handle


_HELD: dict[Path, IO[str]] = {}


def hold(results: str | Path) -> None:
    """:func:`claim` ``results`` for the rest of this process (a Snakemake run's onstart)."""
    key = Path(results).resolve()
    if key not in _HELD:
        _HELD[key] = claim(results)
