"""A job's identity: what one simulate or theory job computes, and its name.

:class:`JobSpec` holds everything a job's numbers depend on (:meth:`JobSpec.identity`), hashed
into the name of its store (:meth:`JobSpec.key`); :func:`point_path` names a fanned-out point
as Snakemake's paramspace does. The planner (:mod:`attnsweep.plan.experiment_plan`) makes them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from attnsweep.grid import format_value

KEY_DIGITS = 12
#: What a job computes: an experiment's simulations, or its theory (:attr:`attnsweep.contract.Experiment.theory_axes`).
STEPS = ("simulate", "theory")


@dataclass(frozen=True)
class JobSpec:
    """Everything one job needs; JSON-serialisable through :meth:`to_dict`.

    ``grid`` holds every axis (fanned-out ones as one-element lists), ``seeds`` the seeds
    of the job, ``options`` the experiment's options that change this job's numbers
    (:meth:`Experiment.result_options`), ``version`` the experiment's numerics version.
    ``step`` is ``"simulate"``, or ``"theory"`` for a job of the experiment's theory
    (:attr:`Experiment.theory_axes`: its grid holds those axes alone, it has no seeds, its
    options are :meth:`Experiment.theory_options`).
    ``block_mib`` only bounds memory: it is not part of :meth:`identity`.
    """

    experiment: str
    grid: dict[str, list[float]]
    seeds: list[int]
    options: dict[str, Any] = field(default_factory=dict)
    dtype: str = "float32"
    version: int = 1
    block_mib: int = 256
    step: str = "simulate"

    def __post_init__(self) -> None:
        if self.step not in STEPS:
            raise ValueError(f"step {self.step!r} is none of {', '.join(STEPS)}")

    def identity(self) -> dict[str, Any]:
        """What the job's numbers depend on: two jobs with equal identities give equal stores.
        A simulate job's identity does not name its step, so its key is the one it had before
        theory jobs existed: the stores already made keep their names."""
        identity = {
            "experiment": self.experiment,
            "version": self.version,
            "grid": self.grid,
            "seeds": self.seeds,
            "options": self.options,
            "dtype": self.dtype,
        }
        return identity if self.step == "simulate" else {**identity, "step": self.step}

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
            step=spec.get("step", "simulate"),
        )


def point_path(point: dict[str, float], order: Callable[[str], int]) -> str:
    """Paramspace-style path ``a~v/b~w`` of a fanned-out point, axes in canonical order."""
    return "/".join(f"{k}~{format_value(point[k])}" for k in sorted(point, key=order))
