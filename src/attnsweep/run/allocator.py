"""glibc's allocator kept from handing a job's freed tensors back to the kernel between steps.

A dynamics job allocates and frees the same few MiB-sized tensors every step. glibc serves a block
above its mmap threshold with a fresh mapping and trims the free top of its heaps back to the
kernel; either way the next step's tensors fault their pages in again, zeroed by the kernel: a
normalized_attention job (n = 64, d = 16, 8 heads, 640 systems, 500 steps) took 4.5 million page
faults and 18 s of system time in a 55 s run. With the mmap threshold at its largest (32 MiB on a
64-bit system), the trim threshold at 256 MiB and the heap grown 64 MiB at a time, those pages
stay: 37 s, 3 s of system time (benchmarks/RESULTS.md). The numbers do not change. Where the C
library has no ``mallopt`` (not glibc), nothing is done.
"""

from __future__ import annotations

import ctypes

#: glibc's mallopt parameters (malloc.h).
M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD = -1, -2, -3
SETTINGS = ((M_MMAP_THRESHOLD, 32 << 20), (M_TRIM_THRESHOLD, 256 << 20), (M_TOP_PAD, 64 << 20))


def keep_freed_memory() -> bool:
    """Set the three parameters for this process; whether the C library took them all."""
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the process's own C library
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    return all(mallopt(option, value) == 1 for option, value in SETTINGS)
