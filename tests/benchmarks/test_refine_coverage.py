"""benchmarks/refine_coverage.py: a refinement run in process keeps to its seed block, and the
report scores hand-made refinements against their truth."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from attnsweep.stores.io import open_store

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import refine_coverage as harness  # noqa: E402


def test_the_report_counts_refinements_within_precision_and_intervals_holding_the_truth(tmp_path,
                                                                                    monkeypatch) -> None:
    """Truth 2.0 at relative precision 0.04: 2.07 lies within 0.04 x 2.07 = 0.083 of it, 2.1 does
    not (0.084 < 0.1); [1.9, 2.05] holds it, [2.01, 2.2] does not."""
    monkeypatch.setitem(harness.CASES, "toy", {"section": {"refine": {"precision": 0.04}}})
    case = tmp_path / "toy"
    (case / "inverted").mkdir(parents=True)
    row = {"n": 64, "d": 16}
    (case / "truth.json").write_text(json.dumps({"rows": [{"row": row, "": 2.0, "low": 1.99, "high": 2.01}]}))
    for k, (est, low, high, action) in enumerate([(2.07, 1.9, 2.05, "precise"), (2.1, 2.01, 2.2, "max_seeds")]):
        (case / "inverted" / f"{k:03d}.json").write_text(json.dumps({
            "rows": [{"row": row, "": est, "low": low, "high": high, "seeds": 8.0 * (k + 1)}], "actions": [action],
            "pairs": 100 * (k + 1), "model_seconds": 1.0 + k, "job_seconds": 0.5}))
    [r] = harness.summarise(tmp_path)
    assert (r["runs"], r["within"], r["holds"], r["precise"]) == (2, 1, 1, 1)
    assert r["bias"] == pytest.approx(0.085) and r["seeds"] == 12
    assert r["pairs"] == [100, 200] and r["row"] == "-"  # no coordinate varies between rows


@pytest.mark.slow
def test_a_refinement_in_process_keeps_to_its_seed_block(tmp_path, monkeypatch) -> None:
    """A small sphere_clustering refinement from seeds 100-107: every store holds seeds from 100 up,
    the record ends, and its boundary is the workflow's (boundary.zarr read back)."""
    monkeypatch.setitem(harness.CASES, "sphere_clustering", {
        "section": {"n": [8], "d": [2], "beta": [1.0], "wildcards": ["n", "d"], "t_max": 10.0, "outputs": 41,
                    "snapshot_times": [], "refine": {"precision": 0.1, "max_seeds": 32, "rounds": 3,
                                                     "core_hours": 1}},
        "truth": {}, "boundary": "t_star"})
    result = harness.refine(tmp_path, "sphere_clustering", list(range(100, 108)), "inverted")
    sweep = open_store(tmp_path / "results" / "sphere_clustering" / "sweep.zarr")
    held = sweep["seed"].values[sweep["simulated"].values.reshape(-1, sweep.sizes["seed"]).any(0)]
    assert held.min() == 100 and held.max() < 100 + 32
    assert result["pairs"] == len(held)  # one row: each seed simulated once
    assert result["final"] and len(result["rows"]) == 1
    found = open_store(tmp_path / "results" / "sphere_clustering" / "boundary.zarr")
    assert result["rows"][0][""] == pytest.approx(float(np.asarray(found["t_star"]).ravel()[0]), nan_ok=True)
