"""The registry of experiments: the built-in ones and those of installed packages, by name.

An experiment is a subclass of :class:`~attnsweep.contract.Experiment` decorated with
:func:`register`; :func:`discover` imports the built-in experiments and every entry point of
the group ``attnsweep.experiments``, and :func:`get` finds one by name. The contract's names
are importable from here too, where an experiment package takes :func:`register` from.
"""

from __future__ import annotations

import functools
from importlib.metadata import entry_points

from attnsweep.contract import Experiment, FigureSpec, Target, options_file
from attnsweep.errors import ConfigError
from attnsweep.jobspec import JobSpec

__all__ = ["ENTRY_POINTS", "REGISTRY", "Experiment", "FigureSpec", "JobSpec", "Target", "discover", "get", "names",
           "options_file", "register"]

ENTRY_POINTS = "attnsweep.experiments"  # the entry-point group of experiments in other packages


REGISTRY: dict[str, Experiment] = {}


def register(cls: type[Experiment]) -> type[Experiment]:
    """Class decorator: instantiate and register an experiment under ``cls.name``."""
    if cls.name in REGISTRY:
        raise ValueError(f"experiment {cls.name!r} registered twice")
    REGISTRY[cls.name] = cls()
    return cls


@functools.cache
def discover() -> None:
    """Register the built-in experiments, then those of installed packages: each entry point of
    the group ``attnsweep.experiments`` names a module that registers the experiment of its name."""
    import attnsweep.experiments  # noqa: F401  (registers the built-ins)

    for point in entry_points(group=ENTRY_POINTS):
        where = f"{ENTRY_POINTS} entry point {point.name} = {point.value}"
        try:
            point.load()
        except Exception as err:
            raise ConfigError(where, f"the installed experiment fails to import: {type(err).__name__}: {err}") from None
        if point.name not in REGISTRY:
            known = ", ".join(sorted(REGISTRY))
            raise ConfigError(where, f"registers no experiment {point.name!r} (registered: {known})")


def get(name: str) -> Experiment:
    """The registered experiment ``name`` (built-in or installed: :func:`discover`)."""
    discover()
    try:
        return REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(REGISTRY))
        raise KeyError(f"unknown experiment {name!r} (known: {known})") from None


def names() -> list[str]:
    discover()
    return sorted(REGISTRY)
