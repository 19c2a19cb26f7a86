"""Refinement decisions (attnsweep.refine.rules.decide) on synthetic boundaries: what each rule adds."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from attnsweep.errors import ConfigError
from attnsweep.plan.config import load_sweep
from attnsweep.refine.rules import decide

GAMMA = [0.5, 1.0, 2.0, 4.0]


def plan(seeds=4, **refine):
    config = {"experiments": {"critical_scaling": {
        "n": [64], "d": [16], "rho": [0.2, 0.5], "gamma": GAMMA, "seeds": seeds, "wildcards": ["n", "d"],
        "refine": {"precision": 0.05, "relative": False, "boundaries": ["gamma_star_lambda"], **refine}}}}
    return load_sweep(config).plans["critical_scaling"]


def simulated(p, extra=()):
    """The mask of the plan's base grid (every gamma, seeds 0-3), plus (rho, gamma, seed) pairs."""
    coords = p.coords()
    gammas = sorted({*coords["gamma"], *(g for _, g, _ in extra)})
    seeds = sorted({*coords["seed"], *(s for _, _, s in extra)})
    da = xr.DataArray(np.zeros((1, 1, 2, len(gammas), 1, len(seeds)), bool),
                      coords={"n": [64], "d": [16], "rho": coords["rho"], "gamma": gammas, "alpha": [0.0],
                              "seed": seeds}, dims=("n", "d", "rho", "gamma", "alpha", "seed"))
    da.loc[{"gamma": coords["gamma"], "seed": coords["seed"]}] = True
    for rho, g, s in extra:
        da.loc[{"rho": rho, "gamma": g, "seed": s}] = True
    return da


def boundary(est, low, high):
    dims = ("n", "d", "rho", "alpha")
    coords = {"n": [64], "d": [16], "rho": [0.2, 0.5], "alpha": [0.0]}
    shape = (1, 1, 2, 1)
    return xr.Dataset({"gamma_star_lambda": (dims, np.reshape(est, shape)),
                       "gamma_star_lambda_low": (dims, np.reshape(low, shape)),
                       "gamma_star_lambda_high": (dims, np.reshape(high, shape))}, coords=coords)


def points(blocks):
    return {(r, g, s) for b in blocks for r in b["rho"] for g in b["gamma"] for s in b["seed"]}


def test_a_coarse_bracket_gets_new_values_inside_it_with_its_seeds() -> None:
    p = plan(points=3)
    blocks, assessment, reason = decide(p, p.refine, simulated(p), boundary([1.5, np.nan], [1.49, np.nan],
                                                                            [1.51, np.nan]), 1e9)
    assert points(blocks) == {(0.2, g, s) for g in (1.25, 1.5, 1.75) for s in range(4)}
    assert [d["action"] for d in assessment] == ["locate", "no crossing"]
    assert reason == ""


def test_a_wide_interval_in_a_fine_bracket_doubles_the_seeds_at_every_value_it_reaches() -> None:
    """The bracket [1.01, 1.03] is fine, the interval [1.005, 1.5] wide: a resampled crossing
    lands anywhere from [1, 1.01] to [1.03, 2], so the seeds at 1, 1.01, 1.03 and 2 set its width."""
    p = plan()
    est, low, high = [1.02, 1.5], [1.005, 1.49], [1.5, 1.51]  # rho 0.5's bracket [1, 2] is coarse: locate
    sim = simulated(p, extra=[(0.2, g, s) for g in (1.01, 1.03, 3.5) for s in range(4)])
    blocks, assessment, _ = decide(p, p.refine, sim, boundary(est, low, high), 1e9)
    new = points(blocks)
    assert {x for x in new if x[0] == 0.2} == {(0.2, g, s) for g in (1.0, 1.01, 1.03, 2.0) for s in range(4, 8)}
    assert [d["action"] for d in assessment] == ["seeds", "locate"]
    assert assessment[0]["added"] == "seeds up to 8 at gamma 1, 1.01, 1.03, 2"
    assert assessment[0]["seeds"] == 4  # the most any value of the span holds, before the round


@pytest.mark.parametrize("low, high, action", [(0.9, 2.1, "locate"), (1.0, 2.6, "seeds"), (0.4, 2.0, "seeds")])
def test_an_interval_holding_the_bracket_locates_unless_it_reaches_half_a_bracket_past_it(low, high,
                                                                                        action) -> None:
    """Bracket [1, 2] around 1.5, precision 0.05: an interval 0.1 past each end (half-width 0.6,
    wider than the bracket's 0.5, as every interval holding it is) is limited by the grid; 0.6 past
    one end, by the noise."""
    p = plan()
    blocks, assessment, _ = decide(p, p.refine, simulated(p), boundary([1.5, np.nan], [low, np.nan],
                                                                       [high, np.nan]), 1e9)
    assert assessment[0]["action"] == action


def test_new_seeds_count_on_from_the_rows_least_seed() -> None:
    """A sweep of seeds 800-803 grows to 800-807 (not 0-3): repetitions on disjoint seed blocks
    stay disjoint as they refine."""
    block = [800, 801, 802, 803]
    p = plan(seeds=block)
    est, low, high = [1.02, 1.5], [1.005, 1.49], [1.5, 1.51]
    sim = simulated(p, extra=[(0.2, g, s) for g in (1.01, 1.03) for s in block])
    blocks, assessment, _ = decide(p, p.refine, sim, boundary(est, low, high), 1e9)
    assert {x for x in points(blocks) if x[0] == 0.2} == {(0.2, g, s) for g in (1.0, 1.01, 1.03, 2.0)
                                                          for s in range(804, 808)}
    assert assessment[0]["added"] == "seeds up to 8 at gamma 1, 1.01, 1.03, 2"


def test_seeds_fill_the_values_the_interval_reaches_up_to_the_most_any_holds() -> None:
    """Bracket ends at max_seeds and a neighbour inside the interval with the base seeds: the
    neighbour is brought up to max_seeds, the ends get nothing more."""
    p = plan(max_seeds=8)
    est, low, high = [1.02, 1.5], [1.005, 1.49], [1.5, 1.51]
    sim = simulated(p, extra=[(0.2, g, s) for g in (1.01, 1.03) for s in range(8)])
    blocks, assessment, _ = decide(p, p.refine, sim, boundary(est, low, high), 1e9)
    assert {x for x in points(blocks) if x[0] == 0.2} == {(0.2, g, s) for g in (1.0, 2.0) for s in range(4, 8)}
    assert assessment[0]["action"] == "seeds" and assessment[0]["seeds"] == 8


def test_precise_rows_get_nothing_and_the_round_says_why_it_stops() -> None:
    p = plan(precision=1.1)  # brackets of half-width 0.5 and 1 and intervals of 0.02 are precise
    blocks, assessment, reason = decide(p, p.refine, simulated(p), boundary([1.5, 3.0], [1.49, 2.99],
                                                                            [1.51, 3.01]), 1e9)
    assert blocks == [] and {d["action"] for d in assessment} == {"precise"}
    assert reason == "every boundary is precise"


def test_curve_rows_between_neighbours_that_differ() -> None:
    p = plan(precision=1.1, curve=["rho"])  # estimates 1.5 apart
    blocks, assessment, _ = decide(p, p.refine, simulated(p), boundary([1.5, 3.0], [1.49, 2.99], [1.51, 3.01]), 1e9)
    assert points(blocks) == {(0.35, g, s) for g in GAMMA for s in range(4)}
    assert [d["action"] for d in assessment][-1] == "curve"


def test_no_curve_row_between_neighbours_that_differ_within_their_noise() -> None:
    p = plan(precision=1.1, curve=["rho"])  # 1.5 apart, half-widths 0.8 and 0.9 (precise rows not)
    blocks, assessment, _ = decide(p, p.refine, simulated(p), boundary([1.5, 3.0], [0.7, 2.1], [2.3, 3.9]), 1e9)
    assert "curve" not in [d["action"] for d in assessment]
    assert all(r != 0.35 for r, _, _ in points(blocks))


def test_max_new_defers_the_least_urgent_rows() -> None:
    p = plan(points=1, max_new=4)
    blocks, assessment, _ = decide(p, p.refine, simulated(p), boundary([1.5, 3.0], [1.45, 2.6], [1.55, 3.4]), 1e9)
    # rho 0.5: half-width 0.4 in bracket [2, 4] (urgency 8) before rho 0.2: 0.05 in [1, 2] (1)
    assert points(blocks) == {(0.5, 3.0, s) for s in range(4)}
    assert [d["action"] for d in assessment] == ["deferred", "locate"]


def test_a_proposal_larger_than_max_new_is_deferred_and_said_so() -> None:
    p = plan(points=3, max_new=4)  # 3 values x 4 seeds
    blocks, assessment, reason = decide(p, p.refine, simulated(p), boundary([1.5, np.nan], [1.49, np.nan],
                                                                            [1.51, np.nan]), 1e9)
    assert blocks == [] and assessment[0]["action"] == "deferred"
    assert reason == "every row's proposal alone exceeds max_new = 4"


def test_max_seeds_stops_a_noisy_row() -> None:
    p = plan(max_seeds=4)
    sim = simulated(p, extra=[(0.2, g, s) for g in (1.01, 1.03) for s in range(4)])
    blocks, assessment, reason = decide(p, p.refine, sim, boundary([1.02, np.nan], [0.9, np.nan], [1.3, np.nan]), 1e9)
    assert blocks == [] and assessment[0]["action"] == "max_seeds"
    assert "max_seeds" in reason


def test_the_budget_defers_what_it_cannot_pay() -> None:
    p = plan()
    blocks, assessment, reason = decide(p, p.refine, simulated(p), boundary([1.5, np.nan], [1.4, np.nan],
                                                                            [1.6, np.nan]), 1e-3)
    assert blocks == [] and assessment[0]["action"] == "deferred"
    assert reason == "the core-hour budget is spent"


@pytest.mark.parametrize("refine, key, words", [
    ({"precision": 0}, "refine.precision", "less than or equal to the minimum"),
    ({"precision": -0.1}, "refine.precision", "less than or equal to the minimum"),
    ({"precision": 0.1, "core_hours": 1e-6}, "refine.core_hours", "no budget left"),
    ({"precision": 0.1, "boundaries": ["gamma_star"]}, "refine.boundaries", "unknown boundary"),
    ({"precision": 0.1, "curve": ["gamma"]}, "refine.curve", "no curve axis"),
    ({"precision": 0.1, "max_seeds": 2}, "refine.max_seeds", "below the 4 seeds"),
    ({"rounds": 3}, "refine.precision", "required key is missing"),
])
def test_bad_refine_settings_name_their_key(refine, key, words) -> None:
    config = {"experiments": {"critical_scaling": {"n": [64], "d": [16], "seeds": 4, "refine": refine}}}
    with pytest.raises(ConfigError) as err:
        load_sweep(config)
    assert str(err.value).startswith(f"experiments.critical_scaling.{key}:") and words in str(err.value)


def test_a_boundary_the_options_do_not_compute_is_refused() -> None:
    """eta_method none computes no eta: refining gamma_star_eta is refused naming the key, and
    the default (every boundary) is then lambda's alone."""
    section = {"n": [64], "d": [16], "seeds": 4, "eta_method": "none"}
    config = {"experiments": {"critical_scaling": {**section, "refine": {
        "precision": 0.1, "boundaries": ["gamma_star_eta"]}}}}
    with pytest.raises(ConfigError) as err:
        load_sweep(config)
    assert str(err.value) == ("experiments.critical_scaling.refine.boundaries: 'gamma_star_eta' is not computed "
                              "with these options (computed: gamma_star_lambda)")
    sweep = load_sweep({"experiments": {"critical_scaling": {**section, "refine": {"precision": 0.1}}}})
    plan = sweep.plans["critical_scaling"]
    assert [t.variable for t in plan.refine.targets] == ["gamma_star_lambda"]


def test_curve_rows_the_experiment_refuses_are_not_proposed(monkeypatch) -> None:
    p = plan(precision=1.1, curve=["rho"])

    def refuse(options, grid, prefix):
        if 0.35 in grid["rho"]:
            raise ConfigError(f"{prefix}.rho", "refused")

    monkeypatch.setattr(p.experiment, "check", refuse)
    blocks, assessment, _ = decide(p, p.refine, simulated(p), boundary([1.5, 3.0], [1.49, 2.99], [1.51, 3.01]), 1e9)
    assert blocks == [] and "curve" not in {d["action"] for d in assessment}


def test_collect_marks_exactly_the_values_it_places(tmp_path) -> None:
    """``simulated`` is where values are: a store holding more of the union's points than the
    rectangles ask for still counts, and every other point is NaN. A wanted point no store
    holds is an error naming it."""
    from attnsweep.reduce.aggregate import collect
    from attnsweep.run.job import run_job
    from attnsweep.stores.io import open_store

    config = {"device": "cpu", "experiments": {"critical_scaling": {
        "n": [16], "d": [8], "rho": [0.2, 0.5], "gamma": [1.0, 2.0], "seeds": 2, "wildcards": [],
        "refine": {"precision": 0.1}}}}
    p = load_sweep(config).plans["critical_scaling"]
    extra = {"n": [16], "d": [8], "rho": [0.5], "gamma": [1.5], "alpha": [0.0], "seed": [0, 1, 2]}
    p = p.with_extra([extra])
    runs = [run_job(spec, tmp_path / f"{k}.zarr".replace("/", "_"), device="cpu", threads=1, progress=False)
            for k, spec in p.jobs().items()]
    sweep = open_store(collect(runs, tmp_path / "sweep.zarr", p.coords(), [p.base()])).load()
    held = ~np.isnan(sweep["lambda"].transpose(*sweep["simulated"].dims).values)
    np.testing.assert_array_equal(sweep["simulated"].values, held)
    assert bool(sweep["simulated"].sel(rho=0.5, gamma=1.5, seed=2).squeeze())  # not asked for, yet held
    assert not sweep["simulated"].sel(rho=0.2, gamma=1.5).any()
    with pytest.raises(ValueError, match="1 grid points are in no run store"):
        collect(runs[:1], tmp_path / "partial.zarr", p.coords(), [p.base(), {**extra, "seed": [2]}])
