"""benchmarks/compare_points.py: the shared points of two results trees are found whatever the
job cut, and their difference is measured: none between two cuts of one grid on one device (a
point's numbers depend only on its coordinates), a float32 rounding's worth against float64."""

from __future__ import annotations

import sys
from pathlib import Path

from attnsweep.plan.config import load_sweep
from attnsweep.run.job import run_job

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import compare_points  # noqa: E402

EXP = "critical_scaling"


def write_tree(results: Path, gammas: list[float], dtype: str) -> None:
    config = {"dtype": dtype, "device": "cpu",
              "experiments": {EXP: {"n": [32], "d": [8], "rho": [0.5], "gamma": gammas, "seeds": 3}}}
    plan = load_sweep(config).plans[EXP]
    spec = plan.spec(plan.grid, plan.seeds)
    run_job(spec, results / EXP / "runs" / "job.zarr", device="cpu", progress=False)


def test_two_cuts_agree_exactly_and_float32_is_near_float64(tmp_path: Path, capsys) -> None:
    write_tree(tmp_path / "a", [1.0, 2.0], "float32")
    write_tree(tmp_path / "b", [2.0, 3.0], "float32")
    write_tree(tmp_path / "c", [2.0, 3.0], "float64")
    same = compare_points.compare(*(compare_points.points(str(tmp_path / t), EXP, "lambda") for t in "ab"), "lambda")
    assert same["points"].tolist() == [3]  # gamma = 2 for 3 seeds
    assert same["max_abs"].tolist() == [0.0]
    close = compare_points.compare(*(compare_points.points(str(tmp_path / t), EXP, "lambda") for t in "ac"), "lambda")
    # lambda is a mean of n^2 = 1024 terms of order 1: float32 rounding leaves some 1e-7 x sqrt(1024)
    # relative at most in a random walk, far under 1e-4; and float32 is not float64, so not 0
    assert 0 < close["max_rel"].item() < 1e-4
    assert compare_points.main([str(tmp_path / "a"), str(tmp_path / "b")]) == 0
    assert "all 3 shared points: largest |a - b| 0" in capsys.readouterr().out
