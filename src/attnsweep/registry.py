"""The experiments by name: the built-in ones and those of installed packages.

Found as xarray finds its backends (``xarray.backends.plugins``): the built-ins are a table of
entry points, ``name -> module:Class``, loaded the same way as the entry points of the group
``attnsweep.experiments`` that other packages declare. Each names a subclass of
:class:`~attnsweep.contract.Experiment`; :func:`get` imports and instantiates only the one asked
for. An experiment imports nothing from here, so no import comes back to this module.
"""

from __future__ import annotations

import functools
from importlib.metadata import EntryPoint, entry_points

from attnsweep.contract import Experiment
from attnsweep.errors import ConfigError

__all__ = ["BUILTIN", "ENTRY_POINTS", "get", "load_all", "names"]

ENTRY_POINTS = "attnsweep.experiments"  # the entry-point group of experiments in other packages

#: The built-in experiments, one per paper and those past the papers, as entry points of the group.
BUILTIN = tuple(
    EntryPoint(name, f"attnsweep.experiments.{name}:{cls}", ENTRY_POINTS)
    for name, cls in (
        ("critical_scaling", "CriticalScaling"),
        ("sphere_clustering", "SphereClustering"),
        ("mixture_training", "MixtureTraining"),
        ("causal_clustering", "CausalClustering"),
        ("cluster_emergence", "ClusterEmergence"),
        ("noisy_clustering", "NoisyClustering"),
        ("normalized_attention", "NormalizedAttention"),
        ("circle_synchronization", "CircleSynchronization"),
    )
)


@functools.cache
def _points() -> dict[str, EntryPoint]:
    """Every experiment's entry point by name: the built-ins, then the installed packages'."""
    points = {point.name: point for point in BUILTIN}
    for point in entry_points(group=ENTRY_POINTS):
        if point.name in points:
            raise ConfigError(_where(point), f"names the experiment {point.name!r} a second time "
                              f"(first: {points[point.name].value})")
        points[point.name] = point
    return points


def _where(point: EntryPoint) -> str:
    return f"{ENTRY_POINTS} entry point {point.name} = {point.value}"


@functools.cache
def get(name: str) -> Experiment:
    """The experiment ``name``, built in or installed: its class imported and instantiated once.
    An entry point that fails to import, or names no Experiment of that name, is a ConfigError
    naming the entry point."""
    points = _points()
    if name not in points:
        raise KeyError(f"unknown experiment {name!r} (known: {', '.join(sorted(points))})")
    point = points[name]
    try:
        cls = point.load()
    except Exception as err:
        raise ConfigError(_where(point), f"the installed experiment fails to import: {type(err).__name__}: {err}"
                          ) from None
    if not (isinstance(cls, type) and issubclass(cls, Experiment)):
        raise ConfigError(_where(point), "names no subclass of attnsweep.contract.Experiment "
                          "(point it at the class: 'module:Class')")
    if getattr(cls, "name", None) != name:
        raise ConfigError(_where(point), f"names the experiment {getattr(cls, 'name', None)!r}, not {name!r}")
    unknown = [axis for axis in cls.theory_axes if axis not in {a.name for a in cls.axes}]
    if unknown:
        raise ConfigError(_where(point), f"its theory_axes {unknown} are not among its axes")
    return cls()


def names() -> list[str]:
    """Every experiment's name, sorted, without importing any."""
    return sorted(_points())


def load_all() -> None:
    """Import every experiment (the warm worker's preload; a broken one fails here)."""
    for name in names():
        get(name)
