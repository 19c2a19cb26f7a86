"""attnsweep step-check: the verdict of each boundary row between two steps, against its definition
on hand-made boundaries, and the command end to end on the tiny sphere_clustering sweep (dt = 0.1
and 0.05): one results tree and config per step, one row per boundary row and step pair."""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd
import pytest
import xarray as xr
import yaml
from helpers import processes
from helpers.project import CONFIGS, REPO

from attnsweep import step_check
from attnsweep.errors import ConfigError

NAN = np.nan


def boundary(estimate, low, high) -> xr.Dataset:
    dims = ("beta",)
    coords = {"beta": np.arange(1.0, len(estimate) + 1)}
    return xr.Dataset({"t_star": (dims, estimate), "t_star_low": (dims, low), "t_star_high": (dims, high),
                       "t_star_seeds": (dims, [8] * len(estimate))}, coords=coords)


def test_a_row_holds_where_the_coarse_estimate_lies_in_the_fine_interval():
    """Row by row: inside the interval (holds), outside it (moves), no crossing at either step
    (holds), a crossing at one step only (moves), a fine estimate without an interval (undecided),
    inside and outside an interval open above (its upper end past the grid). Only variables with
    both interval columns are boundaries (t_star_seeds is not)."""
    coarse = boundary([2.0, 2.0, NAN, 3.0, 2.0, 9.0, 1.0], [1.9] * 7, [2.1] * 7)
    fine = boundary([2.05, 2.5, NAN, NAN, 2.1, 2.2, 2.2], [1.95, 2.4, NAN, NAN, NAN, 2.0, 2.0],
                    [2.15, 2.6, NAN, NAN, NAN, NAN, NAN])
    table = step_check.compare([coarse, fine], [0.1, 0.05])
    assert list(table["boundary"].unique()) == ["t_star"]
    assert list(table["verdict"]) == ["holds", "moves", "holds", "moves", "undecided", "holds", "moves"]
    assert (table["dt_coarse"] == 0.1).all() and (table["dt_fine"] == 0.05).all()
    np.testing.assert_array_equal(table["estimate_coarse"], coarse["t_star"].values)


def test_three_steps_give_two_pairs():
    same = boundary([2.0] * 5, [1.9] * 5, [2.1] * 5)
    table = step_check.compare([same, same, same], [0.1, 0.05, 0.025])
    assert sorted(set(zip(table["dt_coarse"], table["dt_fine"]))) == [(0.05, 0.025), (0.1, 0.05)]
    assert (table["verdict"] == "holds").all()


def test_step_configs_halve_dt_and_drop_refine():
    config = yaml.safe_load((CONFIGS / "sphere_clustering.yaml").read_text())
    config["experiments"]["sphere_clustering"]["refine"] = {"precision": 0.05}
    ladder = step_check.steps(config, 2)
    assert ladder["sphere_clustering"][1:] == [ladder["sphere_clustering"][0] / 2, ladder["sphere_clustering"][0] / 4]
    derived = step_check.step_config(config, ladder, 2)
    section = derived["experiments"]["sphere_clustering"]
    assert section["dt"] == ladder["sphere_clustering"][2] and "refine" not in section
    assert derived["results"] == "results.step_check/step~2"
    assert "refine" in config["experiments"]["sphere_clustering"]  # the caller's config is left alone


@pytest.mark.slow
def test_step_check_runs_each_step_and_writes_the_table(tmp_path):
    config = yaml.safe_load((CONFIGS / "sphere_clustering.yaml").read_text())
    config["experiments"]["sphere_clustering"].update(d=[2], dt=0.1)
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    command = [sys.executable, "-m", "attnsweep.cli", "step-check", "--halvings", "1", "config.yaml",
               "-s", str(REPO / "Snakefile"), "--cores", "1"]
    done = processes.run(command, cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode in (0, 1), done.stdout[-3000:] + done.stderr[-3000:]
    root = tmp_path / "results.step_check"
    for k, dt in enumerate((0.1, 0.05)):
        assert yaml.safe_load((root / f"step~{k}.yaml").read_text())["experiments"]["sphere_clustering"]["dt"] == dt
        assert (root / f"step~{k}" / "sphere_clustering" / "boundary.zarr").is_dir()
    table = pd.read_csv(root / "sphere_clustering.csv")
    fine = xr.open_zarr(root / "step~1" / "sphere_clustering" / "boundary.zarr")
    names = {v for v in fine.data_vars if f"{v}_low" in fine and f"{v}_high" in fine}
    assert set(table["boundary"]) == names and len(names) > 0
    assert set(zip(table["dt_coarse"], table["dt_fine"])) == {(0.1, 0.05)}
    np.testing.assert_array_equal(table["verdict"], step_check.verdicts(table))
    converged = (table["verdict"] == "holds").all()
    assert done.returncode == (0 if converged else 1)
    assert "sphere_clustering" in done.stdout and "dt 0.1 -> 0.05" in done.stdout


def test_a_configfile_option_is_refused_in_one_line(tmp_path):
    (tmp_path / "config.yaml").write_text((CONFIGS / "sphere_clustering.yaml").read_text())
    done = processes.run([sys.executable, "-m", "attnsweep.cli", "step-check", "config.yaml", "--configfile", "x.yaml"],
                         cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode != 0 and "step-check's first argument" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and not (tmp_path / "results.step_check").exists()


def test_a_config_without_a_step_is_refused():
    config = yaml.safe_load((CONFIGS / "circle_synchronization.yaml").read_text())  # courant, no dt
    with pytest.raises(ConfigError, match="no experiment of the config has a dt option"):
        step_check.steps(config, 1)
