"""``aggregate.reduce`` joins the theory stores to the sweep only when they hold every point of
the experiment's theory axes: a missing point is named (it would be NaN in the summary, and a
boundary read from it silently wrong), and theory stores given to an experiment without theory
axes are refused. The workflow always passes every theory job's store; a user calling the API
may not."""

from __future__ import annotations

from pathlib import Path

import pytest

from attnsweep.plan.config import load_sweep
from attnsweep.reduce import aggregate
from attnsweep.run.job import run_job
from attnsweep.stores.io import open_store

#: Two n, one beta, four starts, a short flow, a coarse scan: each job well under a second.
CIRCLE = {"n": [3, 4], "beta": [-1.0], "seeds": 4, "normalisations": ["usa"], "t_max": 5.0,
          "scan": {"start": -1.0, "stop": 0.0, "step": 0.5}}
SPHERE = {"n": [4], "d": [2], "beta": [1.0], "seeds": 2, "t_max": 1.0, "outputs": 3}


def swept(tmp_path: Path, name: str, section: dict) -> tuple[Path, list[Path]]:
    """The sweep of ``section`` collected from jobs run here, and its theory stores."""
    plan = load_sweep({"device": "cpu", "experiments": {name: section}}).plans[name]
    run = lambda jobs, kind: [run_job(spec, tmp_path / name / kind / f"{job}.zarr", device="cpu", threads=1,
                                      progress=False) for job, spec in jobs.items()]
    sweep = aggregate.collect(run(plan.jobs(), "runs"), tmp_path / name / "sweep.zarr", plan.coords())
    return sweep, run(plan.theory_jobs(), "theory")


def test_every_theory_point_joins_and_a_missing_one_is_named(tmp_path: Path) -> None:
    sweep, theory = swept(tmp_path, "circle_synchronization", CIRCLE)
    assert [p.parent.name for p in theory] == ["n~3", "n~4"]
    summary = open_store(aggregate.reduce(sweep, tmp_path / "summary.zarr", theory))
    assert list(summary["n"].values) == [3, 4]
    with pytest.raises(ValueError, match=r"no theory store holds n = 4 \(one theory job per point of n\)"):
        aggregate.reduce(sweep, tmp_path / "lacking.zarr", theory[:1])
    with pytest.raises(ValueError, match="no theory store holds n = 3, 4"):
        aggregate.reduce(sweep, tmp_path / "none.zarr")
    assert not (tmp_path / "lacking.zarr").exists() and not (tmp_path / "none.zarr").exists()


def test_theory_stores_for_an_experiment_without_theory_are_refused(tmp_path: Path) -> None:
    sweep, none = swept(tmp_path, "sphere_clustering", SPHERE)
    assert none == []
    _, theory = swept(tmp_path, "circle_synchronization", {**CIRCLE, "n": [3]})
    with pytest.raises(ValueError, match=r"'sphere_clustering' has no theory axes, yet 1 theory store\(s\)"):
        aggregate.reduce(sweep, tmp_path / "summary.zarr", theory)
    assert not (tmp_path / "summary.zarr").exists()
