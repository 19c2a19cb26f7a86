"""benchmarks/circle_findings.py and circle_step.py, the measurements behind the circle page.

Truth: the tiny run's size (n = 3, 6; 4 betas; 24 starts; USA and SA), the structured thresholds
in closed form (-2/3 at n = 3 and 6, three equal clusters: docs/papers/circle.md), the theorem of
no spurious attractor at beta >= -0.16, the exact Clopper-Pearson bound of 0 in 24 starts; and an
Euler step compared with itself moves no start."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import circle_findings  # noqa: E402
import circle_step  # noqa: E402

EXP = "circle_synchronization"


def test_the_findings_of_the_tiny_run(tiny_run: Callable[[str], Path], capsys: pytest.CaptureFixture) -> None:
    folder = tiny_run(EXP) / "results" / EXP
    assert circle_findings.main([str(folder), "--above", "-0.16"]) == 0
    lines = capsys.readouterr().out.splitlines()
    starts = 2 * 4 * 24 * 2  # n x beta x starts x weights
    assert lines[0].startswith(f"starts: {starts}; by class: ")
    assert sum(int(part.split()[-1]) for part in lines[0].split(": ")[-1].split(", ")) == starts
    # 0 in 24: the upper bound 1 - 0.025^(1/24) = 14.247%
    assert lines[3] == "at beta >= -0.16: no spurious attractor; the bound of 0 in 24 starts, 14.25% " \
                       "(the largest over the points)"
    table = pd.read_csv(folder / "boundary.csv").set_index(["n", "normalisation"])
    rows = {line.split("|")[1].strip(): line for line in lines if line.startswith("| 3 ") or line.startswith("| 6 ")}
    assert rows["3"].startswith("| 3 | -0.666667 | 1-1-1 | ") and rows["6"].startswith("| 6 | -0.666667 | 2-2-2 | ")
    for n, line in rows.items():
        low, high = table.loc[(int(n), "usa"), ["beta_c_low", "beta_c_high"]]
        want = f"none at {high:g} or above" if pd.isna(low) else f"[{low:g}, {high:g}]"
        assert line.split("|")[4].strip() == want


def test_a_scheme_against_itself_moves_no_start(capsys: pytest.CaptureFixture) -> None:
    assert circle_step.main(["--n", "5", "--beta", "-1.5", "--seeds", "16", "--scheme", "HEAD:1.0",
                             "--reference", "HEAD:1.0"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = [line for line in lines if line.startswith("| usa") or line.startswith("| sa")]
    assert len(rows) == 2
    for row in rows:
        cells = [c.strip() for c in row.split("|")[1:-1]]
        assert cells[4] == cells[5] and sum(map(int, cells[4].split())) == 16 and cells[6] == "0"
