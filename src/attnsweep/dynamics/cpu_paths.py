"""Which implementation of an engine primitive runs on this host's CPU: numpy's or torch's.

Their order of speed depends on the CPU: numpy's SIMD float64 exponential is dispatched for
AVX-512, where it is 2.6x torch's, while torch's (vectorised for AVX2 and AVX-512 alike) is 2.3x
numpy's on an AVX2 CPU (benchmarks/RESULTS.md, "Issue 32"). So each primitive is timed on the
host, both ways, at the engines' size (a chunk of 64 systems of 32 x 32, one thread: the chunks
run single-threaded side by side), and the faster is taken. Numpy's and torch's results differ in
the last bits, and a result must not depend on how a sweep is cut into jobs or which process runs
a job, so the choice is made once per host and kept in a file that every later process reads:
the first process to finish timing writes it, any other that timed at the same moment reads the
first one's file and discards its own. Timing all of them takes ~0.05 s, once.

The file is ``cpu-paths-KEY.json`` in ``$ATTNSWEEP_CACHE`` (default ``$XDG_CACHE_HOME/attnsweep``,
else ``~/.cache/attnsweep``), KEY a hash of what decides the candidates' speed (:func:`dispatch`).
``ATTNSWEEP_CPU_PATH=numpy`` or ``=torch`` forces one path for every primitive (benchmarks,
tests), and is then recorded as the choice.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
import os
import platform
import tempfile
import threading
import timeit
from pathlib import Path

import numpy as np
import torch
from threadpoolctl import threadpool_info, threadpool_limits

try:
    from numpy._core._multiarray_umath import __cpu_features__ as features
except ImportError:  # numpy < 2
    from numpy.core._multiarray_umath import __cpu_features__ as features

from attnsweep.errors import ConfigError

PRIMITIVES = ("bmm", "exp", "count")
DTYPES = ("float32", "float64")
FORCE = "ATTNSWEEP_CPU_PATH"
SHAPE = (64, 32, 32)  # a chunk of systems of n = d = 32, the default configs' size
log = logging.getLogger(__name__)
_DECIDING = threading.Lock()


def path(primitive: str, dtype: torch.dtype) -> str:
    """``"numpy"`` or ``"torch"``: the implementation of ``primitive`` for ``dtype`` on this host."""
    return choices()[f"{primitive}/{str(dtype).removeprefix('torch.')}"]


def choices() -> dict[str, str]:
    """Every primitive's path for each dtype on this host, as ``{"exp/float64": "torch", ...}``;
    the first call decides (the engines' chunk threads wait for it: the timing runs alone)."""
    with _DECIDING:
        return _choices()


def consulted() -> bool:
    """Whether this process has decided its paths (a dynamics engine ran on the CPU)."""
    return _choices.cache_info().currsize > 0


def forget() -> None:
    """Decide again at the next call (tests that force a path, or point the cache elsewhere)."""
    _choices.cache_clear()


@functools.cache
def _choices() -> dict[str, str]:
    forced = os.environ.get(FORCE, "")
    if forced:
        if forced not in ("numpy", "torch"):
            raise ConfigError(FORCE, f"{forced!r} is not numpy or torch (leave it unset to time this CPU)")
        return {f"{p}/{d}": forced for p in PRIMITIVES for d in DTYPES}
    file = cache_file()
    try:
        return read(file)
    except FileNotFoundError:
        pass
    record = {**dispatch(), "paths": measure()}
    try:
        keep(file, record)
    except OSError as err:  # a read-only home, say: this process's own timing, which others may not share
        log.warning("cannot keep the CPU paths in %s (%s): this process times the CPU on its own", file, err)
        return record["paths"]
    return read(file)


def read(file: Path) -> dict[str, str]:
    """The paths kept in ``file``; a damaged file is a ConfigError that names it."""
    text = file.read_text()
    try:
        paths = json.loads(text)["paths"]
        if set(paths) != {f"{p}/{d}" for p in PRIMITIVES for d in DTYPES} or set(paths.values()) - {"numpy", "torch"}:
            raise ValueError("not one path of numpy or torch per primitive and dtype")
    except (ValueError, KeyError, TypeError) as err:
        raise ConfigError(str(file), f"damaged ({err}): delete it, and the next job times this CPU again") from None
    return paths


def cache_file() -> Path:
    root = os.environ.get("ATTNSWEEP_CACHE") or Path(
        os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "attnsweep"
    identity = json.dumps(dispatch(), sort_keys=True)
    return Path(root) / f"cpu-paths-{hashlib.sha256(identity.encode()).hexdigest()[:16]}.json"


@functools.cache
def dispatch() -> dict[str, str]:
    """What decides the speed of the candidates on this host: its name and CPU, numpy's and
    torch's versions and the vector code each dispatches to (numpy's enabled SIMD features,
    torch's CPU capability; ``NPY_DISABLE_CPU_FEATURES`` and ``ATEN_CPU_CAPABILITY`` change them),
    and OpenBLAS's kernel set (``OPENBLAS_CORETYPE``). Each distinct BLAS once: a process that has
    imported scipy holds a second copy of the same OpenBLAS, and its key must not differ for that
    (it did, and two processes timed apart could take different paths and differ in the last bits)."""
    blas = sorted({f"{i['internal_api']} {i.get('architecture')}" for i in threadpool_info()
                   if i["user_api"] == "blas"})
    return {"host": platform.node(), "cpu": cpu_model(), "numpy": np.__version__, "torch": torch.__version__,
            "numpy_simd": " ".join(sorted(name for name, on in features.items() if on)),  # the CPU's
            # numpy's dispatch skips these (the list above does not show it)
            "numpy_disabled": os.environ.get("NPY_DISABLE_CPU_FEATURES", ""),
            "torch_capability": torch.backends.cpu.get_cpu_capability(), "blas": ", ".join(blas)}


def cpu_model() -> str:
    """The CPU's model name (Linux /proc/cpuinfo), else what the platform module says."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def keep(file: Path, record: dict) -> None:
    """Write ``record`` to ``file`` whole (a temporary file linked into place), unless a file is there."""
    file.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=file.parent, prefix=f".{file.name}.")
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(record, fh, indent=1)
        with contextlib.suppress(FileExistsError):  # another process was first: its choice holds
            os.link(tmp, file)
    finally:
        os.unlink(tmp)


def measure() -> dict[str, str]:
    """Time numpy's and torch's implementation of each primitive, one thread; the faster of each."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with threadpool_limits(1):
            return {f"{p}/{d}": fastest(p, getattr(torch, d)) for p in PRIMITIVES for d in DTYPES}
    finally:
        torch.set_num_threads(threads)


def fastest(primitive: str, dtype: torch.dtype) -> str:
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(SHAPE, generator=generator, dtype=dtype)
    b = torch.randn(SHAPE, generator=generator, dtype=dtype)
    out = torch.empty_like(a)
    x, y, z = a.numpy(), b.numpy(), out.numpy()
    candidates = {
        "bmm": {"numpy": lambda: np.matmul(x, y, out=z), "torch": lambda: torch.bmm(a, b, out=out)},
        "exp": {"numpy": lambda: np.exp(x, out=z), "torch": lambda: torch.exp(a, out=out)},
        "count": {"numpy": lambda: np.greater_equal(x, 0.5).view(np.uint8).sum((-1, -2), dtype=np.int64),
                  "torch": lambda: (a >= 0.5).sum((-1, -2))},
    }[primitive]
    seconds = {name: min(timeit.repeat(call, number=10, repeat=5)) for name, call in candidates.items()}
    return min(seconds, key=seconds.get)
