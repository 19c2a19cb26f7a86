"""Theory jobs (attnsweep.contract: theory_axes, theory_options): one per point of the theory axes,
named by that point and the theory's options alone, and simulate keys as they were before."""

from __future__ import annotations

import hashlib
import json

import pytest

from attnsweep.jobspec import KEY_DIGITS, JobSpec
from attnsweep.plan.config import load_sweep

EXPERIMENT = "circle_synchronization"  # the built-in with theory axes (n)


def plan(**section):
    base = {"n": [3, 6], "beta": [-1.0, 0.5], "seeds": 2}
    return load_sweep({"experiments": {EXPERIMENT: {**base, **section}}}).plans[EXPERIMENT]


def test_a_simulate_key_hashes_what_it_hashed_before_theory_jobs() -> None:
    """The identity of a simulate job names no step: every store already made keeps its name. The
    key recomputed here from the six fields, as it was defined before the step existed."""
    spec = JobSpec("critical_scaling", {"n": [4], "d": [2]}, [0, 1], {"x": 1}, "float32", 3)
    fields = {"experiment": "critical_scaling", "version": 3, "grid": {"n": [4], "d": [2]}, "seeds": [0, 1],
              "options": {"x": 1}, "dtype": "float32"}
    text = json.dumps(fields, sort_keys=True, separators=(",", ":"))
    assert spec.key() == hashlib.sha256(text.encode()).hexdigest()[:KEY_DIGITS]
    theory = JobSpec("critical_scaling", {"n": [4], "d": [2]}, [0, 1], {"x": 1}, "float32", 3, step="theory")
    assert theory.key() != spec.key()
    assert JobSpec.from_dict(theory.to_dict()) == theory


def test_an_unknown_step_is_refused() -> None:
    with pytest.raises(ValueError, match="'shell' is none of simulate, theory"):
        JobSpec("critical_scaling", {"n": [4]}, [0], step="shell")


def test_one_theory_job_per_point_with_the_theorys_options_alone() -> None:
    jobs = plan().theory_jobs()
    assert sorted(path.split("/")[0] for path in jobs) == ["n~3", "n~6"]
    for path, spec in jobs.items():
        assert path == f"n~{spec.grid['n'][0]}/{spec.key()}" and spec.step == "theory" and spec.seeds == []
        assert set(spec.grid) == {"n"}
        assert set(spec.options) == {"k_max", "spread", "scan", "threshold_tol"}
    # The simulations' identities hold none of the theory's options.
    assert all(not {"k_max", "scan"} & set(spec.options) for spec in plan().jobs().values())


def test_what_reruns_a_theory_job_and_what_does_not() -> None:
    """New seeds, betas and flow options leave every theory key; a theory option changes every
    theory key and no simulate key; a new n adds its theory job alone."""
    keys = set(plan().theory_jobs())
    assert set(plan(seeds=5, beta=[-1.0, -0.5, 0.5], t_max=50.0).theory_jobs()) == keys
    changed = plan(k_max=4)
    assert not set(changed.theory_jobs()) & keys
    assert set(changed.jobs()) == set(plan().jobs())
    grown = plan(n=[3, 6, 7]).theory_jobs()
    assert keys < set(grown) and [p.split("/")[0] for p in set(grown) - keys] == ["n~7"]


def test_refined_values_of_a_theory_axis_get_their_theory_jobs() -> None:
    """A rectangle added by refinement (Plan.with_extra) with a new n: its theory job joins."""
    base = plan()
    extra = base.with_extra([{"n": [5], "beta": [-1.0], "seed": [0, 1]}])
    assert sorted(p.split("/")[0] for p in extra.theory_jobs()) == ["n~3", "n~5", "n~6"]


def test_no_theory_axes_no_theory_jobs() -> None:
    sweep = load_sweep({"experiments": {"critical_scaling": {"n": [8], "d": [2], "seeds": 1}}})
    assert sweep.plans["critical_scaling"].theory_jobs() == {}
