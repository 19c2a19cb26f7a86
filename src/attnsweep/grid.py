"""Grid axes: expansion of the config's value specs and canonical formatting of values.

A value spec is one of (bounds inclusive)::

    [v1, v2, ...]                  explicit values ("inf" where the axis takes it)
    v                              a single value
    {start, stop, num}             linear spacing, num points
    {start, stop, num, log: true}  geometric spacing, num points
    {start, stop, step}            start, start + step, ... up to stop

Expanded values are rounded to 12 significant digits, so ``0.1 + 0.2`` and
``np.linspace`` noise never reach a path or a coordinate: ``format_value(0.3) == "0.3"``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from attnsweep.errors import ConfigError

SIGNIFICANT_DIGITS = 12
#: The seed axis: implicit in every experiment, after its grid axes.
SEED = "seed"


@dataclass(frozen=True)
class Axis:
    """One grid axis of an experiment.

    Parameters
    ----------
    name : str
        Key in the config and coordinate name in every store.
    kind : {"int", "float"}
        Integer axes refuse non-integral values.
    long_name, units : str
        CF-style attrs of the coordinate.
    low, high : float
        Domain bounds; ``low_open``/``high_open`` make them exclusive.
    infinite : bool
        Whether +inf (written ``inf`` in the config) is a value, as for an infinite width.
    default : value spec
        The config's value when the section leaves the axis out (checked against the domain).
    note : str
        What the config's documentation adds to ``long_name`` (the papers' values, a caveat).
    """

    name: str
    kind: Literal["int", "float"]
    long_name: str
    units: str = "1"
    low: float = -math.inf
    high: float = math.inf
    low_open: bool = False
    high_open: bool = False
    infinite: bool = False
    default: Any = field(default=None, compare=False)
    note: str = ""

    def domain(self) -> str:
        left = "(" if self.low_open else "["
        right = ")" if self.high_open else "]"
        extra = " or inf" if self.infinite else ""
        return f"{left}{format_value(self.low)}, {format_value(self.high)}{right}{extra}"

    def schema(self) -> dict[str, Any]:
        """The axis's property in the config's JSON schema: its value spec, default and description."""
        kind = "integer" if self.kind == "int" else "number"
        description = f"{self.long_name}: {kind} in {self.domain()}" + (f"; {self.note}" if self.note else "")
        return {"$ref": "#/$defs/axis", "default": self.default, "description": description}

    def check(self, key: str, values: list[float]) -> list[float]:
        """Return ``values`` cast to the axis kind; raise ConfigError naming ``key`` otherwise."""
        if not values:
            raise ConfigError(key, "the grid is empty")
        if len(set(values)) != len(values):
            dup = sorted({v for v in values if values.count(v) > 1})
            raise ConfigError(key, f"duplicated values {[format_value(v) for v in dup]}")
        for v in values:
            if self.infinite and v == math.inf:
                continue
            if not math.isfinite(v):
                raise ConfigError(key, f"value {format_value(v)} is not finite")
            if self.kind == "int" and v != int(v):
                raise ConfigError(key, f"value {format_value(v)} is not an integer")
            below = v < self.low or (self.low_open and v == self.low)
            above = v > self.high or (self.high_open and v == self.high)
            if below or above:
                raise ConfigError(key, f"value {format_value(v)} outside {self.domain()}")
        cast = int if self.kind == "int" else float
        return sorted(v if math.isinf(v) else cast(v) for v in values)


def canonical(value: float) -> float:
    """Round to 12 significant digits (removes binary noise such as 0.30000000000000004)."""
    if value == 0 or not math.isfinite(value):
        return float(value)
    return float(f"{value:.{SIGNIFICANT_DIGITS}g}")


def format_value(value: float) -> str:
    """Shortest canonical text of a grid value, as used in paths: 2.0 -> "2", 0.3 -> "0.3"."""
    if isinstance(value, bool):
        raise TypeError("booleans are not grid values")
    if not math.isfinite(value):
        return "nan" if math.isnan(value) else "inf" if value > 0 else "-inf"
    value = canonical(float(value))
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return repr(value)


def format_values(values: Iterable[float]) -> str:
    """Grid values as a caption lists them: ``1, 2.5, 4``."""
    return ", ".join(format_value(v) for v in values)


def count(spec: Any, key: str) -> int:
    """How many values ``spec`` expands to, computed without expanding it."""
    if isinstance(spec, list):
        return len(spec)
    if isinstance(spec, dict) and "num" in spec:
        return spec["num"]
    if isinstance(spec, dict) and "step" in spec:
        start, stop, step = spec["start"], spec["stop"], spec["step"]
        if stop < start:
            raise ConfigError(key, f"stop {stop} is below start {start}")
        span = (stop - start) / step * (1 + 1e-12) + 1e-9
        return math.floor(span) + 1 if math.isfinite(span) else math.inf
    return 1


def expand(spec: Any, key: str, limit: float = math.inf) -> list[float]:
    """Expand one value spec (see module docstring) into a list of canonical floats; a spec of
    more than ``limit`` values is refused before any is made."""
    size = count(spec, key)
    if size > limit:
        raise ConfigError(key, f"{format_value(size)} values, over max_axis_values = {format_value(limit)}")
    if spec == "inf" or isinstance(spec, (int, float)) and not isinstance(spec, bool):
        values = [spec]
    elif isinstance(spec, list):
        values = spec
    elif isinstance(spec, dict) and "num" in spec:
        start, stop, num = spec["start"], spec["stop"], spec["num"]
        if spec.get("log", False):
            if start <= 0 or stop <= 0:
                raise ConfigError(key, "log spacing needs start > 0 and stop > 0")
            values = np.geomspace(start, stop, num).tolist()
        elif not math.isfinite(stop - start):
            span = f"start {format_value(start)} to stop {format_value(stop)}"
            raise ConfigError(key, f"{span} spans more than a float holds")
        else:
            values = np.linspace(start, stop, num).tolist()
    elif isinstance(spec, dict) and "step" in spec:
        values = [spec["start"] + k * spec["step"] for k in range(size)]
    else:
        raise ConfigError(key, f"not a grid spec: {spec!r}")
    return [canonical(float(v)) for v in values]


def expand_seeds(spec: int | list[int], key: str, limit: float = math.inf) -> list[int]:
    """Seeds from a count k (0..k-1) or an explicit list; more than ``limit`` are refused first."""
    size = spec if isinstance(spec, int) else len(spec)
    if size > limit:
        raise ConfigError(key, f"{size} seeds, over max_axis_values = {format_value(limit)}")
    seeds = list(range(spec)) if isinstance(spec, int) else list(spec)
    if not seeds:
        raise ConfigError(key, "no seeds")
    if any(s < 0 for s in seeds):
        raise ConfigError(key, f"negative seed in {seeds}")
    if len(set(seeds)) != len(seeds):
        raise ConfigError(key, f"duplicated seeds in {seeds}")
    return sorted(seeds)
