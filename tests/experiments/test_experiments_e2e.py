"""Every built-in experiment besides critical_scaling (which has the full suites of test_workflow,
test_resilience and test_extend) through real Snakemake runs of its tiny config
(tests/tiny_configs/<experiment>.yaml; test_slurm runs the same configs on SLURM):

- a whole run to figures: every figure the experiment declares is drawn (tests/helpers/figcheck.py: one
  PDF page, every axes of the figure holds data, and its PNG panel shows it);
- the boundary table against independent truth: the crossing or fit recomputed here from
  sweep.zarr's per-seed data, and the theory the docs cite (Gamma_inf,delta for
  sphere_clustering, the reference t* table for mixture_training (docs/papers/002.md §6), (d - 1)/2
  and Lemma C.1 for causal_clustering; cluster_emergence's theorems are checked on the same run by
  test_cluster_emergence);
- growing the grid and a kill -9 of the grown run: test_experiments_grow_e2e (its own module, so
  that the suite's workers share the work);
- every experiment's aggregate stores and boundary.csv against the output contract written in
  workflow/OUTPUTS.md (variables, dims, units, long_name, common attrs, columns).

A new built-in experiment needs its tiny config, a boundary check in CHECKS and a section of
workflow/OUTPUTS.md; each test says which it lacks. An experiment installed from another package
is not run here: its own contract test runs it (docs/extending.md).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers.figcheck import check_figure, data_axes
from helpers.output_contract import documented_stores, store_problems
from helpers.project import BUILT_IN, tiny
from helpers.workflow_runs import chord_crossing, crossing, final_stores

from attnsweep.plan.config import load_sweep
from attnsweep.stores.io import open_store

EXPERIMENTS = [name for name in BUILT_IN if name != "critical_scaling"]
AGGREGATES = ("sweep.zarr", "summary.zarr", "boundary.zarr")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", params=EXPERIMENTS)
def reference(request, tiny_run) -> tuple[str, Path]:
    """One uninterrupted run of the tiny config, figures included (shared, read-only)."""
    return request.param, tiny_run(request.param)


def test_whole_run_draws_every_figure(reference: tuple[str, Path]) -> None:
    """Every declared figure, PNG and PDF, is drawn: figcheck against the number of axes of the
    same figure drawn here from the run's summary and boundary (colorbars aside)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    experiment, workdir = reference
    plan = load_sweep(tiny(experiment)).plans[experiment]
    out = workdir / "results" / experiment
    summary, bnd = (open_store(out / name).load() for name in ("summary.zarr", "boundary.zarr"))
    problems = []
    for fig in plan.experiment.figures(plan.grid, plan.options):
        drawn = plan.experiment.draw(fig.draw, fig.params, summary, bnd)
        panels = data_axes(drawn)
        plt.close(drawn)
        problems += check_figure(out / "figures" / f"{fig.name}.png", out / "figures" / f"{fig.name}.pdf", panels)
    assert problems == []
    assert len(final_stores(out / "runs")) == len(plan.jobs())


# ------------------------------------------------------------------ boundaries against truth


def check_sphere_clustering(out: Path) -> None:
    """t*: the seed-mean clustered fraction crossing 1/2, recomputed from the per-realisation
    fractions; against Gamma_inf,delta (Eq. 6.12, ``t_star_theory``), which it approaches as d
    grows. Measured at n = 8: t* - theory = 0.54, 0.75, 0.83 at d = 4, 1.51 and 1.10 at d = 2; a
    t* read at the 0.1 or 0.9 crossing is 0.5 to 4 off at d = 4."""
    table = pd.read_csv(out / "boundary.csv")
    sweep = open_store(out / "sweep.zarr")
    mean, t = sweep["clustered"].mean("seed"), sweep["t"].values
    for row in table.itertuples():
        curve = mean.sel(n=row.n, d=row.d, rho=row.rho, beta=row.beta, gamma=row.gamma, method="nearest")
        assert crossing(t, curve.values, 0.5) == pytest.approx(row.t_star, rel=1e-5, nan_ok=True), row
    gap = table.set_index(["d", "beta"])["t_star_minus_theory"]
    star, theory = table["t_star"].values, table["t_star_theory"].values
    # the CSV's 6 significant digits: each of t*, theory and their difference within 5e-6 of itself
    rounding = 5e-6 * (abs(star) + abs(theory) + abs(gap.values)) + 1e-12
    np.testing.assert_array_less(abs(gap.values - (star - theory)), rounding)
    low, high = min(table["d"]), max(table["d"])
    largest = table[table["d"] == high]
    within = largest[largest["t_star_theory"] < t[-1] - 1]  # theory crosses a unit before t_max
    assert len(within) >= 2 and within["t_star"].notna().all()
    assert largest["t_star_minus_theory"].dropna().between(-0.25, 1.0).all(), largest
    both = pd.concat([gap.loc[low], gap.loc[high]], axis=1, keys=["low", "high"]).dropna()
    assert len(both) >= 2 and (both["high"].abs() < both["low"].abs()).all(), both  # closer at larger d


def check_mixture_training(out: Path) -> None:
    """t*: the first flow time lr x step at which the seed-mean hard loss falls below (1/2) log 2,
    recomputed; joint GD against the reference table of docs/papers/002.md §6 (109 and 75 at K = 2, omega = 0.1
    and 0.3; infinite width, lr = 0.1). Measured at lr = 0.5: m = inf 110.9 and 75.9 (+1.7%,
    +1.1%), m = 8 112.3 and 76.4 (+3.0%, +1.9%); one record later (5 time units) is +4.6 to
    +6.7%. The infinite-width model is deterministic: its interval has no width."""
    from attnsweep.experiments.mixture_training import theory

    table = pd.read_csv(out / "boundary.csv")
    sweep = open_store(out / "sweep.zarr")
    modes = sweep.attrs["mode_names"].split()
    hard = sweep["loss_hard"].mean("seed")
    for row in table.itertuples():
        curve = hard.sel(K=row.K, L=row.L, omega=row.omega, m=row.m, lr=row.lr, b=row.b,
                         mode=modes.index(row.mode), engine=0)
        want = crossing(sweep["step"].values * row.lr, -curve.values, -math.log(2) / 2)
        assert want == pytest.approx(row.t_star, rel=1e-5, nan_ok=True), row
    reference = theory.reference_tstar()
    joint = table[table["mode"] == "joint"]
    assert len(joint) == 4
    for row in joint.itertuples():
        tolerance = 0.03 if math.isinf(row.m) else 0.05  # docs/papers/002.md §6: finite m within 7% of the table
        assert row.t_star == pytest.approx(reference.loc[row.omega, row.K], rel=tolerance), row
        assert row.t_star_flag == "too_few_seeds" and row.t_star_seeds == 2  # 2 seeds: no interval


def check_causal_clustering(out: Path) -> None:
    """The beta exponent of the meta-stable cluster count (V = I), refitted here as the
    least-squares slope of log(seed-mean clusters at t_max) on log beta, against (d - 1)/2
    (Section 5, docs/papers/003.md §5 item 3). d = 2 must hit 1/2 (measured 0.46 and 0.47, both intervals
    hold 1/2). At d = 3, 24 tokens saturate at beta = 64 (14 to 19 clusters), so the fit falls
    short of 1 (measured 0.67 causal, 0.80 full) but must stay well above d = 2's. The strong
    centre counts of 3 realisations against Lemma C.1 (measured within 7-36%; test_causal checks
    it to 4 standard errors on 400), and Renyi counts at most the saturated c_R 2 pi / delta (d = 2:
    measured 2, 4.67, 7.67 against 2.35, 4.70, 9.39)."""
    table = pd.read_csv(out / "boundary.csv")
    sweep = open_store(out / "sweep.zarr")
    last = sweep["clusters"].isel(t=-1).mean("seed")
    beta = np.log(sweep["beta"].values)
    identity = table[table["V"] == "identity"].drop_duplicates(["d", "causal"]).set_index(["d", "causal"])
    for row in table.drop_duplicates(["d", "value", "causal"]).itertuples():
        counts = last.sel(n=row.n, d=row.d, value=row.value, causal=row.causal).values
        assert np.polyfit(beta, np.log(counts), 1)[0] == pytest.approx(row.exponent, rel=1e-5, abs=1e-6), row
    assert len(identity) == 4
    for causal in (0, 1):
        line, plane = identity.loc[(2, causal)], identity.loc[(3, causal)]
        assert line["exponent"] == pytest.approx(0.5, abs=0.1) and line["exponent_low"] <= 0.5 <= line["exponent_high"]
        assert 0.6 <= plane["exponent"] <= 1.05 and plane["exponent"] - line["exponent"] >= 0.15
    assert (table["exponent_theory"] == (table["d"] - 1) / 2).all()
    gap = (table["strong_count"] - table["strong_count_theory"]).abs()
    shown = table[["d", "beta", "strong_count", "strong_count_theory"]]
    assert (gap <= 0.6 + 0.1 * table["strong_count_theory"]).all(), shown
    assert (table["strong_count"] <= table["renyi_count"]).all()
    line = table[table["d"] == 2]  # the mean of 3 realisations: within 20% of the bound it lies below
    assert (line["renyi_count"] <= 1.2 * line["renyi_count_saturated"]).all()


def check_cluster_emergence(out: Path) -> None:
    """t*, t_90, t_10: the seed-mean Boolean defect falling below 1/2, 0.9 and 0.1, recomputed
    (each curve preceded by b = 1 at t = 0-, as the boundary defines it); t* is reached inside
    the run for every (d, a). The theorems' limits of the same run: test_cluster_emergence."""
    table = pd.read_csv(out / "boundary.csv")
    sweep = open_store(out / "sweep.zarr")
    assert not sweep["defect"].isnull().any()  # no realisation flagged: no forward fill to redo
    mean, t = sweep["defect"].mean("seed"), sweep["t"].values
    x = np.concatenate([t[:1], t])
    for row in table.itertuples():
        curve = -np.concatenate([[1.0], mean.sel(n=row.n, d=row.d, scale=row.scale).values])
        star = t[0] if curve[1] >= -0.5 else crossing(t, curve[1:], -0.5)  # t*: read on the outputs
        assert star == pytest.approx(row.t_star, rel=1e-5, abs=1e-9, nan_ok=True)
        for column, level in (("t_90", 0.9), ("t_10", 0.1)):
            assert chord_crossing(x, curve, -level) == pytest.approx(getattr(row, column), rel=1e-5, abs=1e-9,
                                                                     nan_ok=True)
    assert table["t_star"].between(0, t[-1]).all() and (table["t_90"] <= table["t_star"]).all()
    assert (table["t_star"] <= table["t_10"]).all()


def check_noisy_clustering(out: Path) -> None:
    """K_uniform, K_point: the seed-mean time-averaged |m| crossing the level along K, recomputed from
    the per-seed averages; the mean-field columns against the solver run here (K_c, K_s in units of
    K_#, to the CSV's 6 digits); the mean-field crossing from uniform tokens is
    never below K_# (the uniform state is stable there) nor below the one from one point. Every
    crossing is found (the tiny K grid, 0.5 to 2.5 K_#, spans it at n = 16: |m| ~ 0.25 below, > 0.9
    above)."""
    from attnsweep.experiments.noisy_clustering import theory

    table = pd.read_csv(out / "boundary.csv")
    sweep = open_store(out / "sweep.zarr")
    level, k = sweep.attrs["level"], sweep["K"].values
    mean = sweep["order"].mean("seed")
    for row in table.itertuples():
        for flag, initial in enumerate(("uniform", "point")):
            curve = mean.sel(n=row.n, d=row.d, beta=row.beta, start=flag).values
            assert crossing(k, curve, level) == pytest.approx(getattr(row, f"K_{initial}"), rel=1e-5), (row, initial)
        solved = theory.transition(row.beta, row.d)
        assert row.K_c == pytest.approx(solved.k_c / solved.k_sharp, rel=1e-5)  # the CSV: 6 digits
        assert row.K_s == pytest.approx(solved.k_s / solved.k_sharp, rel=1e-5)
    assert table[["K_uniform", "K_point"]].notna().all().all()
    assert (table["K_uniform_mean_field"] >= 1).all()
    assert (table["K_uniform_mean_field"] >= table["K_point_mean_field"]).all()


def check_normalized_attention(out: Path) -> None:
    """t* and beta*: the seed-mean clustered fraction crossing 1/2 along t, and its complement at
    t_max along beta, recomputed. Exact facts of the schemes (docs/papers/normalization.md §3):
    Mix-LN is Post-LN, the same numbers, before its switch tau; a Peri-LN layer moves a radius by
    at most dt, so no radius leaves [1 - t, 1 + t]; Post-LN's radii stay 1."""
    table = pd.read_csv(out / "boundary.csv")
    sweep = open_store(out / "sweep.zarr").load()
    schemes = sweep["scheme"].attrs["flag_meanings"].split()
    flag = {name: schemes.index(name) for name in schemes}
    mean, t, beta = sweep["clustered"].mean("seed"), sweep["t"].values, sweep["beta"].values
    for row in table.itertuples():
        curve = mean.sel(n=row.n, d=row.d, heads=row.heads, scheme=flag[row.scheme])
        assert crossing(t, curve.sel(beta=row.beta).values, 0.5) == pytest.approx(row.t_star, rel=1e-5,
                                                                                   nan_ok=True), row
        assert crossing(beta, 1 - curve.isel(t=-1).values, 0.5) == pytest.approx(row.beta_star, rel=1e-5,
                                                                                  nan_ok=True), row
    assert table["t_star"].notna().any() and table["beta_star"].notna().any()
    tau = sweep.attrs["tau"]
    before = sweep.sel(t=t[t < tau])
    for var in ("clustered", "min_cosine", "radius"):
        np.testing.assert_array_equal(before[var].sel(scheme=flag["mix_ln"]).values,
                                      before[var].sel(scheme=flag["post_ln"]).values, err_msg=var)
    assert (sweep["radius"].sel(scheme=flag["mix_ln"]).isel(t=-1) > 1).all()  # and then it turns Pre-LN
    peri = sweep.sel(scheme=flag["peri_ln"])
    # float32 roundoff: each layer's r |u| rounds a few times at relative 2^-24; over t / dt layers,
    # 4 of them a layer, on radii up to 1 + t.
    slack = 4 * (t / sweep.attrs["dt"]) * 2.0**-24 * (1 + t)
    assert ((peri["radius_max"] <= 1 + t + slack) & (peri["radius"] >= 1 - t - slack)).all()
    assert (sweep["radius_max"].sel(scheme=flag["post_ln"]) == 1).all()


def check_circle_synchronization(out: Path) -> None:
    """beta_c from the random starts recomputed from the classes of the sweep; the structured search's
    beta_c(3) = beta_c(6) = -2/3 (three equal clusters, docs/papers/circle.md), to its bisection
    tolerance; no certified spurious attractor at beta >= -0.16 (Polyanskiy, Rigollet, Yao) nor above
    the structured threshold; every spurious one certified."""
    table = pd.read_csv(out / "boundary.csv")
    sweep = open_store(out / "sweep.zarr").load()
    spurious = sweep["kind"] == 1
    beta = sweep["beta"].values
    for row in table.itertuples():
        flag = sweep["normalisation"].attrs["flag_meanings"].split().index(row.normalisation)
        found = spurious.sel(n=row.n, normalisation=flag).any("seed").values
        assert row.beta_c_low == (beta[found].max() if found.any() else pytest.approx(np.nan, nan_ok=True)), row
        assert abs(row.beta_c_structured + 2 / 3) <= 1e-6, row  # the CSV's 6 digits
    assert not spurious.where(sweep["beta"] >= -0.16, False).any()
    assert (table["excess"].dropna() <= 0).all()
    assert (sweep["certified"].where(spurious, 1) == 1).all()


CHECKS: dict[str, Callable[[Path], None]] = {
    "sphere_clustering": check_sphere_clustering,
    "mixture_training": check_mixture_training,
    "causal_clustering": check_causal_clustering,
    "cluster_emergence": check_cluster_emergence,
    "noisy_clustering": check_noisy_clustering,
    "normalized_attention": check_normalized_attention,
    "circle_synchronization": check_circle_synchronization,
}


def no_check(experiment: str) -> str:
    return (f"tests/experiments/test_experiments_e2e.py: CHECKS has no boundary check of {experiment}: "
            f"add check_{experiment}(out), the boundary recomputed from sweep.zarr, to the dict CHECKS")


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_every_experiment_has_a_boundary_check(experiment: str) -> None:
    """Before any run: each experiment's boundary has a check of its own in CHECKS."""
    assert experiment in CHECKS, no_check(experiment)


def test_boundary_meets_independent_truth(reference: tuple[str, Path]) -> None:
    """boundary.csv of the tiny run: numbers, not a header; see each experiment's check."""
    experiment, workdir = reference
    assert experiment in CHECKS, no_check(experiment)
    CHECKS[experiment](workdir / "results" / experiment)


@pytest.mark.parametrize("experiment", BUILT_IN)
def test_stores_keep_the_output_contract(experiment: str, tiny_run: Callable[[str], Path]) -> None:
    """Every aggregate store of the tiny run against workflow/OUTPUTS.md: the same variables (those
    marked "(with ...)" may be absent), each with the documented dims, units and long_name."""
    contract = documented_stores(experiment, (*AGGREGATES, "boundary.csv"))  # before the run: fails fast
    out = tiny_run(experiment) / "results" / experiment
    problems = []
    for store in AGGREGATES:
        problems += store_problems(store, open_store(out / store), contract[store])
    columns = list(pd.read_csv(out / "boundary.csv").columns)
    if columns != contract["boundary.csv"]:
        problems.append(f"boundary.csv columns {columns}, documented {contract['boundary.csv']}")
    assert problems == []
