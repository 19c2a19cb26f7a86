"""cluster_emergence with a checkpoint (paper 004, Fig. 10) through Snakemake, as a user runs it:
a checkpoint written here (tests/helpers/albert_checkpoint.py: closed-form heads) and a config in a temp
dir, the whole workflow to its figures and report, then a weight changed at the same path.

Truths: the closed forms of the written heads through simulate, collect and reduce; Theorem 4.2's
check on the good triple's own dynamics; workflow/OUTPUTS.md for every variable, the checkpoint's
included; every figure drawn (tests/helpers/figcheck.py), Fig. 10 with one panel per head, and its caption
in the report; a checkpoint refused before any job in one line; a changed weight reruns the job.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import albert_checkpoint as ac
from helpers.figcheck import check_figure, data_axes
from helpers.output_contract import output_contract, store_problems
from helpers.workflow_runs import prepare, run, run_ok

from attnsweep.plan.config import load_sweep
from attnsweep.stores.io import open_store

pytestmark = pytest.mark.slow

NAME = "cluster_emergence"
AGGREGATES = ("sweep.zarr", "summary.zarr", "boundary.zarr")


def config(directory: Path) -> dict:
    """Head 1 (the good triple) of the checkpoint in ``directory``: n = 16 tokens in R^4, two
    realisations, T = 6 (e^{-lambda_1 T} ~ 6e-6, well below cluster_radius)."""
    return {"device": "cpu", "dtype": "float64", "experiments": {NAME: {
        "n": [16], "d": [ac.SIZE], "scale": [2.0], "seeds": 2, "value": "checkpoint", "query_key": "checkpoint",
        "checkpoint": str(directory), "head": 1, "t_max": 6.0, "outputs": 7, "snapshot_times": [0.0, 6.0]}}}


def test_checkpoint_run_draws_fig_10_and_meets_theorem_4_2(tmp_path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    directory = ac.write(tmp_path / "albert-tiny")
    workdir = prepare(tmp_path / "project", config(directory))
    run_ok(workdir, name="run")
    out = workdir / "results" / NAME
    summary, bnd = (open_store(out / name).load() for name in ("summary.zarr", "boundary.zarr"))

    # Every head against its closed form, after simulate, collect and reduce (the stores keep
    # float64 bit for bit: the tolerances argued in albert_checkpoint, from LAPACK's backward error).
    for h, want in ac.EXPECTED.items():
        at = summary.sel(head=h).squeeze()
        values = at["head_eigenvalue_real"].values + 1j * at["head_eigenvalue_imag"].values
        np.testing.assert_allclose(values, want["eigenvalues"], rtol=0, atol=ac.EIGEN_TOL, err_msg=f"head {h}")
        np.testing.assert_allclose(float(at["head_gap"]), want["gap"], rtol=0, atol=2 * ac.EIGEN_TOL)
        np.testing.assert_allclose(float(at["head_phi1_score"]), want["score"], rtol=0, atol=ac.FORM_TOL)
        assert (int(at["head_eigen_condition"]), int(at["head_good_triple"])) == (want["eigen"], want["good"])

    # Theorem 4.2 on head 1's own (Q_h, K_h, V_h): at most three levels of phi_1^*(z_i), every token
    # on the boundary of their range, the hypotheses met, the range never grown.
    table = pd.read_csv(out / "boundary.csv")
    assert len(table) == 1
    row = table.iloc[0]
    assert row["levels"] <= 3 and row["limit_fraction"] == 1 and row["hypotheses"] == 1, row
    assert row["hull_excess"] <= 0 and row["resolved_final"] == 1, row

    # The output contract, the checkpoint's variables included (all present in this run).
    contract = output_contract()[NAME]
    problems = [p for store in AGGREGATES for p in store_problems(store, open_store(out / store), contract[store],
                                                                  every=True)]
    assert problems == [] and list(table.columns) == contract["boundary.csv"]

    # Every figure drawn; Fig. 10 one panel per head.
    plan = load_sweep(config(directory)).plans[NAME]
    figures = plan.experiment.figures(plan.grid, plan.options)
    assert "value_spectra" in [fig.name for fig in figures]
    for fig in figures:
        drawn = plan.experiment.draw(fig.draw, fig.params, summary, bnd)
        panels = data_axes(drawn)
        plt.close(drawn)
        assert panels == ac.HEADS or fig.name != "value_spectra"
        problems += check_figure(out / "figures" / f"{fig.name}.png", out / "figures" / f"{fig.name}.pdf", panels)
    assert problems == []

    # In the report, with its caption.
    run_ok(workdir, "--report", str(workdir / "report.html"), name="report")
    assert "Figure 10 of paper 004: the eigenvalues of every head" in (workdir / "report.html").read_text()

    # One weight changed at the same path: a new job identity, so the job runs again.
    weights = ac.state_dict()
    weights[f"albert.{ac.LAYER}attention.value.weight"][0, 0] += 0.125
    ac.write(directory, weights)
    planned = run_ok(workdir, "--dry-run", name="changed")
    assert re.search(r"^simulate\s+1$", planned, re.MULTILINE), planned


def test_malformed_checkpoint_stops_snakemake_in_one_line(tmp_path: Path) -> None:
    """A truncated model.safetensors: Snakemake stops before any job, one line naming the key
    and the file, no traceback, no results."""
    directory = ac.write(tmp_path / "albert-tiny")
    data = (directory / "model.safetensors").read_bytes()
    (directory / "model.safetensors").write_bytes(data[:100])
    workdir = prepare(tmp_path / "project", config(directory))
    code, text = run(workdir, "--dry-run", name="refused")
    errors = [line for line in text.splitlines() if "config error" in line]
    assert code != 0 and len(errors) == 1, text
    assert errors[0].startswith(f"attnsweep: config error: experiments.{NAME}.checkpoint: {directory}/"
                                "model.safetensors is not a readable safetensors file ("), errors[0]
    assert "Traceback" not in text and not (workdir / "results").exists()
