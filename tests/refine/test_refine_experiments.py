"""Refined sweeps of the four experiments besides critical_scaling (which test_refine covers):
reduce and boundary on a union of rectangles whose points hold different seeds, and rows that
are absent altogether.

Each experiment runs a tiny plan whose base grid holds seeds 0-2, plus two recorded rectangles
as refinement adds them: seeds 3-5 at one point (row A: a ``seeds`` decision) and a new value of
a curve axis at one value of another axis (a ``curve`` row, which leaves that value's other
rows absent). ``collect`` writes the union with NaN holes and the ``simulated`` mask, as the
workflow does. Against it:

- every pair simulated (the base grid) gives the numbers of a sweep without the mask, bit for bit;
- dropping a row (NaN and not simulated) changes no other row, bit for bit, and no exception;
- row A gives what row A alone (all six seeds, a product grid) gives, and every other row what
  the base grid (three seeds) gives; seed standard errors count each point's own seeds;
- the figures draw, and a refinement round decides on the boundary's rows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from attnsweep.contract import Target
from attnsweep.plan.config import load_sweep
from attnsweep.plan.experiment_plan import Plan
from attnsweep.reduce.aggregate import collect
from attnsweep.refine.rules import decide
from attnsweep.run.job import run_job
from attnsweep.stores.io import open_store

BASE_SEEDS = [0, 1, 2]
EXTRA_SEEDS = [3, 4, 5]


@dataclass(frozen=True)
class Case:
    section: dict
    curve: tuple[str, float, str, float]  # (curve axis, new value, other axis, the value holding the new row)
    drop: dict[str, float]  # a base row (not row A) to drop
    se: str  # a variable whose seed standard error is checked


CASES = {
    "sphere_clustering": Case(
        {"n": [8], "d": [2, 3], "rho": [0.0], "beta": [0.5, 4.0], "gamma": [0.0], "t_max": 10.0, "outputs": 21},
        ("beta", 2.0, "d", 2), {"d": 3, "beta": 0.5}, "clustered"),
    "cluster_emergence": Case(
        {"n": [12], "d": [1, 3], "scale": [1.0, 5.0], "t_max": 10.0, "outputs": 21, "snapshot_times": [0, 10]},
        ("scale", 3.0, "d", 1), {"d": 3, "scale": 1.0}, "defect"),
    "causal_clustering": Case(
        {"n": [6], "d": [2, 3], "beta": [0.5, 2.0], "separation": 1.0, "values": ["identity", "top_simple"],
         "t_max": 10.0, "outputs": 11, "snapshot_times": [0, 10]},
        ("beta", 1.0, "d", 2), {"d": 3, "beta": 2.0}, "clusters"),
    "mixture_training": Case(
        {"K": [2], "L": [3], "omega": [0.1, 0.3], "m": [4, 8], "lr": [0.5], "modes": ["joint"], "steps": 250,
         "record_every": 10},
        ("omega", 0.2, "m", 8), {"omega": 0.3, "m": 4}, "loss_hard"),
}


@dataclass
class Refined:
    name: str
    plan: Plan
    case: Case
    sweep: xr.Dataset  # base grid + seeds 3-5 at row A + a curve row
    row_a: dict[str, float]

    @property
    def experiment(self):
        return self.plan.experiment

    @property
    def target(self) -> Target:
        (target,) = self.experiment.targets
        return target

    def base(self) -> xr.Dataset:
        """The base product grid: seeds 0-2, the configured values of every axis."""
        return self.sweep.sel({"seed": BASE_SEEDS, **{a: v for a, v in self.plan.grid.items()}})

    def alone(self) -> xr.Dataset:
        """Row A alone, with its six seeds: a product grid of one point."""
        return self.sweep.sel({a: [v] for a, v in self.row_a.items()})


def analyse(experiment, sweep: xr.Dataset) -> tuple[xr.Dataset, xr.Dataset]:
    summary = experiment.reduce(sweep)
    _, bnd = experiment.boundary(sweep, summary)
    return summary, bnd


@pytest.fixture(scope="module")
def build(tmp_path_factory) -> Callable[[str], Refined]:
    """``build(experiment)``: its refined sweep, made on first use and shared by the module's tests."""
    done: dict[str, Refined] = {}

    def get(name: str) -> Refined:
        if name not in done:
            done[name] = refine(name, tmp_path_factory.mktemp(name))
        return done[name]

    return get


@pytest.fixture(params=list(CASES))
def refined(request, build) -> Refined:
    return build(request.param)


def refine(name: str, folder: Path) -> Refined:
    case = CASES[name]
    section = {**case.section, "seeds": len(BASE_SEEDS), "wildcards": [],
               "refine": {"precision": 1e-3, "curve": [case.curve[0]], "max_seeds": 12}}
    plan = load_sweep({"dtype": "float64", "device": "cpu", "experiments": {name: section}}).plans[name]
    row_a = {axis: values[0] for axis, values in plan.grid.items()}
    axis, value, other, at = case.curve
    plan = plan.with_extra([{**{a: [v] for a, v in row_a.items()}, "seed": EXTRA_SEEDS},
                            {**plan.grid, axis: [value], other: [at], "seed": BASE_SEEDS}])
    runs = [run_job(spec, folder / "runs" / f"{path}.zarr", device="cpu", threads=1, progress=False)
            for path, spec in plan.jobs().items()]
    sweep = open_store(collect(runs, folder / "sweep.zarr", plan.coords(), [plan.base(), *plan.extra])).load()
    return Refined(name, plan, case, sweep, row_a)


def dropped(sweep: xr.Dataset, row: dict[str, float]) -> xr.Dataset:
    """The sweep with ``row`` absent: NaN in every variable that has its dims, simulated False."""
    out = sweep.copy(deep=True)
    for var in out.data_vars:
        if set(row) <= set(out[var].dims):
            out[var].loc[row] = False if var == "simulated" else np.nan
    return out


def at(da: xr.DataArray, row: dict[str, float]) -> xr.DataArray:
    """Boolean (da's dims) of the entries at ``row``."""
    hit = xr.ones_like(da, dtype=bool)
    for axis, value in row.items():
        hit = hit & (da[axis] == value)
    return hit.transpose(*da.dims)


def interval(target: Target) -> tuple[str, str, str]:
    return target.variable, f"{target.variable}_low", f"{target.variable}_high"


# ------------------------------------------------------------------ the sweep itself
def test_the_sweep_is_refined_as_the_workflow_writes_it(refined: Refined) -> None:
    held = refined.sweep["simulated"].sum("seed")
    axis, value, other, at_value = refined.case.curve
    assert int(held.sel(refined.row_a)) == 6
    assert int(held.sel({axis: value, other: at_value}).min()) == 3
    absent = held.sel({axis: value}).where(held[other] != at_value, drop=True)  # the curve row's other rows
    assert absent.size and int(absent.max()) == 0
    assert bool(refined.base()["simulated"].all())


def test_targets_name_intervals_over_every_grid_axis(refined: Refined) -> None:
    """Each declared boundary has its interval in boundary.zarr, and its rows span every grid axis
    (refinement looks a row's seeds up by its grid point); curve axes are grid axes."""
    _, bnd = analyse(refined.experiment, refined.sweep)
    for target in refined.experiment.targets:
        assert target.crossing is None  # located along the output time (or step)
        dims = bnd[target.variable].dims
        for name in interval(target):
            assert bnd[name].dims == dims
        assert set(refined.experiment.axis_names) <= set(dims)
        assert set(target.curves) <= set(refined.experiment.axis_names)


# ------------------------------------------------------------------ (a) the product grid
def test_every_pair_simulated_is_the_sweep_without_the_mask(refined: Refined) -> None:
    """On the base grid ``simulated`` is all True: summary and boundary are those of the same
    sweep without the mask, bit for bit (NaN where NaN)."""
    base = refined.base()
    plain = base.drop_vars("simulated")
    for masked, unmasked in zip(analyse(refined.experiment, base), analyse(refined.experiment, plain)):
        xr.testing.assert_identical(masked, unmasked)


# ------------------------------------------------------------------ (b) a dropped row
def test_a_dropped_row_changes_no_other_row(refined: Refined) -> None:
    """Row B absent (as a curve row leaves rows): its boundary and standard errors are NaN, and
    every variable of every other row (summary and boundary) is bit for bit that of the sweep
    holding B; the other rows cross, so this is no NaN == NaN."""
    row = refined.case.drop
    full = analyse(refined.experiment, refined.sweep)
    without = analyse(refined.experiment, dropped(refined.sweep, row))
    for name, got, want in per_row(refined, without, full):
        hit = at(want, row).values
        np.testing.assert_array_equal(got.values[~hit], want.values[~hit], err_msg=name)
    se = f"{refined.case.se}_se"
    for da in [*(without[1][v] for v in interval(refined.target)), without[0][se]]:
        assert np.isnan(da.values[at(da, row).values]).all(), da.name
    estimate = without[1][refined.target.variable]
    assert np.isfinite(estimate.values[~at(estimate, row).values]).sum() >= 2


def per_row(refined: Refined, got: tuple[xr.Dataset, xr.Dataset], want: tuple[xr.Dataset, xr.Dataset],
            where: dict[str, list] | None = None):
    """(name, got, want) of every summary and boundary variable over every grid axis (a value
    per row), ``got`` at the coordinates ``where`` (default: all)."""
    axes = set(refined.experiment.axis_names)
    for mine, theirs in zip(got, want):
        for name in theirs.data_vars:
            if axes <= set(theirs[name].dims):
                yield name, (mine[name] if where is None else mine[name].sel(where)), theirs[name]


# ------------------------------------------------------------------ (c) a row with more seeds
def test_a_row_with_more_seeds_is_that_row_alone(refined: Refined) -> None:
    """Row A holds six seeds, the others three: every variable of A (summary and boundary: seed
    means and standard errors, crossings and intervals, bands, finals, theory checks) is that of
    A alone with its six seeds, every other base row's that of the base grid's three seeds. The
    estimates are equal bit for bit; intervals draw the same seeds as on a product grid, summed
    in another order: equal to rounding."""
    full = analyse(refined.experiment, refined.sweep)
    row = {a: [v] for a, v in refined.row_a.items()}
    alone = analyse(refined.experiment, refined.alone())
    for name, got, want in per_row(refined, full, alone, row):
        np.testing.assert_allclose(got.values, want.values, rtol=1e-12, atol=0, err_msg=f"row A: {name}")
    grid = dict(refined.plan.grid)
    base = analyse(refined.experiment, refined.base())
    for name, got, want in per_row(refined, full, base, grid):
        others = ~at(want, refined.row_a).values
        np.testing.assert_allclose(got.values[others], want.values[others], rtol=1e-12, atol=0,
                                   err_msg=f"base rows: {name}")
    est = full[1][refined.target.variable]
    np.testing.assert_array_equal(est.sel(row).values, alone[1][refined.target.variable].values)
    assert np.isfinite(est.sel(row).values).any()
    want = base[1][refined.target.variable]
    others = ~at(want, refined.row_a).values
    np.testing.assert_array_equal(est.sel(grid).values[others], want.values[others])
    assert np.isfinite(want.values[others]).sum() >= 2
    # Six seeds against three: A's standard error is its own, not the base grid's.
    se = f"{refined.case.se}_se"
    assert not np.allclose(full[0][se].sel(row).values, base[0][se].sel(row).values, equal_nan=True)


# ------------------------------------------------------------------ figures and a round
def test_figures_draw_a_refined_sweep(refined: Refined) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summary, bnd = analyse(refined.experiment, dropped(refined.sweep, refined.case.drop))
    for fig in refined.experiment.figures(refined.plan.grid, refined.plan.options):
        plt.close(refined.experiment.draw(fig.draw, fig.params, summary, bnd))


def test_a_round_decides_on_every_row(refined: Refined) -> None:
    """attnsweep.refine.rules reads the boundary: every row holding seeds is assessed. Every
    boundary here is located in time, and at precision 1e-3 the outputs' spacing around each
    crossing (which its interval holds) is wider than the precision allows: those rows say so
    (``outputs``) and add nothing, as more seeds cannot narrow them. No curve row: whether
    neighbours differ beyond their noise is unknown while their intervals are (3 and 6 seeds,
    under MIN_SEEDS; tests/refine/test_refine.py checks the curve rule on boundaries with
    intervals)."""
    _, bnd = analyse(refined.experiment, refined.sweep)
    plan = refined.plan
    blocks, assessment, reason = decide(plan, plan.refine, refined.sweep["simulated"], bnd, 1e12)
    rows = bnd[refined.target.variable]
    held = refined.sweep["simulated"].any("seed")
    expected = int(held.broadcast_like(rows).sum())
    assert len(assessment) == expected
    assert "outputs" in {d["action"] for d in assessment} <= {"outputs", "seeds", "no crossing"}
    assert all(d["new_points"] == 0 for d in assessment if d["action"] == "outputs")
    assert blocks or "output spacing" in reason


# ------------------------------------------------------------------ fits across rows
def test_causal_beta_exponent_fits_the_betas_held_with_their_common_seeds(build) -> None:
    """The beta exponent of the cluster count resamples a seed jointly across beta: on a refined
    sweep, per (n, d, value, mask), over the betas the line holds and the seeds all of them hold.
    d = 3 lacks the curve row (beta 1) and is the base grid's line; d = 2 holds it, and row A's
    extra seeds are left out."""
    from attnsweep.experiments.causal_clustering import theory

    refined = build("causal_clustering")
    _, bnd = analyse(refined.experiment, refined.sweep)
    _, bnd_b = analyse(refined.experiment, refined.base())
    names = ("exponent", "exponent_low", "exponent_high")
    for name in (*names, "exponent_t"):
        np.testing.assert_array_equal(bnd[name].sel(d=3).values, bnd_b[name].sel(d=3).values, err_msg=name)
    assert np.isfinite(bnd["exponent"].sel(d=3).values).all()
    counts = refined.sweep["clusters"].isel(t=-1).sel(d=2, n=6, seed=BASE_SEEDS)
    for v, m in np.ndindex(counts.sizes["value"], counts.sizes["causal"]):
        one = counts.isel(value=v, causal=m).transpose("beta", "seed").values
        want = theory.scaling_exponent(refined.sweep["beta"].values, one)
        got = [float(bnd[name].sel(d=2, n=6).isel(value=v, causal=m)) for name in names]
        np.testing.assert_array_equal(got, want)


def test_mixture_fit_over_k_bootstraps_each_row_over_its_seeds(build) -> None:
    """t* = B (K - K_0) is fitted to bootstrap replicates of every K's crossing: on a refined sweep
    each row's replicates draw its own seeds, so a line of base rows fits as on the base grid.
    K = 3 is K = 2's sweep one record later (t* + 5 flow time)."""
    refined = build("mixture_training")

    def with_k3(sweep: xr.Dataset) -> xr.Dataset:
        later = sweep.copy()
        later["loss_hard"] = sweep["loss_hard"].shift(step=1).fillna(sweep["loss_hard"].isel(step=0))
        return xr.concat([sweep, later.assign_coords(K=[3])], "K", data_vars="minimal", coords="minimal")

    _, bnd = analyse(refined.experiment, with_k3(refined.sweep))
    _, bnd_b = analyse(refined.experiment, with_k3(refined.base()))
    np.testing.assert_allclose(bnd["t_star"].sel(K=3, omega=0.3).values - bnd["t_star"].sel(K=2, omega=0.3).values,
                               5.0, rtol=1e-9)
    names = [f"fit_{name}" for name in ("B", "K0", "B_low", "B_high", "K0_low", "K0_high")]
    for omega, m in ((0.3, 4), (0.3, 8), (0.1, 8)):  # lines of base rows (row A is omega 0.1, m 4)
        for name in names:
            got, want = bnd[name].sel(omega=omega, m=m).values, bnd_b[name].sel(omega=omega, m=m).values
            assert np.isfinite(want).all(), name
            np.testing.assert_allclose(got, want, rtol=1e-9, atol=0, err_msg=f"omega {omega}, m {m}: {name}")
    assert np.isfinite(bnd["fit_B_low"].sel(omega=0.2, m=8).values).all()  # the curve row's line fits too
