"""A refinement round of circle_synchronization's beta_c: a bracket between two grid betas (the last
with a certified spurious attractor and the next), not a seed interval. The row of n = 3 has one
(its splay state is a strict local maximum below beta = -2/3, docs/papers/circle.md, and some of
the 32 starts reach it at beta = -1.5 or -1: its basin there is about 14% and 8% of the starts
(1024 a point at paper scale), so 32 seeded starts missing it at both has probability ~5e-4, and a
machine's rounding moves only starts on a basin's edge), the row of n = 4 none (its first stable family
appears below beta = -2.2): a round adds betas strictly inside the first bracket, and nothing for
the second, which it calls "no crossing"."""

from __future__ import annotations

from attnsweep.plan.config import load_sweep
from attnsweep.reduce import aggregate
from attnsweep.refine.rules import decide
from attnsweep.run.job import run_job
from attnsweep.stores.io import open_store

NAME = "circle_synchronization"
SECTION = {"n": [3, 4], "beta": [-1.5, -1.0, -0.5], "seeds": 32, "normalisations": ["usa"], "t_max": 60.0,
           "scan": {"start": -3.0, "stop": 0.5, "step": 0.25}, "wildcards": [],
           "refine": {"precision": 0.01, "relative": False}}


def test_a_round_locates_each_bracket_and_leaves_a_row_without_one(tmp_path) -> None:
    plan = load_sweep({"device": "cpu", "experiments": {NAME: SECTION}}).plans[NAME]
    runs = [run_job(spec, tmp_path / "runs" / f"{path}.zarr", device="cpu", threads=1, progress=False)
            for path, spec in plan.jobs().items()]
    theory = [run_job(spec, tmp_path / "theory" / f"{path}.zarr", device="cpu", threads=1, progress=False)
              for path, spec in plan.theory_jobs().items()]
    sweep = aggregate.collect(runs, tmp_path / "sweep.zarr", plan.coords(), [plan.base()])
    summary = aggregate.reduce(sweep, tmp_path / "summary.zarr", theory)
    aggregate.boundary(sweep, summary, tmp_path / "boundary.csv", tmp_path / "boundary.zarr")
    bnd = open_store(tmp_path / "boundary.zarr").load()
    simulated = open_store(sweep)["simulated"].load()

    blocks, assessment, _ = decide(plan, plan.refine, simulated, bnd, 1e12)
    actions = {d["row"]: d["action"] for d in assessment}
    assert actions == {"n=3 normalisation=0": "locate", "n=4 normalisation=0": "no crossing"}, assessment
    low, high = (float(bnd[v].sel(n=3, normalisation=0)) for v in ("beta_c_low", "beta_c_high"))
    assert (low, high) in {(-1.5, -1.0), (-1.0, -0.5)}
    added = {beta for block in blocks for beta in block["beta"]}
    assert added and all(low < beta < high for beta in added), (added, low, high)
    assert {n for block in blocks for n in block["n"]} == {3}
    # Every seed that holds both ends of the bracket goes to each new beta: the bracket's ends are
    # compared on the same starts.
    assert all(sorted(block["seed"]) == list(range(32)) for block in blocks)

