"""End-to-end: real `snakemake` runs of a tiny config in a temporary directory."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from helpers import processes
from helpers.figcheck import check_figure, data_axes
from helpers.workflow_runs import crossing

from attnsweep.stores.io import open_store

REPO = Path(__file__).resolve().parents[2]
SNAKEFILE = REPO / "Snakefile"

TINY = {
    "device": "cpu",
    "experiments": {
        "critical_scaling": {
            "n": [16],
            "d": [4, 32],
            "rho": [0.2, 0.5, 0.8],
            "gamma": {"start": 0.5, "stop": 8.0, "num": 5},
            "seeds": 2,
        }
    },
}

pytestmark = pytest.mark.slow


def snakemake(workdir: Path, config: dict, *args: str) -> subprocess.CompletedProcess:
    configfile = workdir / "config.yaml"
    configfile.write_text(yaml.safe_dump(config))
    cmd = [sys.executable, "-m", "snakemake", "-s", str(SNAKEFILE), "--directory", str(workdir),
           "--configfile", str(configfile), "--cores", "2", *args]
    return processes.run(cmd, capture_output=True, text=True)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory) -> Path:
    workdir = tmp_path_factory.mktemp("sweep")
    result = snakemake(workdir, TINY)
    assert result.returncode == 0, result.stderr[-3000:]
    return workdir


def test_builds_every_output(tiny_run: Path) -> None:
    """Every figure drawn (figcheck: one PDF page, every axes of the figure, drawn here from the
    run's summary and boundary, holds data and shows it in the PNG), every run store and log."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from attnsweep.registry import get

    out = tiny_run / "results" / "critical_scaling"
    summary, bnd = (open_store(out / name).load() for name in ("summary.zarr", "boundary.zarr"))
    problems = []
    figures = {"lambda_n~16": ("heatmaps", {"observable": "lambda", "n": 16}),
               "eta_n~16": ("heatmaps", {"observable": "eta", "n": 16}), "finite_size": ("finite_size", {})}
    for name, (function, params) in figures.items():
        fig = get("critical_scaling").draw(function, params, summary, bnd)
        panels = data_axes(fig)
        plt.close(fig)
        problems += check_figure(out / "figures" / f"{name}.png", out / "figures" / f"{name}.pdf", panels)
    assert problems == []
    assert (out / "boundary.zarr" / "zarr.json").exists()
    runs = sorted(p.relative_to(out / "runs").as_posix() for p in (out / "runs").glob("*/*/*/*.zarr"))
    assert [run.rsplit("/", 1)[0] for run in runs] == [f"n~16/d~{d}/seed~{s}" for d in (32, 4) for s in (0, 1)]
    assert not list(out.rglob(".*.tmp-*")), "temporary siblings left behind"
    for run in runs:
        assert (tiny_run / "logs" / "critical_scaling" / "simulate" / run.replace(".zarr", ".log")).exists()


def test_second_run_does_nothing(tiny_run: Path) -> None:
    result = snakemake(tiny_run, TINY, "--dry-run")
    assert result.returncode == 0
    assert "Nothing to be done" in result.stdout + result.stderr


def test_aggregates_hold_every_axis(tiny_run: Path) -> None:
    out = tiny_run / "results" / "critical_scaling"
    sweep = open_store(out / "sweep.zarr")
    assert dict(sweep["lambda"].sizes) == {"n": 1, "d": 2, "seed": 2, "rho": 3, "gamma": 5, "alpha": 1}
    assert sweep.attrs["runs"] == 4
    assert not np.isnan(sweep["lambda"].values).any()
    summary = open_store(out / "summary.zarr")
    for var in ("lambda", "lambda_se", "eta", "eta_se", "n_eff", "lambda_simplex", "eta_simplex"):
        assert "long_name" in summary[var].attrs
    # Small gamma contracts (lambda < 1), large gamma preserves angles (lambda near 1).
    lam = summary["lambda"].sel(n=16, d=32, alpha=0.0, rho=[0.2, 0.5])
    assert (lam.isel(gamma=0) < 0.5).all() and (lam.isel(gamma=-1) > 0.8).all()


def test_boundary_meets_theory(tiny_run: Path) -> None:
    """gamma* recomputed here from the per-seed data: the seed-mean lambda crossing its critical
    value 1/(1 + 3 rho) (Eq. 7, alpha = 0) and the seed-mean eta/eta_plateau crossing 1/4
    (docs/papers/000.md §6), on the gamma grid; every (observable, d, rho) row finite, inside its
    interval. At the largest d (32 > n = 16: the tokens are near a simplex) against the finite-n simplex closed
    forms (docs/papers/000.md §4) read by the same linear interpolation on the same grid (measured:
    lambda
    within 2.2, 8.0, 0.9%, eta within 4.6, 12.6, 2.3% for rho = 0.2, 0.5, 0.8; one grid step off
    is 37-109%, a fixed level 1/2 for lambda 16-34%), and the median over rho of
    gamma* (1 - rho) near 1, gamma_c = 1/(1 - rho) of Theorem 2.1 (measured 1.02)."""
    from attnsweep.experiments.critical_scaling import theory

    out = tiny_run / "results" / "critical_scaling"
    table = pd.read_csv(out / "boundary.csv")
    sweep = open_store(out / "sweep.zarr")
    gamma = sweep["gamma"].values
    means = {"lambda": sweep["lambda"].mean("seed"), "eta": (sweep["eta"] / sweep["eta_plateau"]).mean("seed")}
    assert len(table) == 2 * 2 * 3 and table["gamma_star"].notna().all()  # (observable, d, rho), alpha = 0
    for row in table.itertuples():
        level = 1 / (1 + 3 * row.rho) if row.observable == "lambda" else 0.25
        curve = means[row.observable].sel(n=row.n, d=row.d, rho=row.rho, alpha=row.alpha, method="nearest")
        assert crossing(gamma, curve.values, level) == pytest.approx(row.gamma_star, rel=1e-5), row
        # 2 seeds: an estimate, and no interval (fewer than MIN_SEEDS), said in the row
        assert row.gamma_star_flag == "too_few_seeds" and row.gamma_star_seeds == 2, row
        assert np.isnan(row.gamma_star_low + row.gamma_star_high), row
        if row.d == table["d"].max():
            if row.observable == "lambda":
                simplex, tolerance = theory.simplex_lambda(row.n, row.rho, gamma), 0.12
            else:
                simplex, tolerance = theory.simplex_eta(row.n, row.d, row.rho, gamma) / (1 - 1 / row.d), 0.2
            assert row.gamma_star == pytest.approx(crossing(gamma, simplex, level), rel=tolerance), row
    large = table[(table["observable"] == "lambda") & (table["d"] == table["d"].max())]
    assert float(np.median(large["gamma_star"] * (1 - large["rho"]))) == pytest.approx(1.0, abs=0.1)


def test_report(tiny_run: Path) -> None:
    result = snakemake(tiny_run, TINY, "--report", "report.html")
    assert result.returncode == 0, result.stderr[-2000:]
    report = tiny_run / "report.html"
    assert report.stat().st_size > 10_000
    text = report.read_text(errors="replace")
    assert "Figure 1 of paper 000 at n = 16" in text
    # The header shows the settings in use, the schema's defaults included (TINY sets no dtype).
    assert "critical_scaling (dtype float32)" in text and "Device: cpu" in text


@pytest.mark.parametrize(
    ("patch", "key"),
    [
        ({"rho": [0.5, 1.0]}, "experiments.critical_scaling.rho"),
        ({"n": [1]}, "experiments.critical_scaling.n"),
        ({"seeds": -2}, "experiments.critical_scaling.seeds"),
        ({"wildcards": ["n", "beta"]}, "experiments.critical_scaling.wildcards"),
    ],
)
def test_bad_config_refused_before_any_job(tmp_path: Path, patch: dict, key: str) -> None:
    config = yaml.safe_load(yaml.safe_dump(TINY))
    config["experiments"]["critical_scaling"].update(patch)
    result = snakemake(tmp_path, config)
    assert result.returncode != 0
    errors = [line for line in result.stderr.splitlines() if "config error" in line]
    assert len(errors) == 1 and key in errors[0], result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    assert not (tmp_path / "results").exists()


def test_slurm_profile_dry_run(tmp_path: Path) -> None:
    result = snakemake(tmp_path, TINY, "--workflow-profile", str(REPO / "profiles" / "slurm"), "--dry-run")
    assert result.returncode == 0, result.stderr[-2000:]
    text = result.stdout + result.stderr
    assert "simulate" in text and "collect" in text


def test_a_config_file_is_the_whole_sweep(tmp_path: Path) -> None:
    """With the default config beside the Snakefile's working directory, --configfile replaces it
    (a sweep file runs only its own experiments); without --configfile the default runs."""
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "config.yaml").write_text((REPO / "config" / "config.yaml").read_text())
    default = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    others = [name for name in default["experiments"] if name != "critical_scaling"]
    sweep = snakemake(tmp_path, TINY, "--dry-run")
    assert sweep.returncode == 0, sweep.stderr[-2000:]
    assert "critical_scaling" in sweep.stdout and not any(name in sweep.stdout for name in others)
    cmd = [sys.executable, "-m", "snakemake", "-s", str(SNAKEFILE), "--directory", str(tmp_path), "--dry-run"]
    plain = processes.run(cmd, capture_output=True, text=True)
    assert plain.returncode == 0, plain.stderr[-2000:]
    assert all(name in plain.stdout for name in others)
