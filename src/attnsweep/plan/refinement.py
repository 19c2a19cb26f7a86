"""The ``refine`` section of an experiment and its refinement record.

The settings (:class:`RefineSettings`) are read and checked when a sweep is planned. The record,
``<results>/<experiment>/refine.json``, holds every round :mod:`attnsweep.refine.rules` decided (its
rectangles, new points, estimated core-hours and the assessment of every row) and the final
assessment; ``refine.csv`` beside it is the same as a table. The planner adds the recorded
rectangles to the grid (:func:`recorded_blocks`), so a round is an ordinary Snakemake run.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from attnsweep.contract import Experiment, Target
from attnsweep.errors import ConfigError
from attnsweep.grid import SEED

RECORD = "refine.json"
TABLE = "refine.csv"
COLUMNS = ("round", "boundary", "row", "action", "reason", "added", "new_points", "estimate", "low", "high",
           "wanted", "seeds", "estimate_after", "low_after", "high_after")


@dataclass(frozen=True)
class RefineSettings:
    """One experiment's ``refine`` section (schema: ``$defs/refine``)."""

    precision: float
    relative: bool
    targets: tuple[Target, ...]
    curve: tuple[str, ...]
    rounds: int
    points: int
    max_new: int
    max_seeds: int
    core_hours: float

    def wanted(self, estimate: float) -> float:
        """The largest half-width accepted at ``estimate``."""
        return self.precision * abs(estimate) if self.relative else self.precision

    def refinable(self) -> set[str]:
        """Axes whose values refinement adds (and the seed)."""
        return {t.crossing for t in self.targets if t.crossing} | set(self.curve) | {SEED}


def seeds_for(seeds: int, half: float, wanted: float) -> int:
    """The seeds a row holding ``seeds`` with an interval of half-width ``half`` needs for
    ``wanted``, by the law of a seed-limited interval, half-width proportional to
    ``1/sqrt(seeds)`` (the seeds are independent samples of the crossing)."""
    # the record's numbers carry 6 significant digits: no more in the ratio (0.1 from 1.6 - 1.4
    # is 0.1000...09, and 16.000...1 seeds must not count as 17)
    return math.ceil(float(f"{seeds * (half / wanted) ** 2:.6g}"))


def settings(experiment: Experiment, seeds: int, section: dict[str, Any], options: dict[str, Any],
             prefix: str) -> RefineSettings:
    """A schema-valid ``refine`` section checked against the experiment, its ``options`` (which
    boundaries they compute) and its ``seeds`` (how many the base grid holds); ConfigError naming
    the key."""
    if not experiment.targets:
        raise ConfigError(prefix, f"{experiment.name} has no boundary refinement can locate (no targets)")
    declared = {t.variable: t for t in experiment.targets_for(options)}
    chosen = section.get("boundaries", list(declared))
    for name in chosen:
        if name in declared:
            continue
        if any(t.variable == name for t in experiment.targets):
            raise ConfigError(f"{prefix}.boundaries", f"{name!r} is not computed with these options "
                                                      f"(computed: {', '.join(declared) or 'none'})")
        raise ConfigError(f"{prefix}.boundaries", f"unknown boundary {name!r} (known: "
                                                  f"{', '.join(t.variable for t in experiment.targets)})")
    targets = tuple(declared[name] for name in chosen)
    curves = {axis for t in targets for axis in t.curves}
    for axis in section["curve"]:
        if axis not in curves:
            raise ConfigError(f"{prefix}.curve", f"{axis!r} is no curve axis of the boundaries refined "
                                                 f"(curve axes: {', '.join(sorted(curves)) or 'none'})")
    if section["max_seeds"] < seeds:
        raise ConfigError(f"{prefix}.max_seeds", f"{section['max_seeds']} is below the {seeds} seeds "
                                                 "of the base grid")
    return RefineSettings(section["precision"], section["relative"], targets, tuple(section["curve"]),
                    section["rounds"], section["points"], section["max_new"], section["max_seeds"],
                    section["core_hours"])


def record_path(results: str | Path, name: str) -> Path:
    return Path(results, name, RECORD)


def load_record(results: str | Path, name: str) -> dict[str, Any]:
    """The refinement record of one experiment (empty when it has none yet)."""
    path = record_path(results, name)
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return {"experiment": name, "rounds": []}
    except (OSError, ValueError) as err:
        raise ConfigError(str(path), f"unreadable refinement record: {err}") from None


def recorded_blocks(grid: dict[str, list], record: dict[str, Any], refine: RefineSettings) -> list[dict[str, list]]:
    """The rectangles of every recorded round still inside the configured ``grid``: on the axes
    refinement does not add to, their values are kept where the base grid has them."""
    keep = refine.refinable()
    blocks = []
    for round_ in record["rounds"]:
        for rect in round_["blocks"]:
            rect = {axis: values if axis in keep else [v for v in values if v in grid[axis]]
                    for axis, values in rect.items()}
            if all(rect.values()):
                blocks.append(rect)
    return blocks


def save_record(results: str | Path, name: str, record: dict[str, Any]) -> None:
    """Write the record and its table, each through a temporary file and a rename."""
    path = record_path(results, name)
    path.parent.mkdir(parents=True, exist_ok=True)
    for target, text in ((path, json.dumps(record, indent=1)), (path.with_name(TABLE), table(record))):
        tmp = target.with_name(f".{target.name}.tmp")
        tmp.write_text(text)
        os.replace(tmp, target)


def table(record: dict[str, Any]) -> str:
    """The decisions of every round as CSV, with each row's interval after the round."""
    out = io.StringIO()
    writer = csv.DictWriter(out, COLUMNS, lineterminator="\n")
    writer.writeheader()
    stages = [*record["rounds"], *([record["final"]] if "final" in record else [])]
    for stage, after in zip(stages, [*stages[1:], None]):
        later = {(d["boundary"], d["row"]): d for d in after["assessment"]} if after else {}
        for d in stage["assessment"]:
            nxt = later.get((d["boundary"], d["row"]), {})
            writer.writerow({**{k: d.get(k, "") for k in COLUMNS}, "round": stage["round"],
                             **{f"{k}_after": nxt.get(k, "") for k in ("estimate", "low", "high")}})
    return out.getvalue()
