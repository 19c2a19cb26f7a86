"""End-to-end: real `snakemake` runs of a tiny config in a temporary directory."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from attnsweep.store import open_store

REPO = Path(__file__).resolve().parents[1]
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
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory) -> Path:
    workdir = tmp_path_factory.mktemp("sweep")
    result = snakemake(workdir, TINY)
    assert result.returncode == 0, result.stderr[-3000:]
    return workdir


def test_builds_every_output(tiny_run: Path) -> None:
    out = tiny_run / "results" / "critical_scaling"
    for name in ("lambda_n~16", "eta_n~16", "finite_size"):
        for ext in ("png", "pdf"):
            assert (out / "figures" / f"{name}.{ext}").stat().st_size > 1000
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
    table = (out / "boundary.csv").read_text().splitlines()
    assert table[0].startswith("observable,n,d,rho,alpha,gamma_star,ci_low,ci_high")
    assert len(table) > 1


def test_report(tiny_run: Path) -> None:
    result = snakemake(tiny_run, TINY, "--report", "report.html")
    assert result.returncode == 0, result.stderr[-2000:]
    report = tiny_run / "report.html"
    assert report.stat().st_size > 10_000
    assert "Figure 1 of paper 000 at n = 16" in report.read_text(errors="replace")


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
    plain = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert plain.returncode == 0, plain.stderr[-2000:]
    assert all(name in plain.stdout for name in others)
