"""The one extension point: an experiment, registered by name.

An experiment module subclasses :class:`Experiment` and decorates it with :func:`register`.
The generic rules and the CLI only ever see this contract (like SciPy's ``METHODS`` of
``OdeSolver`` classes, or xarray's backend entry points).
"""

from __future__ import annotations

import hashlib
import json
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from attnsweep.grid import Axis, format_value

KEY_DIGITS = 12

if TYPE_CHECKING:  # kept out of the import path of every job
    import pandas as pd
    import torch
    import xarray as xr
    from matplotlib.figure import Figure


@dataclass(frozen=True)
class JobSpec:
    """Everything one simulate job needs; JSON-serialisable through :meth:`to_dict`.

    ``grid`` holds every axis (fanned-out ones as one-element lists), ``seeds`` the seeds
    of the job, ``options`` the experiment's options that change this job's numbers
    (:meth:`Experiment.result_options`), ``version`` the experiment's numerics version.
    ``block_mib`` only bounds memory: it is not part of :meth:`identity`.
    """

    experiment: str
    grid: dict[str, list[float]]
    seeds: list[int]
    options: dict[str, Any] = field(default_factory=dict)
    dtype: str = "float32"
    version: int = 1
    block_mib: int = 256

    def identity(self) -> dict[str, Any]:
        """What the job's numbers depend on: two jobs with equal identities give equal stores."""
        return {
            "experiment": self.experiment,
            "version": self.version,
            "grid": self.grid,
            "seeds": self.seeds,
            "options": self.options,
            "dtype": self.dtype,
        }

    @property
    def itemsize(self) -> int:
        """Bytes of one floating-point number of the job (its ``dtype``)."""
        return 8 if self.dtype == "float64" else 4

    def key(self) -> str:
        """12 hex digits of the SHA-256 of :meth:`identity`: the job's store name."""
        text = json.dumps(self.identity(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:KEY_DIGITS]

    def to_dict(self) -> dict[str, Any]:
        return {**self.identity(), "block_mib": self.block_mib}

    @classmethod
    def from_dict(cls, spec: dict[str, Any]) -> JobSpec:
        return cls(
            experiment=spec["experiment"],
            grid={k: list(v) for k, v in spec["grid"].items()},
            seeds=[int(s) for s in spec["seeds"]],
            options=dict(spec["options"]),
            dtype=spec["dtype"],
            version=int(spec.get("version", 1)),
            block_mib=int(spec.get("block_mib", 256)),
        )


@dataclass(frozen=True)
class Target:
    """A boundary that refinement (:mod:`attnsweep.refine`) can make precise.

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
    """A figure an experiment draws: file stem and report caption."""

    name: str
    caption: str


class Experiment(ABC):
    """Contract of an experiment module.

    Class attributes
    ----------------
    name : registry key and config section.
    title, paper : one-line description and the paper file it implements.
    axes : grid axes in canonical order (the seed axis is implicit and comes last).
    default_wildcards : axes fanned out as jobs unless the config says otherwise.
    version : bump when a change of the code changes the numbers: every job then reruns.
    targets : the boundaries refinement can make precise (none: the experiment takes no ``refine``).

    ``simulate`` must draw its random numbers from :func:`attnsweep.rng.generator` keyed by the
    axes that shape the draws and the seed only, so results do not depend on the job cut.
    """

    name: ClassVar[str]
    title: ClassVar[str]
    paper: ClassVar[str]
    axes: ClassVar[tuple[Axis, ...]]
    default_wildcards: ClassVar[tuple[str, ...]]
    version: ClassVar[int] = 1
    targets: ClassVar[tuple[Target, ...]] = ()

    def axis(self, name: str) -> Axis:
        return {a.name: a for a in self.axes}[name]

    @property
    def axis_names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.axes)

    def check(self, options: dict[str, Any], grid: dict[str, list[float]], prefix: str) -> None:  # noqa: B027
        """Refuse combinations of options and grid the schema cannot express: raise
        :class:`attnsweep.errors.ConfigError` naming ``prefix.key`` (default: accept all)."""

    def extents(self, grid: dict[str, list[float]]) -> dict[str, list]:
        """Coordinates of the store dimensions whose length follows the grid (for example one
        per signal when the number of signals is an axis); a store of ``grid`` holds exactly
        these, and the sweep their union, NaN where a grid point has fewer (default: none)."""
        return {}

    def result_options(self, options: dict[str, Any], grid: dict[str, list[float]]) -> dict[str, Any]:
        """The options that change the numbers of a job over ``grid`` (default: all of them).

        Part of the job's identity: changing an option reruns exactly the jobs it affects.
        """
        return dict(options)

    @abstractmethod
    def simulate(
        self, job: JobSpec, device: torch.device, dtype: torch.dtype, progress: bool = True
    ) -> xr.Dataset:
        """Run one job: a Dataset with every axis and ``seed`` as dimensions."""

    def records(self, options: dict[str, Any]) -> dict[str, int]:
        """Records one system keeps (output times, recorded steps, snapshots), by the option key
        that sets them, counted without building them: checked against ``max_outputs`` before
        anything else looks at the options (default: none)."""
        return {}

    @abstractmethod
    def job_memory_bytes(self, job: JobSpec) -> int:
        """Estimated peak memory of one job in bytes, checked against ``max_job_mib`` up front."""

    @abstractmethod
    def job_seconds(self, job: JobSpec) -> float:
        """Estimated time of one job in seconds on one CPU core (:mod:`attnsweep.cost`), checked
        against ``max_job_hours`` up front and given to Snakemake as the job's ``runtime``."""

    @abstractmethod
    def reduce(self, sweep: xr.Dataset) -> xr.Dataset:
        """Statistics over seeds plus theory on the same coordinates."""

    @abstractmethod
    def boundary(self, sweep: xr.Dataset, summary: xr.Dataset) -> tuple[pd.DataFrame, xr.Dataset]:
        """Phase boundaries with their uncertainty, as a table and as a Dataset."""

    @abstractmethod
    def figures(self, grid: dict[str, list[float]], options: dict[str, Any]) -> list[FigureSpec]:
        """The figures this experiment draws for a grid and options (captions may name both)."""

    @abstractmethod
    def draw(self, name: str, summary: xr.Dataset, boundary: xr.Dataset) -> Figure:
        """Draw figure ``name`` from the reduced data."""


REGISTRY: dict[str, Experiment] = {}


def register(cls: type[Experiment]) -> type[Experiment]:
    """Class decorator: instantiate and register an experiment under ``cls.name``."""
    if cls.name in REGISTRY:
        raise ValueError(f"experiment {cls.name!r} registered twice")
    REGISTRY[cls.name] = cls()
    return cls


def get(name: str) -> Experiment:
    """The registered experiment ``name`` (importing the built-in experiments first)."""
    import attnsweep.experiments  # noqa: F401  (registers the built-ins)

    try:
        return REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(REGISTRY))
        raise KeyError(f"unknown experiment {name!r} (known: {known})") from None


def names() -> list[str]:
    import attnsweep.experiments  # noqa: F401

    return sorted(REGISTRY)


def point_path(point: dict[str, float], order: Callable[[str], int]) -> str:
    """Paramspace-style path ``a~v/b~w`` of a fanned-out point, axes in canonical order."""
    return "/".join(f"{k}~{format_value(point[k])}" for k in sorted(point, key=order))
