"""The driver of the three dynamics experiments (papers 001, 003, 004): which steps are recorded,
the systems of a job cut into chunks that fit the memory budget, and the record loop.

An experiment gives what is its paper's: the systems of one (n, d), the bytes one system takes,
the step of its integrator and what it records; the driver walks them in the same order for all
three, so a chunk's numbers do not depend on the experiment's bookkeeping.
"""

from __future__ import annotations

import itertools
import math
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np
import torch
from threadpoolctl import threadpool_limits
from tqdm import tqdm

from attnsweep.dynamics import cpu_chunk_bytes
from attnsweep.dynamics.times import output_steps

#: ``sample(k, x, record, snapshot)``: the values recorded at step k (the observables where
#: ``record``, the snapshots where ``snapshot``), and what the step from k may reuse (or None).
Sample = Callable[[int, torch.Tensor, bool, bool], tuple[dict[str, torch.Tensor], Any]]
#: ``(at, n, d, index)``: one chunk of systems (see :func:`chunks`).
Chunk = tuple[tuple, int, int, np.ndarray]
#: ``step(k, x, reused)``: the state at step k + 1 from the state ``x`` at step k.
Step = Callable[[int, torch.Tensor, Any], torch.Tensor]


def recorded_steps(opts: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """The integrator steps of the output times (:func:`~attnsweep.dynamics.times.output_steps`)
    and of the snapshot times (``snapshot_times / dt``, rounded, distinct)."""
    steps = output_steps(opts["dt"], opts["t_max"], opts["outputs"], opts["spacing"])
    snap_steps = np.unique(np.rint(np.asarray(opts["snapshot_times"], float) / opts["dt"]).astype(np.int64))
    return steps, snap_steps


def chunk_budget(block_mib: int, device: torch.device) -> int:
    """Bytes one chunk of systems may take: the job's ``block_mib`` on a GPU, at most
    ``CPU_CHUNK_MIB`` on a CPU."""
    return block_mib << 20 if device.type == "cuda" else cpu_chunk_bytes(block_mib)


def chunks(grid: dict[str, list], systems: list[tuple[int, ...]], system_bytes: Callable[[int, int], int],
           budget: int, parts: int = 1) -> list[Chunk]:
    """``(at, n, d, index)`` for every (n, d) of ``grid`` and every chunk of ``systems`` (rows of
    index positions): as few chunks as fit ``budget`` bytes each (at least one system), their
    count rounded up to a multiple of ``parts`` (the threads running chunks side by side, so that
    none waits alone at the end) and their sizes equal to one system; ``at`` indexes the chunk's
    systems in arrays of shape (len(n), len(d), *system axes)."""
    out = []
    for (a, n), (b, d) in itertools.product(enumerate(grid["n"]), enumerate(grid["d"])):
        n, d = int(n), int(d)
        count = math.ceil(len(systems) / max(1, budget // system_bytes(n, d)))
        count = min(len(systems), parts * math.ceil(count / parts))
        for index in np.array_split(np.array(systems), count):
            out.append(((a, b, *index.T), n, d, index))
    return out


def integrated(name: str, chunks: list[Chunk], integrate: Callable[[int, int, np.ndarray], dict[str, np.ndarray]],
               device: torch.device, progress: bool = True) -> Iterator[tuple[tuple, dict[str, np.ndarray]]]:
    """``(at, integrate(n, d, index))`` for every chunk, in order. On a CPU with T > 1 torch
    threads and several chunks, T chunks run side by side, each on one thread (torch and BLAS
    single-threaded inside it): the small tensors of a chunk keep a core busier alone than
    split over two (benchmarks/RESULTS.md), and a chunk's numbers do not depend on T. At most
    2 T chunks are in flight, so memory stays a few chunks."""
    bar = tqdm(total=len(chunks), desc=name, disable=not progress, mininterval=5)
    threads = torch.get_num_threads()
    if device.type != "cpu" or threads == 1 or len(chunks) == 1:
        for at, n, d, index in chunks:
            yield at, integrate(n, d, index)
            bar.update()
        bar.close()
        return
    torch.set_num_threads(1)
    try:
        with threadpool_limits(1), ThreadPoolExecutor(threads) as pool:
            pending: deque[tuple[tuple, Future]] = deque()
            for at, n, d, index in chunks:
                pending.append((at, pool.submit(integrate, n, d, index)))
                while len(pending) > 2 * threads or (pending and pending[0][1].done()):
                    first, future = pending.popleft()
                    yield first, future.result()
                    bar.update()
            while pending:
                first, future = pending.popleft()
                yield first, future.result()
                bar.update()
    finally:
        torch.set_num_threads(threads)
        bar.close()


def run(name: str, job: Any, systems: list[tuple[int, ...]], system_bytes: Callable[[int, int], int],
        integrate: Callable[..., dict[str, np.ndarray]], steps: np.ndarray, snap_steps: np.ndarray,
        device: torch.device, dtype: torch.dtype, progress: bool = True) -> Iterator[tuple[tuple, dict]]:
    """:func:`integrated` over the :func:`chunks` of a job (a ``JobSpec``) within its memory
    budget (on a CPU, a multiple of the threads), each chunk by the experiment's
    ``integrate(n, d, index, grid, seeds, options, steps, snap_steps, device, dtype)``."""
    def one(n: int, d: int, index: np.ndarray) -> dict[str, np.ndarray]:
        return integrate(n, d, index, job.grid, job.seeds, job.options, steps, snap_steps, device, dtype)

    parts = torch.get_num_threads() if device.type == "cpu" else 1
    return integrated(name, chunks(job.grid, systems, system_bytes, chunk_budget(job.block_mib, device), parts), one,
                      device, progress)


def trajectory(x: torch.Tensor, step: Step, sample: Sample, steps: np.ndarray,
               snap_steps: np.ndarray) -> dict[str, np.ndarray]:
    """Integrate ``x`` (B, ...) to the last of ``steps`` and ``snap_steps``, sampling at each of
    them; every recorded value stacked along axis 1 as float64: (B, samples, ...)."""
    wanted, snaps = set(steps.tolist()), set(snap_steps.tolist())
    last = int(max(steps.max(), snap_steps.max(initial=0)))
    records: dict[str, list[torch.Tensor]] = {}
    for k in range(last + 1):
        reused = None
        if k in wanted or k in snaps:
            values, reused = sample(k, x, k in wanted, k in snaps)
            for var, value in values.items():
                records.setdefault(var, []).append(value)
        if k < last:
            x = step(k, x, reused)
    return {var: torch.stack(values, 1).double().cpu().numpy() for var, values in records.items()}


def fit(a: np.ndarray, sizes: dict[int, int]) -> np.ndarray:
    """``a`` as float64, each axis of ``sizes`` cut or NaN-padded to its size (a smaller n in a
    sweep over n, fewer coordinates than kept)."""
    a = a[tuple(slice(0, sizes[axis]) if axis in sizes else slice(None) for axis in range(a.ndim))]
    widths = [(0, sizes[axis] - have if axis in sizes else 0) for axis, have in enumerate(a.shape)]
    return np.pad(a.astype(np.float64), widths, constant_values=np.nan)
