"""The plan of one experiment's jobs: its expanded grid cut into blocks (:mod:`attnsweep.plan.blocks`),
the stores already made reused, the rectangles a refinement adds (:mod:`attnsweep.refine.rules`)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from attnsweep.contract import Experiment
from attnsweep.grid import SEED
from attnsweep.jobspec import JobSpec, point_path
from attnsweep.plan.blocks import rectangles, stored_jobs
from attnsweep.plan.refinement import RefineSettings


def estimate(function: Callable[[JobSpec], float], job: JobSpec) -> float:
    """``function(job)`` as a float, inf where the counts of an absurd config overflow one."""
    try:
        return float(function(job))
    except OverflowError:
        return math.inf


@dataclass(frozen=True)
class Plan:
    """One experiment's expanded grid and its cut into jobs (see :mod:`attnsweep.plan.blocks`)."""

    experiment: Experiment
    grid: dict[str, list[float]]
    seeds: list[int]
    wildcards: tuple[str, ...]
    options: dict[str, Any]
    dtype: str
    block_mib: int = 256
    extra: tuple[dict[str, list], ...] = ()  # rectangles added by refinement (axes and seed)
    refine: RefineSettings | None = None
    _blocks: dict[str, JobSpec] = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def name(self) -> str:
        return self.experiment.name

    def base(self) -> dict[str, list]:
        """The configured product grid as one rectangle of every axis and ``seed``."""
        return {**self.grid, SEED: self.seeds}

    def coords(self) -> dict[str, list]:
        """Each axis's values (and the seeds) over the base grid and every added rectangle:
        the coordinates of ``sweep.zarr``, NaN at the points no rectangle holds."""
        rects = [self.base(), *self.extra]
        return {axis: sorted({v for rect in rects for v in rect[axis]}) for axis in rects[0]}

    def layout(self) -> dict[str, Any]:
        """``collect``'s ``grid`` and ``points``: the coordinates and, refined, the rectangles the
        sweep holds (None: the whole grid)."""
        return {"grid": self.coords(), "points": [self.base(), *self.extra] if self.extra else None}

    def with_extra(self, extra: list[dict[str, list]]) -> Plan:
        """This plan with ``extra`` rectangles added to its points (see :mod:`attnsweep.refine.rules`)."""
        return replace(self, extra=(*self.extra, *extra))

    def _order(self, axis: str) -> int:
        return [*self.experiment.axis_names, SEED].index(axis)

    def _values(self, axis: str) -> list:
        return self.seeds if axis == SEED else self.grid[axis]

    def spec(self, grid: dict[str, list[float]], seeds: list[int]) -> JobSpec:
        """The job over ``grid`` x ``seeds``, with the options that change its numbers."""
        return JobSpec(self.name, grid, seeds, self.experiment.result_options(self.options, grid),
                       self.dtype, self.experiment.version, self.block_mib)

    def _block(self, point: dict[str, float], rect: dict[str, list]) -> JobSpec:
        """The job of one fanned-out point and one rectangle of the batched axes."""
        grid = {axis: list(rect[axis]) if axis in rect else [point[axis]] for axis in self.experiment.axis_names}
        return self.spec(grid, list(rect[SEED]) if SEED in rect else [point[SEED]])

    def theory_jobs(self) -> dict[str, JobSpec]:
        """One theory job per point of the experiment's ``theory_axes`` over every value the sweep
        holds (:meth:`coords`), keyed by ``point/KEY`` like :meth:`jobs`: its options are the
        theory's alone, so seeds, other axes and the options of the simulations rerun none."""
        axes = self.experiment.theory_axes
        if not axes:
            return {}
        values = self.coords()
        options = self.experiment.theory_options(self.options)
        jobs = {}
        for point in itertools.product(*(values[axis] for axis in axes)):
            spec = JobSpec(self.name, {axis: [v] for axis, v in zip(axes, point)}, [], options, self.dtype,
                           self.experiment.version, self.block_mib, step="theory")
            jobs[f"{point_path(dict(zip(axes, point)), self._order)}/{spec.key()}"] = spec
        return jobs

    def _covers(self, stored: JobSpec, point: dict[str, float], want: dict[str, list]) -> set[tuple]:
        """The wanted batched points a stored job holds; none unless this plan would make it again."""
        if stored.identity() != self.spec(stored.grid, stored.seeds).identity():
            return set()
        have = {**stored.grid, SEED: stored.seeds}
        if any(have[axis] != [value] for axis, value in point.items()):
            return set()
        wanted = {axis: set(values) for axis, values in want.items()}
        return set(itertools.product(*([v for v in have[axis] if v in wanted[axis]] for axis in want)))

    def seconds(self) -> dict[str, float]:
        """Estimated time of each job of :meth:`blocks` (seconds on one CPU core; inf past a float)."""
        return {path: estimate(self.experiment.job_seconds, job) for path, job in self.blocks().items()}

    def memory(self) -> dict[str, float]:
        """Estimated peak memory of each job of :meth:`blocks` (bytes; inf past a float)."""
        return {path: estimate(self.experiment.job_memory_bytes, job) for path, job in self.blocks().items()}

    def blocks(self) -> dict[str, JobSpec]:
        """One job per fanned-out point over all batched values, keyed by the point's folder."""
        if not self._blocks:
            batched = {axis: self._values(axis) for axis in (*self.experiment.axis_names, SEED)
                       if axis not in self.wildcards}
            for values in itertools.product(*(self._values(axis) for axis in self.wildcards)):
                point = dict(zip(self.wildcards, values))
                self._blocks[point_path(point, self._order) if point else "all"] = self._block(point, batched)
        return self._blocks

    def _folders(self) -> dict[str, tuple[dict[str, float], list[dict[str, list]]]]:
        """Each fanned-out point's folder, its point and the rectangles of batched values it holds:
        the base grid's, then the added rectangles' in order."""
        folders = {}
        for folder, block in self.blocks().items():
            point = {axis: (block.seeds if axis == SEED else block.grid[axis])[0] for axis in self.wildcards}
            folders[folder] = (point, [self._batched(self.base())])
        for rect in self.extra:
            for values in itertools.product(*(rect[axis] for axis in self.wildcards)):
                point = dict(zip(self.wildcards, values))
                folder = point_path(point, self._order) if point else "all"
                folders.setdefault(folder, (point, []))[1].append(self._batched(rect))
        return folders

    def rect_jobs(self, rect: dict[str, list]) -> list[JobSpec]:
        """The jobs of one rectangle of every axis and ``seed``: one per fanned-out point."""
        batched = self._batched(rect)
        return [self._block(dict(zip(self.wildcards, values)), batched)
                for values in itertools.product(*(rect[axis] for axis in self.wildcards))]

    def _batched(self, rect: dict[str, list]) -> dict[str, list]:
        return {axis: list(rect[axis]) for axis in (*self.experiment.axis_names, SEED) if axis not in self.wildcards}

    def jobs(self, results: str | Path | None = None) -> dict[str, JobSpec]:
        """Jobs keyed by their path ``a~v/.../seed~k/KEY`` (no suffix).

        Without ``results``: :meth:`blocks`, then one job per added rectangle and folder. With
        it: the complete stores under ``results`` that hold wanted values are jobs too (already
        done), and the values they do not hold are cut into new blocks.
        """
        runs = Path(results, self.name, "runs") if results is not None else None
        scan = runs is not None and runs.is_dir()  # a new sweep: no folder to look into
        jobs = {}
        for folder, (point, rects) in self._folders().items():
            covered: set[tuple] = set()
            stored = stored_jobs(runs / folder) if scan else ()
            for key, spec in stored:
                held = set().union(*(self._covers(spec, point, rect) for rect in rects))
                if held:
                    jobs[f"{folder}/{key}"] = spec
                    covered |= held
            if len(rects) == 1 and not covered and folder in self.blocks():  # a product grid, nothing stored
                jobs[f"{folder}/{self.blocks()[folder].key()}"] = self.blocks()[folder]
                continue
            for rect in rects:  # each rectangle's values that no store and no earlier rectangle holds
                points = set(itertools.product(*rect.values())) if len(rects) > 1 else covered
                for spec in [self._block(point, r) for r in rectangles(rect, covered & points)]:
                    jobs[f"{folder}/{spec.key()}"] = spec
                covered |= points
        return jobs
