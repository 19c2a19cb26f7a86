"""benchmarks/boundary_table.py: the docs' tables of gamma* (1 - rho), checked on a hand-made CSV."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import boundary_table  # noqa: E402

COLUMNS = ["observable", "n", "d", "rho", "alpha", "gamma_star", "gamma_star_low", "gamma_star_high",
           "gamma_star_simplex"]
ROWS = [  # (1 - rho) gamma* and its interval by hand: 0.5 x (2.0, 1.9, 2.1) = (1.0, 0.95, 1.05), ...
    ("lambda", 1024, 128, 0.5, 0.0, 2.0, 1.9, 2.1, 2.0),
    ("lambda", 1024, 128, 0.25, 0.0, 1.4, 1.36, 1.44, 1.3336),
    ("lambda", 4096, 128, 0.5, 0.0, 2.1, 2.0, 2.2, 2.0),
    ("lambda", 4096, 128, 0.25, 0.0, float("nan"), float("nan"), float("nan"), 1.3336),  # no crossing
    ("lambda", 4096, 128, 0.5, 1.0, 9.0, 9.0, 9.0, 9.0),  # alpha 1: never shown
]


@pytest.fixture
def csv(tmp_path: Path) -> str:
    path = tmp_path / "boundary.csv"
    pd.DataFrame(ROWS, columns=COLUMNS).to_csv(path, index=False)
    return str(path)


def test_against_n_has_a_column_per_n(csv: str, capsys: pytest.CaptureFixture) -> None:
    assert boundary_table.main([csv, "--rho", "0.25", "0.5"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "| boundary | d | rho | n = 1024 | n = 4096 |"
    assert "| lambda | 128 | 0.5 | 1.000 [0.950, 1.050] | 1.050 [1.000, 1.100] |" in lines
    assert "| lambda | 128 | 0.25 | 1.050 [1.020, 1.080] | - |" in lines
    assert lines[-1].endswith("lambda, d = 128: 1.000-1.000")  # min and max of 0.5 x 2.0 and 0.75 x 1.3336


def test_one_n_has_a_column_per_rho_and_the_median(csv: str, capsys: pytest.CaptureFixture) -> None:
    assert boundary_table.main([csv, "--n", "1024", "--rho", "0.25", "0.5", "0.75"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "| lambda | 128 | 1.050 [1.020, 1.080] | 1.000 [0.950, 1.050] | - | 1.025 |" in lines


def test_an_n_not_in_the_file_is_refused(csv: str, capsys: pytest.CaptureFixture) -> None:
    assert boundary_table.main([csv, "--n", "65536"]) == 1
    assert "no rows with alpha = 0 and n = 65536" in capsys.readouterr().err
