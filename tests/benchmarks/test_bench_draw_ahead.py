"""benchmarks/bench_draw_ahead.py runs a job both ways and checks they agree (timings are its
output, not asserted: they depend on the machine)."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import bench_draw_ahead  # noqa: E402

from attnsweep.experiments.critical_scaling import simulate  # noqa: E402


def test_both_ways_agree_and_one_row_is_printed(capsys: pytest.CaptureFixture) -> None:
    assert bench_draw_ahead.main(["--device", "cpu", "--n", "64", "--d", "8", "--seeds", "3", "--repeats", "1"]) == 0
    row = capsys.readouterr().out.splitlines()[-1].split(" | ")
    assert row[1:4] == ["64", "8", "3 x 3"] and float(row[-1].rstrip(" |")) > 0
    assert simulate.DRAW_AHEAD_ON == frozenset({"cuda"})  # the default, restored


def test_a_difference_would_be_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    """Were a draw to depend on the thread it runs on, the benchmark fails instead of printing a ratio."""
    real = simulate.prepare

    def by_thread(n, d, seed, opts):
        return real(n, d, seed + (threading.current_thread() is not threading.main_thread()), opts)

    monkeypatch.setattr(simulate, "prepare", by_thread)
    with pytest.raises(AssertionError, match="drawing ahead changed lambda"):
        bench_draw_ahead.main(["--device", "cpu", "--n", "64", "--d", "8", "--seeds", "2", "--repeats", "1"])
