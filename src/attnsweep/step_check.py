"""``attnsweep step-check``: are a config's boundaries converged in the time step?

The config's grid runs (Snakemake, up to the boundaries) at its own ``dt`` and at ``dt / 2``,
``dt / 4`` ... (every experiment whose section has the option), step k in its own results tree,
``RESULTS.step_check/step~k/`` beside the config's, with its config ``step~k.yaml``; refine
sections are left out, so every step runs the same points. Then each boundary with an interval
(``X``, ``X_low``, ``X_high``) is compared row by row between consecutive steps: the coarser
step's estimate *holds* where it lies in the finer step's interval, or where neither step finds a
crossing. The boundaries are converged at a step when every row holds between it and the next,
finer one; ``undecided`` rows (the finer interval declined, too few seeds) are counted apart. One
table per experiment, ``RESULTS.step_check/<experiment>.csv``.
"""

from __future__ import annotations

import copy
import logging
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr
import yaml

from attnsweep.errors import ConfigError
from attnsweep.grid import format_value
from attnsweep.plan.config import load_sweep, load_yaml

log = logging.getLogger("attnsweep.step_check")

OPTION = "dt"


def steps(config: dict[str, Any], halvings: int) -> dict[str, list[float]]:
    """Per experiment of the config with a ``dt`` option, its step and ``halvings`` halvings of it."""
    sweep = load_sweep(strip_refine(config))
    out = {name: [plan.options[OPTION] / 2**k for k in range(halvings + 1)]
           for name, plan in sweep.plans.items() if OPTION in plan.options}
    if not out:
        raise ConfigError("experiments", f"no experiment of the config has a {OPTION} option to halve")
    return out


def strip_refine(config: dict[str, Any]) -> dict[str, Any]:
    """The config without its experiments' refine sections (every step runs the same points)."""
    config = copy.deepcopy(config)
    for section in config.get("experiments", {}).values():
        if isinstance(section, dict):
            section.pop("refine", None)
    return config


def step_config(config: dict[str, Any], ladder: dict[str, list[float]], k: int) -> dict[str, Any]:
    """The config of the k-th step: every experiment's dt divided by 2^k, its own results and logs."""
    config = strip_refine(config)
    root = step_root(config)
    name = f"step~{k}"
    config["results"] = str(root / name)
    config["logs"] = str(Path(f"{config.get('logs', 'logs')}.step_check") / name)
    for experiment, values in ladder.items():
        config["experiments"][experiment][OPTION] = values[k]
    return config


def step_root(config: dict[str, Any]) -> Path:
    """Where the steps' results live: ``RESULTS.step_check`` beside the config's results."""
    return Path(f"{config.get('results', 'results')}.step_check")


def compare(boundaries: list[xr.Dataset], values: list[float]) -> pd.DataFrame:
    """Consecutive steps' boundaries (``values``: their dt, coarse to fine), one row per boundary
    variable, step pair and boundary row: the two estimates, the finer interval and the verdict
    (``holds``, ``moves``, ``undecided``)."""
    rows = []
    for (coarse, dt_coarse), (fine, dt_fine) in zip(zip(boundaries, values), zip(boundaries[1:], values[1:])):
        for name in sorted(v for v in fine.data_vars if f"{v}_low" in fine and f"{v}_high" in fine):
            a, b = xr.align(coarse[name], fine[name], join="inner")
            low, high = fine[f"{name}_low"].sel(a.coords), fine[f"{name}_high"].sel(a.coords)
            frame = xr.Dataset({"estimate_coarse": a, "estimate_fine": b, "low_fine": low,
                                "high_fine": high}).to_dataframe().reset_index()
            frame.insert(0, "boundary", name)
            frame.insert(1, "dt_coarse", dt_coarse)
            frame.insert(2, "dt_fine", dt_fine)
            frame["verdict"] = verdicts(frame)
            rows.append(frame)
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame()


def verdicts(frame: pd.DataFrame) -> np.ndarray:
    """``holds`` where the coarse estimate lies in the fine interval or neither step has a crossing,
    ``moves`` where it lies outside or only one step has one, ``undecided`` where the fine step has
    an estimate but no interval. An interval with one end missing (past the grid) is open there."""
    coarse, fine = frame["estimate_coarse"].to_numpy(float), frame["estimate_fine"].to_numpy(float)
    low, high = frame["low_fine"].to_numpy(float), frame["high_fine"].to_numpy(float)
    both_none = np.isnan(coarse) & np.isnan(fine)
    one_none = np.isnan(coarse) ^ np.isnan(fine)
    no_interval = ~np.isnan(fine) & np.isnan(low) & np.isnan(high)
    inside = (coarse >= np.nan_to_num(low, nan=-np.inf)) & (coarse <= np.nan_to_num(high, nan=np.inf))
    return np.select([both_none, one_none, no_interval, inside], ["holds", "moves", "undecided", "holds"], "moves")


def drive(config_path: str, halvings: int, snakemake_args: list[str]) -> int:
    """Run every step's workflow to its boundaries, compare, write the tables; 0 when every
    boundary holds between the two finest steps, 1 when some row moves or is undecided there."""
    from attnsweep.refine.loop import refuse_directory_and_configfile, run_to_its_end  # as refine runs it

    refuse_directory_and_configfile(snakemake_args, "attnsweep step-check")
    if halvings < 1:
        raise ConfigError("--halvings", f"{halvings}: at least one halving is needed to compare two steps")
    config = load_yaml(config_path)
    ladder = steps(config, halvings)
    root = step_root(config)
    root.mkdir(parents=True, exist_ok=True)
    for k in range(halvings + 1):
        path = root / f"step~{k}.yaml"
        derived = step_config(config, ladder, k)
        path.write_text(yaml.safe_dump(derived, sort_keys=False))
        targets = [f"{derived['results']}/{name}/boundary.zarr" for name in ladder]
        log.info("step %d: %s", k, ", ".join(f"{n} dt = {format_value(v[k])}" for n, v in ladder.items()))
        status = run_to_its_end([sys.executable, "-m", "snakemake", *targets, *snakemake_args, "--configfile",
                                 str(path)])
        if status:
            return status
    converged = True
    for name, values in ladder.items():
        boundaries = [xr.open_zarr(root / f"step~{k}" / name / "boundary.zarr").load() for k in range(halvings + 1)]
        table = compare(boundaries, values)
        table.to_csv(root / f"{name}.csv", index=False)
        for (boundary, dt_coarse, dt_fine), group in table.groupby(["boundary", "dt_coarse", "dt_fine"], sort=False):
            counts = group["verdict"].value_counts()
            shift = (group["estimate_coarse"] - group["estimate_fine"]).abs().max()
            print(f"{name} {boundary}, dt {format_value(dt_coarse)} -> {format_value(dt_fine)}: "
                  f"{counts.get('holds', 0)} hold, {counts.get('moves', 0)} move, "
                  f"{counts.get('undecided', 0)} undecided of {len(group)}; largest shift {shift:.4g}")
        finest = table[table["dt_fine"] == values[-1]]
        converged &= bool((finest["verdict"] == "holds").all())
    print(f"tables: {root}/<experiment>.csv; " + ("converged at the finest pair" if converged else
                                                  "not converged at the finest pair: halve again (--halvings)"))
    return 0 if converged else 1
