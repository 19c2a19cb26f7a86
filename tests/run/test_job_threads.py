"""attnsweep.run.job: a job's BLAS (numpy's products) runs on the job's threads, not on every core.
Left at its default, one job of `threads: 1` beside others oversubscribed the cores and ran 3.1x
slower at n = 1024 (benchmarks/RESULTS.md)."""

from __future__ import annotations

import pytest
import torch
from threadpoolctl import threadpool_info, threadpool_limits

from attnsweep import registry
from attnsweep.jobspec import JobSpec
from attnsweep.run import job


class Seen(Exception):
    """Raised by the stand-in experiment once it has read the limits."""


def blas_threads() -> set[int]:
    return {pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"}


@pytest.mark.parametrize("threads", [1, 2])
def test_a_jobs_blas_takes_its_threads(monkeypatch, tmp_path, threads: int) -> None:
    if not blas_threads():
        pytest.skip("no BLAS library loaded in this process")
    seen: dict[str, set[int]] = {}

    class Experiment:
        def simulate(self, spec, device, dtype, progress):
            seen["blas"] = blas_threads()
            raise Seen

    monkeypatch.setattr(registry, "get", lambda name: Experiment())
    before = torch.get_num_threads()
    spec = JobSpec("stand_in", {"n": [2]}, [0])
    try:  # BLAS at 3 threads first, whatever this machine's default, so the limit must act
        with threadpool_limits(3, user_api="blas"), pytest.raises(Seen):
            job.run_job(spec, tmp_path / "out.zarr", device="cpu", threads=threads, progress=False)
    finally:
        torch.set_num_threads(before)
    assert seen["blas"] == {threads}
