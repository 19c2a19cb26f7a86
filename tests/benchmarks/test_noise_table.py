"""benchmarks/noise_table.py: the noise page's tables, checked on a hand-made boundary.csv."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import noise_table  # noqa: E402

NAN = float("nan")
ROWS = [  # (n, beta, K_uniform, low, high, flag, K_point, low, high, flag)
    (64, 2.0, 1.01, 0.98, 1.04, "bounded", 0.96, 0.95, 0.97, "bounded"),
    (256, 2.0, NAN, NAN, NAN, "never", 0.998, NAN, NAN, "too few seeds"),
    (64, 8.0, 0.686, 0.65, NAN, "reaches_grid_end", 0.512, NAN, 0.52, "reaches_grid_start"),  # no n = 256 row
]


@pytest.fixture
def csv(tmp_path: Path) -> str:
    table = pd.DataFrame(ROWS, columns=["n", "beta", "K_uniform", "K_uniform_low", "K_uniform_high", "K_uniform_flag",
                                        "K_point", "K_point_low", "K_point_high", "K_point_flag"])
    for name in noise_table.STARTS:
        table[f"{name}_seeds"], table[f"{name}_spacing"] = 8, 0.05
    table["K_uniform_mean_field"], table["K_point_mean_field"] = 1.0, table["beta"] / 10
    table["K_c"], table["K_s"] = 1 - table["beta"] / 20, 1 - table["beta"] / 16
    path = tmp_path / "boundary.csv"
    table.to_csv(path, index=False)
    return str(path)


def test_a_row_per_beta_a_column_per_start_and_n(csv: str, capsys: pytest.CaptureFixture) -> None:
    assert noise_table.main([csv]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == ("| beta | K_c (mf) | K_s (mf) | K_uniform n = 64 | K_uniform n = 256 | K_point n = 64 "
                        "| K_point n = 256 | mf crossing: uniform, point |")
    assert lines[2] == ("| 2 | 0.900 | 0.875 | 1.010 (0.980-1.040) | - | 0.960 (0.950-0.970) | 0.998 (too few seeds) "
                        "| 1.000, 0.200 |")
    assert lines[3] == ("| 8 | 0.600 | 0.500 | 0.686 (0.650-past the grid) |  | 0.512 (below the grid-0.520) |  "
                        "| 1.000, 0.800 |")
