"""The running marker beside a store being computed: ``.NAME.zarr.running``, holding the host, the
pid and the start time of the job's process, removed when the job ends however it ends. A store
appears only when whole (:mod:`attnsweep.stores.io`), so the marker is what tells a running or
killed job from one not started (:mod:`attnsweep.status`)."""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path


def marker_path(store: Path) -> Path:
    """The marker of ``store``: a hidden sibling, so that globs of stores never see it."""
    return store.with_name(f".{store.name}.running")


@contextmanager
def running_marker(store: str | Path) -> Iterator[None]:
    """Mark ``store`` as being computed by this process until the block ends, however it ends."""
    marker = marker_path(Path(store))
    try:
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text(json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "started": time.time()}))
    except OSError as err:  # the store could not be written either: say so before computing
        from attnsweep.stores.io import StoreWriteError  # heavy (xarray, zarr): the job client stays light

        with suppress(OSError):  # a marker begun on a full disk; nothing to undo when read-only
            marker.unlink()
        raise StoreWriteError(store, err) from err
    try:
        yield
    finally:
        marker.unlink(missing_ok=True)
