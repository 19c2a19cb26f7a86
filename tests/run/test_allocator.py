"""attnsweep.run.allocator: glibc takes the settings, and with them a loop that allocates and frees
tensors of a few MiB, as every step of a dynamics job does, faults fewer pages in."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

from attnsweep.run.allocator import keep_freed_memory

pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="not glibc: the allocator is left as is")

LOOP = """
import resource, sys
import numpy as np
from attnsweep.run.allocator import keep_freed_memory
if sys.argv[1] == "on":
    assert keep_freed_memory()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for k in range(100):  # 8 and 16 MiB blocks of varying sizes, freed at once
    a, b = np.ones((1 << 20) + 4096 * (k % 7)), np.ones((1 << 21) + 4096 * (k % 5))
    del a, b
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def test_glibc_takes_every_setting():
    assert keep_freed_memory()


def test_freed_blocks_are_kept_rather_than_faulted_in_again():
    """Each process is deterministic; with the settings the blocks after the first reuse the heap's
    pages, without them glibc maps some anew (measured 1106 against 4302 faults, glibc 2.36)."""
    faults = {mode: int(subprocess.run([sys.executable, "-c", LOOP, mode], check=True, capture_output=True,
                                       text=True, timeout=120).stdout) for mode in ("off", "on")}
    assert faults["on"] < faults["off"], faults
