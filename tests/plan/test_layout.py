"""Plan.layout: what collect is told a sweep holds (the workflow's collect rule and the refinement
coverage benchmark both pass it)."""

from __future__ import annotations

from attnsweep.plan.config import load_sweep


def test_collect_gets_the_whole_grid_unrefined_and_every_rectangle_refined() -> None:
    plan = load_sweep({"experiments": {"circle_synchronization": {"n": [3, 6], "beta": [-1.0, 0.5], "seeds": 2}}}
                      ).plans["circle_synchronization"]
    assert plan.layout() == {"grid": {"n": [3, 6], "beta": [-1.0, 0.5], "seed": [0, 1]}, "points": None}
    added = {"n": [5], "beta": [-1.0], "seed": [2, 3]}
    layout = plan.with_extra([added]).layout()
    assert layout["points"] == [plan.base(), added]
    assert layout["grid"] == {"n": [3, 5, 6], "beta": [-1.0, 0.5], "seed": [0, 1, 2, 3]}
