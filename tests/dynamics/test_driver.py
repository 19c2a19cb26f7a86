"""The driver of the dynamics experiments (attnsweep.dynamics.driver), on cases small enough to
state the answer: a counter ODE, a hand-cut list of systems, hand-padded arrays."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnsweep.dynamics import CPU_CHUNK_MIB, driver


def test_trajectory_samples_exactly_the_recorded_steps_and_hands_over_reuse() -> None:
    seen, reused = [], []

    def sample(k, x, record, snapshot):
        seen.append((k, record, snapshot))
        values = {"x": x.clone()} if record else {}
        if snapshot:
            values["snap"] = 10 * x
        return values, f"at {k}"

    def step(k, x, reuse):
        reused.append((k, reuse))
        return x + 1

    out = driver.trajectory(torch.zeros(2), step, sample, np.array([0, 2, 5]), np.array([2, 3]))
    assert seen == [(0, True, False), (2, True, True), (3, False, True), (5, True, False)]
    assert reused == [(0, "at 0"), (1, None), (2, "at 2"), (3, "at 3"), (4, None)]  # no step past the last
    np.testing.assert_array_equal(out["x"], [[0, 2, 5], [0, 2, 5]])
    np.testing.assert_array_equal(out["snap"], [[20, 30], [20, 30]])
    assert out["x"].dtype == np.float64


def test_chunks_cut_every_point_into_budgeted_runs_of_systems() -> None:
    grid = {"n": [4, 8], "d": [2]}
    systems = [(i,) for i in range(5)]
    got = [(at[:2], n, d, index[:, 0].tolist())
           for at, n, d, index in driver.chunks(grid, systems, lambda n, d: n * d, 16)]
    assert got == [((0, 0), 4, 2, [0, 1]), ((0, 0), 4, 2, [2, 3]), ((0, 0), 4, 2, [4]), ((1, 0), 8, 2, [0]),
                   ((1, 0), 8, 2, [1]), ((1, 0), 8, 2, [2]), ((1, 0), 8, 2, [3]), ((1, 0), 8, 2, [4])]
    at, _, _, index = driver.chunks(grid, systems, lambda n, d: n * d, 16)[0]
    np.testing.assert_array_equal(np.arange(10).reshape(2, 1, 5)[at], [0, 1])  # at picks the chunk's systems


def test_chunks_come_in_multiples_of_the_threads_with_equal_sizes() -> None:
    """Two threads: 5 systems of one point that fit 2 a chunk make 4 chunks (not 3, which would
    leave one thread alone at the end), sizes within one; never more chunks than systems."""
    grid = {"n": [4], "d": [2]}
    systems = [(i,) for i in range(5)]
    sizes = [len(index) for *_, index in driver.chunks(grid, systems, lambda n, d: 8, 16, parts=2)]
    assert sizes == [2, 1, 1, 1]
    sizes = [len(index) for *_, index in driver.chunks(grid, systems[:1], lambda n, d: 8, 16, parts=2)]
    assert sizes == [1]
    rows = np.concatenate([index for *_, index in driver.chunks(grid, systems, lambda n, d: 8, 16, parts=3)])
    np.testing.assert_array_equal(rows[:, 0], range(5))  # every system once, in order


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_integrated_runs_every_chunk_once_in_order_on_one_thread_each(threads: int) -> None:
    """Side by side on a CPU: every chunk once, results handed back in chunk order, torch
    single-threaded inside a chunk and its thread count restored afterwards."""
    chunks = driver.chunks({"n": [3], "d": [2]}, [(i,) for i in range(7)], lambda n, d: 1, 1)
    seen = []

    def integrate(n, d, index):
        seen.append(int(index[0, 0]))
        return {"i": index[:, 0] * 10, "inner": np.array([torch.get_num_threads()])}

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        out = list(driver.integrated("t", chunks, integrate, torch.device("cpu"), progress=False))
        assert torch.get_num_threads() == threads
    finally:
        torch.set_num_threads(before)
    assert sorted(seen) == list(range(7))
    assert [int(arrays["i"][0]) for _, arrays in out] == [0, 10, 20, 30, 40, 50, 60]
    assert [at for at, _ in out] == [chunk[0] for chunk in chunks]
    assert {int(arrays["inner"][0]) for _, arrays in out} == {1}


def test_chunk_budget_caps_the_cpu_only() -> None:
    assert driver.chunk_budget(256, torch.device("cpu")) == CPU_CHUNK_MIB << 20
    assert driver.chunk_budget(1, torch.device("cpu")) == 1 << 20
    assert driver.chunk_budget(256, torch.device("cuda")) == 256 << 20


def test_fit_cuts_and_pads_the_named_axes() -> None:
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = driver.fit(a, {0: 3, 1: 2})
    np.testing.assert_array_equal(out, [[0, 1], [3, 4], [np.nan, np.nan]])
    assert out.dtype == np.float64
    np.testing.assert_array_equal(driver.fit(a, {}), a)
