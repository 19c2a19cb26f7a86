"""benchmarks/piece_stats.py counts a refinement's jobs and points as its aggregate does."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import piece_stats  # noqa: E402

from attnsweep.stores.io import open_store  # noqa: E402

pytestmark = pytest.mark.slow  # they read the tiny refinement, which takes ~50 s to make


def test_points_and_jobs_match_the_sweep(tiny_refine: Path, capsys: pytest.CaptureFixture) -> None:
    """The tiny refinement's rounds: one job per round, and the points sweep.zarr marks simulated
    (an independent count: the aggregate's mask, not the job specs)."""
    results = tiny_refine / "results"
    assert piece_stats.main([str(results), "critical_scaling", "--by", "rho"]) == 0
    row = capsys.readouterr().out.splitlines()[-1].strip("| ").split(" | ")
    simulated = int(open_store(results / "critical_scaling" / "sweep.zarr")["simulated"].sum())
    stores = [p for p in (results / "critical_scaling" / "runs").rglob("*.zarr") if not p.name.startswith(".")]
    assert row[:3] == ["0.5", str(len(stores)), str(simulated)]


def test_since_leaves_out_earlier_stores(tiny_refine: Path, capsys: pytest.CaptureFixture) -> None:
    assert piece_stats.main([str(tiny_refine / "results"), "critical_scaling", "--since", "2999-01-01T00:00Z"]) == 0
    assert "no finished run store" in capsys.readouterr().out


def test_an_unknown_axis_is_named(tiny_refine: Path) -> None:
    with pytest.raises(SystemExit, match="--by beta: not an axis"):
        piece_stats.main([str(tiny_refine / "results"), "critical_scaling", "--by", "beta"])
