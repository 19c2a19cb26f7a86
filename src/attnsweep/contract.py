"""The contract of an experiment: what the generic rules and the CLI see of one.

An experiment is a package, split by job into modules that the contract finds by name:

- ``__init__.py``: a subclass of :class:`Experiment` with the experiment's identity and options
  (name, paper, axes, options schema, wildcards, version, targets, and the checks the schema
  cannot express), its boundaries stated as :class:`Target`;
- ``simulate.py``: ``simulate(job, axes, device, dtype, progress)``, one job's Dataset;
- ``reduction.py``: ``reduce(sweep)`` (statistics over seeds and the theory on the same
  coordinates) and ``boundary(sweep, summary)``;
- ``captions.py``: ``figures(grid, options)``, the :class:`FigureSpec` list with its captions, as
  text (Snakemake builds it each time it plans a run); ``figures.py``: the functions that draw them;
- ``resources.py``: ``memory_bytes(job)`` and ``seconds(job)``, the job's estimates;
- ``theory.py`` (optional): ``theory(job)``, the Dataset of the experiment's theory at one point of
  its :attr:`Experiment.theory_axes`, a job of its own (``results/<experiment>/theory/``) made
  once per point and options, whatever seeds and other axes the sweep grows by; ``reduce``
  finds its variables in the sweep. With ``resources.theory_seconds(job)``, its estimate.

The class's methods call those functions, so an experiment writes each once, where it belongs,
and overrides a method only to do otherwise. An entry point names the class (like xarray's
``BackendEntrypoint``: :mod:`attnsweep.registry`). Experiments import these names from here, and
:class:`JobSpec`; this module imports no experiment.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, ClassVar

import yaml

from attnsweep.grid import Axis
from attnsweep.jobspec import JobSpec

__all__ = ["Experiment", "FigureSpec", "JobSpec", "Target", "options_file"]

if TYPE_CHECKING:  # kept out of the import path of every job
    import pandas as pd
    import torch
    import xarray as xr
    from matplotlib.figure import Figure


@dataclass(frozen=True)
class Target:
    """A boundary that refinement (:mod:`attnsweep.refine.rules`) can make precise.

    ``variable`` is the estimate in ``boundary.zarr``, with its interval ``<variable>_low`` and
    ``<variable>_high``. ``crossing`` is the grid axis the boundary is a level crossing along
    (new values of it locate the crossing), or None where it is located along an output axis
    (time): then only more seeds and the curve help. ``curves`` are the grid axes the boundary
    is a curve of, along which rows can be added between neighbours.
    """

    variable: str
    crossing: str | None = None
    curves: tuple[str, ...] = ()


@dataclass(frozen=True)
class FigureSpec:
    """A figure an experiment draws: file stem, report caption, and the function of the
    experiment's figures module that draws it (default: the one named like the figure), called as
    ``function(summary, boundary, **params)``."""

    name: str
    caption: str
    draw: str = ""
    params: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.draw:
            object.__setattr__(self, "draw", self.name)


class Experiment:
    """Contract of an experiment package (see the module docstring for its modules).

    Class attributes
    ----------------
    name : registry key and config section.
    title, paper : one-line description, and the paper it implements (its arXiv id or venue, authors
        and title; docs/papers/ holds what the project took from it).
    axes : grid axes in canonical order (the seed axis is implicit and comes last), each with its
        domain and default: the one statement of them (the config schema is composed from it).
    options_schema : the rest of the config section as JSON schema: ``description`` (one
        paragraph), ``seeds`` (``default``, ``description``), optionally ``dtype`` (a ``default``
        other than the global dtype, with its ``description``) and ``options`` (the properties of
        every option); read from ``config.schema.yaml`` beside the class (:func:`options_file`).
    default_wildcards : axes fanned out as jobs unless the config says otherwise.
    version : bump when a change of the code changes the numbers: every job then reruns.
    targets : the boundaries refinement can make precise (none: the experiment takes no ``refine``).
    theory_axes : the axes the experiment's theory is a function of, one theory job per point of
        them (none: no theory jobs; a cheap theory belongs in ``reduce``), with
        :meth:`theory_options`, the options it depends on.

    ``simulate`` must draw its random numbers from :func:`attnsweep.run.rng.generator` keyed by the
    axes that shape the draws and the seed only, so results do not depend on the job cut.
    """

    name: ClassVar[str]
    title: ClassVar[str]
    paper: ClassVar[str]
    axes: ClassVar[tuple[Axis, ...]]
    options_schema: ClassVar[dict[str, Any]]
    default_wildcards: ClassVar[tuple[str, ...]]
    version: ClassVar[int] = 1
    targets: ClassVar[tuple[Target, ...]] = ()
    theory_axes: ClassVar[tuple[str, ...]] = ()

    def config_schema(self) -> dict[str, Any]:
        """The JSON schema of this experiment's config section: its axes, ``seeds``, ``wildcards``,
        ``refine`` (where it declares targets), ``dtype``, then its options."""
        seeds = {"$ref": "#/$defs/seeds", **self.options_schema["seeds"]}
        shared = {"seeds": seeds, "wildcards": {"$ref": "#/$defs/wildcards"}}
        if self.targets:
            shared["refine"] = {"$ref": "#/$defs/refine"}
        shared["dtype"] = {"$ref": "#/$defs/dtype",
                           "description": "precision of this experiment's simulations; the global dtype if absent",
                           **self.options_schema.get("dtype", {})}
        properties = {axis.name: axis.schema() for axis in self.axes} | shared
        clash = sorted(set(properties) & set(self.options_schema["options"]))
        if clash:
            raise TypeError(f"experiment {self.name!r}: options {clash} clash with its axes or shared keys")
        return {"description": self.options_schema["description"], "type": "object", "additionalProperties": False,
                "properties": properties | self.options_schema["options"]}

    def axis(self, name: str) -> Axis:
        return {a.name: a for a in self.axes}[name]

    @property
    def axis_names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.axes)

    def check(self, options: dict[str, Any], grid: dict[str, list[float]], prefix: str) -> None:
        """Refuse combinations of options and grid the schema cannot express: raise
        :class:`attnsweep.errors.ConfigError` naming ``prefix.key`` (default: accept all)."""

    def targets_for(self, options: dict[str, Any]) -> tuple[Target, ...]:
        """The targets a sweep with these options computes (default: every one declared)."""
        return self.targets

    def extents(self, grid: dict[str, list[float]]) -> dict[str, list]:
        """Coordinates of the store dimensions whose length follows the grid (for example one
        per signal when the number of signals is an axis); a store of ``grid`` holds exactly
        these, and the sweep their union, NaN where a grid point has fewer (default: none)."""
        return {}

    def result_options(self, options: dict[str, Any], grid: dict[str, list[float]]) -> dict[str, Any]:
        """The options that change the numbers of a job over ``grid`` (default: all of them but
        :meth:`boundary_options`).

        Part of the job's identity: changing an option reruns exactly the jobs it affects.
        """
        boundary = self.boundary_options(options)
        return {key: value for key, value in options.items() if key not in boundary}

    def boundary_options(self, options: dict[str, Any]) -> dict[str, Any]:
        """The options only ``boundary`` reads (a crossing's level; default: none). No job's
        identity holds them (the default :meth:`result_options` leaves them out; an override must
        too), so changing one reruns the boundary and the figures alone. The boundary step sets
        them in ``sweep.attrs`` before ``boundary(sweep, summary)`` and in ``boundary.zarr``'s attrs."""
        return {}

    def theory_options(self, options: dict[str, Any]) -> dict[str, Any]:
        """The options that change the numbers of a theory job (default: none). Leave them out of
        :meth:`result_options`, so that changing one reruns the theory jobs alone."""
        return {}

    def records(self, options: dict[str, Any]) -> dict[str, int]:
        """Records one system keeps (output times, recorded steps, snapshots), by the option key
        that sets them, counted without building them: checked against ``max_outputs`` before
        anything else looks at the options (default: none)."""
        return {}

    def part(self, module: str) -> ModuleType:
        """The module ``module`` of this experiment's package (``simulate``, ``reduction``,
        ``captions``, ``figures``, ``resources``), imported when first asked for: torch and
        matplotlib stay out of the planner."""
        package = type(self).__module__
        try:
            return importlib.import_module(f"{package}.{module}")
        except ModuleNotFoundError as err:
            if err.name != f"{package}.{module}":
                raise
            raise NotImplementedError(f"experiment {self.name!r}: its package {package} has no module {module} "
                                      "(attnsweep.contract: the modules an experiment provides)") from None

    def simulate(self, job: JobSpec, device: torch.device, dtype: torch.dtype, progress: bool = True) -> xr.Dataset:
        """Run one job: a Dataset with every axis and ``seed`` as dimensions (``simulate.simulate``)."""
        return self.part("simulate").simulate(job, self.axes, device, dtype, progress)

    def theory(self, job: JobSpec) -> xr.Dataset:
        """The theory at one point of :attr:`theory_axes`: a Dataset with those axes as dimensions
        (one value each) and no ``seed`` (``theory.theory``)."""
        return self.part("theory").theory(job)

    def job_memory_bytes(self, job: JobSpec) -> int:
        """Estimated peak memory of one job in bytes, checked against ``max_job_mib`` up front
        (``resources.memory_bytes``)."""
        return self.part("resources").memory_bytes(job)

    def job_seconds(self, job: JobSpec) -> float:
        """Estimated time of one job in seconds on one CPU core (:mod:`attnsweep.plan.cost`),
        checked against ``max_job_hours`` up front and given to Snakemake as the job's
        ``runtime`` (``resources.seconds``)."""
        return self.part("resources").seconds(job)

    def theory_seconds(self, job: JobSpec) -> float:
        """Estimated time of one theory job in seconds on one CPU core, Snakemake's ``runtime``
        for it (``resources.theory_seconds``)."""
        return self.part("resources").theory_seconds(job)

    def reduce(self, sweep: xr.Dataset) -> xr.Dataset:
        """Statistics over seeds plus theory on the same coordinates (``reduction.reduce``)."""
        return self.part("reduction").reduce(sweep)

    def boundary(self, sweep: xr.Dataset, summary: xr.Dataset) -> tuple[pd.DataFrame, xr.Dataset]:
        """Phase boundaries with their uncertainty, as a table and as a Dataset (``reduction.boundary``)."""
        return self.part("reduction").boundary(sweep, summary)

    def figures(self, grid: dict[str, list[float]], options: dict[str, Any]) -> list[FigureSpec]:
        """The figures this experiment draws for a grid and options, captions naming both
        (``captions.figures``: text only, since Snakemake calls this whenever it plans a run)."""
        return self.part("captions").figures(grid, options)

    def draw(self, function: str, params: dict[str, Any], summary: xr.Dataset, boundary: xr.Dataset) -> Figure:
        """A figure from the reduced data (a :class:`FigureSpec`'s ``draw`` and ``params``):
        ``function(summary, boundary, **params)`` of the package's ``figures`` module."""
        module = self.part("figures")
        draw = getattr(module, function, None)
        if draw is None:
            raise KeyError(f"{self.name} draws no figure {function!r}: {module.__name__} has no such function")
        return draw(summary, boundary, **params)


def options_file(module_file: str) -> dict[str, Any]:
    """An experiment's ``options_schema``, read from ``config.schema.yaml`` beside ``module_file``."""
    return yaml.safe_load(Path(module_file).with_name("config.schema.yaml").read_text())
