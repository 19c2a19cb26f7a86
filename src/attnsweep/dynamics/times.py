"""Output times of a run, placed on the integrator's step grid so that recording is exact."""

from __future__ import annotations

from typing import Any

import numpy as np

from attnsweep.errors import ConfigError


def output_steps(dt: float, t_max: float, outputs: int, spacing: str = "linear") -> np.ndarray:
    """Step indices k (times k dt) of ``outputs`` output times in [0, t_max], always with 0.

    ``spacing`` "linear" spaces them evenly, "log" geometrically from dt; each is rounded to
    the nearest step (docs/papers/001.md §6: the authors recorded at the first step past each
    checkpoint, which shifts times by up to dt), so nearby times may merge.
    """
    last = int(round(t_max / dt))
    if spacing == "linear":
        targets = np.linspace(0.0, last, outputs)
    elif spacing == "log":
        targets = np.concatenate([[0.0], np.geomspace(1.0, last, max(outputs - 1, 1))])
    else:
        raise ValueError(f"unknown spacing {spacing!r} (linear, log)")
    return np.unique(np.rint(targets).astype(np.int64))


def check_times(options: dict[str, Any], grid: dict[str, list[float]], prefix: str) -> None:
    """Refuse a step ``dt`` beyond ``t_max``, and snapshots over several n (a snapshot's token
    dimension is one n) or past ``t_max``, naming the key under ``prefix``."""
    if options["dt"] > options["t_max"]:
        raise ConfigError(f"{prefix}.dt", f"dt = {options['dt']} exceeds t_max = {options['t_max']}")
    if options["snapshot_times"]:
        if len(grid["n"]) > 1:
            raise ConfigError(f"{prefix}.snapshot_times", "snapshots need a single n (the token dimension "
                              "of the stored snapshots); set snapshot_times: [] to sweep n")
        if max(options["snapshot_times"]) > options["t_max"]:
            raise ConfigError(f"{prefix}.snapshot_times", f"a time exceeds t_max = {options['t_max']}")
