"""Adaptive refinement: rounds that add grid values and seeds where a boundary is not yet precise.

A round reads a finished sweep (``sweep.zarr``: which points hold which seeds; ``boundary.zarr``:
each row's estimate and 95% interval, docs/statistics.md) and decides, per boundary (an experiment's
:class:`~attnsweep.contract.Target`) and row (a point of the boundary's dimensions), with
``h`` the interval's half-width, ``p`` the precision wanted and ``[a, b]`` the bracket (the
row's neighbouring values of the crossing axis around the estimate):

- ``precise``: h <= p and (b - a)/2 <= p: nothing is added;
- ``locate``: (b - a)/2 > p and the interval reaches at most (b - a)/2 past the bracket on
  either side (it always holds the bracket, docs/statistics.md: the grid, not the noise, limits): ``points``
  new values evenly inside the bracket, with the seeds both bracket values hold;
- ``seeds``: otherwise, h > p: at every value the interval reaches (the last held value at or
  below its low end to the first at or above its high end, a and b at least; the row's point
  for a time-located boundary) the seeds brought up to twice the most any of them holds, at most
  ``max_seeds``, the same new seeds at each (paired), counted on from the row's least seed (a
  sweep of seeds [k, k + 8) grows to [k, k + 16), never into another block's);
- ``outputs``: a boundary located in time whose interval cannot be narrower than the spacing of
  the recorded outputs around it (it holds them): when that is more than twice the precision,
  nothing is added (seeds cannot help; the config's ``outputs`` can);
- ``curve``: along each axis of ``curves``, a row halfway between neighbouring rows whose
  estimates differ by more than p and than their half-widths together (beyond the noise), with
  the base grid's crossing values and seeds.

A round's new points become rectangles of the grid (:meth:`attnsweep.plan.experiment_plan.Plan.with_extra`),
recorded (:mod:`attnsweep.plan.refinement`) before any of them runs; every run of the
workflow plans them, so a round is an ordinary Snakemake run and a killed round is finished by
running again. The record also keeps each round's assessment of every row, and
``refine.csv`` is the same as a table with the interval after the round beside the one before.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from attnsweep.contract import Target
from attnsweep.errors import ConfigError
from attnsweep.grid import SEED, canonical, format_value
from attnsweep.plan.cost import hours
from attnsweep.plan.experiment_plan import Plan, estimate
from attnsweep.plan.refinement import RefineSettings
from attnsweep.stores.io import open_store


@dataclass
class Proposal:
    """New points one decision would add, and how urgent it is (larger first)."""

    points: set[tuple]
    urgency: float
    decision: dict[str, Any]


def decide(plan: Plan, refine: RefineSettings, simulated: xr.DataArray, boundary: xr.Dataset,
           budget_s: float) -> tuple[list[dict[str, list]], list[dict[str, Any]], str]:
    """One round: the rectangles to add, the assessment of every row, and why it stops ("" if not).

    ``simulated`` is ``sweep.zarr``'s mask (axes x seed), ``budget_s`` the core-seconds left.
    """
    axes = [*plan.experiment.axis_names, SEED]
    mask = simulated.transpose(*axes).values.astype(bool)
    coords = {axis: [_plain(v) for v in simulated[axis].values] for axis in axes}
    pairs = _PointSet(axes, coords, mask)
    proposals: list[Proposal] = []
    assessment: list[dict[str, Any]] = []
    for target in refine.targets:
        for prop in _boundary_proposals(plan, refine, target, pairs, boundary):
            assessment.append(prop.decision)
            if prop.points:
                proposals.append(prop)
    chosen: set[tuple] = set()
    spent = 0.0
    order = sorted(range(len(proposals)), key=lambda i: -proposals[i].urgency)  # stable: ties by row order
    deferred = None
    free = _free_axis(refine)
    for i in order:
        new = proposals[i].points - chosen
        cost = _seconds(plan, new, axes, free)
        limit = ("max_new" if len(chosen) + len(new) > refine.max_new
                 else "core_hours" if spent + cost > budget_s else None)
        if limit:
            decision = proposals[i].decision
            decision.update(action="deferred", reason=f"{decision['action']} deferred: {limit} reached",
                            added="", new_points=0)
            deferred = deferred or limit
            continue
        chosen |= new
        spent += cost
    blocks = _rectangles(chosen, axes, free)
    if blocks:
        return blocks, assessment, ""
    if deferred == "core_hours":
        return [], assessment, "the core-hour budget is spent"
    if deferred:
        return [], assessment, f"every row's proposal alone exceeds max_new = {refine.max_new}"
    if any(d["action"] == "outputs" for d in assessment):
        return [], assessment, "rows left imprecise are limited by the output spacing (raise outputs) or max_seeds"
    if any(d["action"] != "precise" and d["action"] != "no crossing" for d in assessment):
        return [], assessment, "rows left imprecise cannot be refined further (max_seeds reached)"
    return [], assessment, "every boundary is precise"


def _plain(v: Any) -> float | int:
    """A coordinate value as a plain Python int or float (hashable, as the proposals hold them)."""
    return int(v) if isinstance(v, (np.integer, int)) else float(v)


class _PointSet:
    """The simulated (point, seed) pairs of a sweep, looked up by coordinate values."""

    def __init__(self, axes: list[str], coords: dict[str, list], mask: np.ndarray) -> None:
        self.axes, self.coords, self.mask = axes, coords, mask
        self.index = {axis: {v: i for i, v in enumerate(values)} for axis, values in coords.items()}

    def seeds(self, point: dict[str, float]) -> list[int]:
        """Seeds held at a grid point (every axis given)."""
        at = tuple(self.index[a].get(point[a], -1) for a in self.axes[:-1])
        if min(at) < 0:
            return []
        return [self.coords[SEED][i] for i in np.flatnonzero(self.mask[at])]

    def values(self, row: dict[str, float], axis: str) -> list[float]:
        """Values of ``axis`` at which the row (every other axis given) holds some seed."""
        at = tuple(slice(None) if a == axis else self.index[a].get(row[a], -1) for a in self.axes[:-1])
        if any(isinstance(i, int) and i < 0 for i in at):
            return []
        held = self.mask[at].any(-1)
        return [self.coords[axis][i] for i in np.flatnonzero(held)]


def _boundary_proposals(plan: Plan, refine: RefineSettings, target: Target, pairs: _PointSet,
                        boundary: xr.Dataset) -> list[Proposal]:
    """The decision of every row of one boundary."""
    est_da = boundary[target.variable]
    dims = list(est_da.dims)
    est = est_da.values
    low = boundary[f"{target.variable}_low"].transpose(*dims).values
    high = boundary[f"{target.variable}_high"].transpose(*dims).values
    name = f"{target.variable}_spacing"  # absent from a boundary.zarr of before issue 63
    spacing = boundary[name].transpose(*dims).values if name in boundary else np.full(est.shape, np.nan)
    rows_coords = {dim: [_plain(v) for v in boundary[dim].values] for dim in dims}
    out = []
    exists = {}
    for at in np.ndindex(est.shape):
        row = {dim: rows_coords[dim][i] for dim, i in zip(dims, at)}
        grid_row = {k: v for k, v in row.items() if k in plan.experiment.axis_names}
        present = pairs.values(grid_row, target.crossing) if target.crossing else (
            [0] if pairs.seeds(grid_row) else [])
        exists[at] = bool(present)
        if not present:
            continue
        out.append(_row_proposal(plan, refine, target, pairs, row, grid_row, present, est[at], low[at], high[at],
                                 spacing[at]))
    for axis in refine.curve:
        if axis in target.curves:
            out += _curve(plan, refine, target, pairs, dims, rows_coords, est, (high - low) / 2, exists, axis)
    return out


def _row_text(row: dict[str, float]) -> str:
    return " ".join(f"{k}={format_value(v)}" for k, v in row.items())


def _six_digits(x: float) -> float | str:
    """A number of the round's record, to 6 significant digits; "" where it is not finite."""
    return float(f"{x:.6g}") if np.isfinite(x) else ""


def _row_proposal(plan: Plan, refine: RefineSettings, target: Target, pairs: _PointSet, row: dict, grid_row: dict,
                  present: list[float], est: float, low: float, high: float, spacing: float) -> Proposal:
    """locate, seeds or nothing for one row (see the module docstring)."""
    decision = {"boundary": target.variable, "row": _row_text(row), "estimate": _six_digits(est),
                "low": _six_digits(low), "high": _six_digits(high), "wanted": "", "added": "", "new_points": 0}
    if not np.isfinite(est):
        return Proposal(set(), 0.0, {**decision, "action": "no crossing", "reason": "no crossing on the row's grid"})
    wanted = refine.wanted(est)
    half = (high - low) / 2 if np.isfinite(low) and np.isfinite(high) else math.inf
    decision["wanted"] = _six_digits(wanted)
    if target.crossing:
        below = [v for v in present if v < est]
        a, b = (below[-1] if below else est), min(v for v in present if v >= est)
        bracket = (b - a) / 2
    else:
        a = b = None
        bracket = 0.0
    text = f"half-width {_six_digits(half)} vs {_six_digits(wanted)}"
    if target.crossing:
        text += f", bracket [{format_value(a)}, {format_value(b)}]"
    urgency = half / wanted if wanted > 0 else math.inf
    at = ([{**grid_row, target.crossing: v} for v in _span(present, a, b, low, high)] if target.crossing
          else [grid_row])
    count = max(len(pairs.seeds(p)) for p in at)
    decision["seeds"] = count
    if half <= wanted and bracket <= wanted:
        return Proposal(set(), 0.0, {**decision, "action": "precise", "reason": text})
    if not target.crossing and spacing / 2 > wanted:  # the interval holds the outputs around the crossing
        return Proposal(set(), 0.0, {**decision, "action": "outputs", "reason": text + f", output spacing "
                                     f"{_six_digits(spacing)} > twice the precision: record outputs more often"})
    points: set[tuple] = set()
    more = any(_more_seeds(pairs, p, refine) for p in at)
    action = "seeds"
    beyond = max(a - low, high - b) if target.crossing and np.isfinite(half) else math.inf  # past the bracket
    if target.crossing and bracket > wanted and beyond <= bracket:
        action = "locate"
    elif target.crossing:
        action = "seeds" if more else "locate"
    elif not more:
        return Proposal(set(), 0.0, {**decision, "action": "max_seeds", "reason": text + ", max_seeds reached"})
    if action == "locate":
        if bracket <= wanted:
            return Proposal(set(), 0.0, {**decision, "action": "max_seeds", "reason": text + ", max_seeds reached"})
        axis = plan.experiment.axis(target.crossing)
        ends = ({**grid_row, target.crossing: v} for v in (a, b))
        seeds = sorted(set.intersection(*(set(pairs.seeds(end)) for end in ends)))
        new = _inside(a, b, refine.points, axis.kind == "int")
        points = {_point(plan, {**grid_row, target.crossing: v}, s) for v in new for s in seeds}
        added = f"{target.crossing} {', '.join(map(format_value, new))} x {len(seeds)} seeds"
    else:
        goal = min(2 * count, refine.max_seeds)
        first = min((min(pairs.seeds(p), default=0) for p in at), default=0)  # a seed block [k, ...) stays in it
        for p in at:
            held = set(pairs.seeds(p))
            extra = [s for s in range(first, first + goal + len(held)) if s not in held][: goal - len(held)]
            points |= {_point(plan, p, s) for s in extra}
        where = (f"{target.crossing} {', '.join(format_value(p[target.crossing]) for p in at)}" if target.crossing
                 else "the row")
        added = f"seeds up to {goal} at {where}"
    if not points:
        return Proposal(set(), 0.0, {**decision, "action": "max_seeds", "reason": text + ", nothing to add"})
    return Proposal(points, urgency, {**decision, "action": action, "reason": text, "added": added,
                                      "new_points": len(points)})


def _span(present: list[float], a: float, b: float, low: float, high: float) -> list[float]:
    """The row's values that the interval [low, high] reaches: from the last held value at or
    below ``low`` to the first at or above ``high``, and at least the bracket [a, b]. A resampled
    crossing interpolates between these, so their seeds set the interval's width."""
    start = max((v for v in present if v <= low), default=present[0]) if np.isfinite(low) else a
    stop = min((v for v in present if v >= high), default=present[-1]) if np.isfinite(high) else b
    return [v for v in present if min(start, a) <= v <= max(stop, b)]


def _more_seeds(pairs: _PointSet, point: dict, refine: RefineSettings) -> bool:
    return len(pairs.seeds(point)) < refine.max_seeds


def _inside(a: float, b: float, points: int, integer: bool) -> list[float]:
    """``points`` values evenly inside (a, b), canonical (integers: the distinct ones strictly inside)."""
    values = [canonical(a + (b - a) * k / (points + 1)) for k in range(1, points + 1)]
    if integer:
        values = sorted({round(v) for v in values} - {round(a), round(b)})
    return [v for v in values if a < v < b]


def _point(plan: Plan, point: dict[str, float], seed: int) -> tuple:
    return (*(point[a] for a in plan.experiment.axis_names), seed)


def _curve(plan: Plan, refine: RefineSettings, target: Target, pairs: _PointSet, dims: list[str],
           rows_coords: dict[str, list], est: np.ndarray, half: np.ndarray, exists: dict[tuple, bool],
           axis: str) -> list[Proposal]:
    """Rows halfway between neighbours along ``axis`` whose estimates differ by more than the
    precision and than their two half-widths together (a difference within the noise is no
    curvature to resolve: the rows' own seeds come first)."""
    k = dims.index(axis)
    kind = plan.experiment.axis(axis).kind
    out = []
    for at in np.ndindex(*(len(rows_coords[d]) for i, d in enumerate(dims) if i != k)):
        line = [(*at[:k], j, *at[k:]) for j in range(len(rows_coords[axis]))]
        line = [p for p in line if exists.get(p) and np.isfinite(est[p])]
        for p, q in zip(line, line[1:]):
            e1, e2 = est[p], est[q]
            wanted = refine.wanted((e1 + e2) / 2)
            noise = half[p] + half[q] if np.isfinite(half[p] + half[q]) else math.inf
            if abs(e2 - e1) <= max(wanted, noise):
                continue
            new = _inside(rows_coords[axis][p[k]], rows_coords[axis][q[k]], 1, kind == "int")
            if not new or not _allowed(plan, axis, new[0]):
                continue
            row = {d: rows_coords[d][i] for d, i in zip(dims, p)}
            row[axis] = new[0]
            grid_row = {d: v for d, v in row.items() if d in plan.experiment.axis_names}
            crossing = plan.grid[target.crossing] if target.crossing else [None]
            points = {_point(plan, {**grid_row, **({target.crossing: c} if target.crossing else {})}, s)
                      for c in crossing for s in plan.seeds}
            out.append(Proposal(points, abs(e2 - e1) / wanted, {
                "boundary": target.variable, "row": _row_text(row), "action": "curve",
                "reason": f"neighbours differ by {_six_digits(abs(e2 - e1))} > {_six_digits(wanted)} and > their "
                          f"half-widths together {_six_digits(noise)}",
                "added": f"{axis} {format_value(new[0])}", "new_points": len(points),
                "estimate": "", "low": "", "high": "", "wanted": _six_digits(wanted)}))
    return out


def _allowed(plan: Plan, axis: str, value: float) -> bool:
    """Whether the experiment's own checks accept ``value`` on ``axis`` with the configured options."""
    try:
        plan.experiment.check(plan.options, {**plan.grid, axis: [value]}, f"experiments.{plan.name}")
    except ConfigError:
        return False
    return True


def _free_axis(refine: RefineSettings) -> str | None:
    return next((t.crossing for t in refine.targets if t.crossing), None)


def _rectangles(points: set[tuple], axes: list[str], free: str | None) -> list[dict[str, list]]:
    """New points as rectangles: per value of every other axis, the ``free`` axis's values that
    hold the same seeds form one rectangle."""
    grid_axes = axes[:-1]
    f = grid_axes.index(free) if free else None
    rows: dict[tuple, dict[Any, set[int]]] = defaultdict(lambda: defaultdict(set))
    for *point, seed in points:
        rest = tuple(v for i, v in enumerate(point) if i != f)
        rows[rest][point[f] if f is not None else None].add(seed)
    rects = []
    for rest in sorted(rows):
        by_seeds: dict[tuple, list] = defaultdict(list)
        for value, seeds in rows[rest].items():
            by_seeds[tuple(sorted(seeds))].append(value)
        for seeds in sorted(by_seeds):
            values = iter(rest)
            rect = {axis: sorted(by_seeds[seeds]) if i == f else [next(values)] for i, axis in enumerate(grid_axes)}
            rects.append({**rect, SEED: list(seeds)})
    return rects


def _seconds(plan: Plan, points: set[tuple], axes: list[str], free: str | None) -> float:
    """Estimated one-core seconds of the jobs the points make."""
    return sum(estimate(plan.experiment.job_seconds, spec)
               for rect in _rectangles(points, axes, free) for spec in plan.rect_jobs(rect))


def assess(plan: Plan, results: str | Path, record: dict[str, Any]) -> dict[str, Any]:
    """Decide the next round of one experiment from its finished sweep and update ``record``:
    a new round (its rectangles, points and estimated core-hours) or the final assessment."""
    folder = Path(results, plan.name)
    simulated = open_store(folder / "sweep.zarr")["simulated"].load()
    boundary = open_store(folder / "boundary.zarr").load()
    rounds = record["rounds"]
    spent = sum(plan.seconds().values()) + sum(r["core_hours"] for r in rounds) * 3600
    budget = plan.refine.core_hours * 3600 - spent
    blocks, assessment, reason = decide(plan, plan.refine, simulated, boundary, budget)
    if blocks and len(rounds) >= plan.refine.rounds:
        blocks, reason = [], f"the round limit ({plan.refine.rounds}) is reached"
    record.pop("final", None)
    if not blocks:
        record["final"] = {"round": len(rounds) + 1, "reason": reason, "assessment": assessment}
        return record
    seconds = sum(plan.experiment.job_seconds(job) for rect in blocks for job in plan.rect_jobs(rect))
    new = sum(math.prod(len(v) for v in rect.values()) for rect in blocks)
    rounds.append({"round": len(rounds) + 1, "new_points": new, "core_hours": round(hours(seconds), 6),
                   "blocks": blocks, "assessment": assessment})
    return record
