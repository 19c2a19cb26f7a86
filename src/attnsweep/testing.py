"""The contract an experiment keeps, as a test class any experiment can run: the built-in ones
(``tests/package/test_contract.py``) and one a user adds in a package of their own.

Subclass :class:`ExperimentContract` in a test module, name the experiment and give a tiny
config section (a job or two of a few seconds); pytest runs every check::

    from attnsweep.testing import ExperimentContract

    class TestToyAttention(ExperimentContract):
        name = "toy_attention"
        section = {"n": [4], "beta": [0.5, 2.0], "seeds": 4, "t_max": 1.0}

Like snakemake-interface-common's ``TestRegistryBase`` for executor plugins: the checks are
what the generic rules rely on, run against the experiment itself, not against a copy of its
facts. The tiny sweep runs each job (and each theory job) in this process (CPU, one thread;
or takes a workflow run's stores, :meth:`ExperimentContract.tiny_stores`), then ``collect``,
``reduce``, ``boundary`` and every figure, as the workflow's rules do.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, ClassVar

from attnsweep import registry
from attnsweep.contract import Experiment, FigureSpec
from attnsweep.grid import SEED, Axis, expand
from attnsweep.plan.config import experiment_defaults, load_sweep, plan_experiment
from attnsweep.plan.experiment_plan import Plan
from attnsweep.reduce import aggregate
from attnsweep.run.job import run_job
from attnsweep.stores.io import open_store
from attnsweep.stores.probe import root_attrs

#: The modules of an experiment's package the contract's methods call: module -> (one of the
#: methods, the functions they call).
PARTS = {
    "simulate": ("simulate", "simulate"),
    "reduction": ("reduce", "reduce", "boundary"),
    "captions": ("figures", "figures"),
    "resources": ("job_seconds", "seconds", "memory_bytes"),
}
#: The same for an experiment with theory axes.
THEORY_PARTS = {
    "theory": ("theory", "theory"),
    "resources": ("theory_seconds", "theory_seconds"),
}


class ExperimentContract:
    """The checks; a subclass sets :attr:`name` and :attr:`section`."""

    #: The registered name of the experiment under test.
    name: ClassVar[str]
    #: A config section of the experiment for a sweep of a few seconds (unset keys: defaults).
    section: ClassVar[dict[str, Any]]

    @property
    def experiment(self) -> Experiment:
        return registry.get(self.name)

    def tiny_plan(self) -> Plan:
        return load_sweep({"experiments": {self.name: dict(self.section)}}).plans[self.name]

    def test_attributes(self) -> None:
        """Names, axes, wildcards and boundaries the rules can use."""
        exp = self.experiment
        assert exp.name == self.name
        assert exp.title and exp.paper, "title and paper are one line each"
        assert exp.axes and all(isinstance(axis, Axis) for axis in exp.axes)
        names = exp.axis_names
        assert len(set(names)) == len(names) and SEED not in names, f"axis names {names}"
        assert set(exp.default_wildcards) <= {*names, SEED}, f"default_wildcards {exp.default_wildcards}"
        assert isinstance(exp.version, int) and exp.version >= 1
        for key in ("description", "seeds", "options"):
            assert key in exp.options_schema, f"options_schema lacks {key!r}"
        for target in exp.targets:
            assert target.crossing is None or target.crossing in names, f"{target}: crossing is no axis"
            assert set(target.curves) <= set(names), f"{target}: curves are not axes"
        assert set(exp.theory_axes) <= set(names), f"theory_axes {exp.theory_axes} are not axes"

    def test_the_package_holds_each_part(self) -> None:
        """Every method the class does not override finds its module in the experiment's package,
        holding the function it calls (attnsweep.contract)."""
        exp = self.experiment
        parts = [*PARTS.items(), *(THEORY_PARTS.items() if exp.theory_axes else ())]
        for part, (method, *functions) in parts:
            if getattr(type(exp), method) is not getattr(Experiment, method):
                continue  # the class does it itself
            module = exp.part(part)
            for function in functions:
                assert callable(getattr(module, function, None)), f"{module.__name__} has no function {function}"

    def test_defaults_make_a_plan_with_finite_estimates(self) -> None:
        """Every axis default inside its domain; the defaults alone plan, and each job's time
        and memory estimates are positive and finite (they size SLURM requests); no job's
        identity holds a boundary option (a change of one would rerun it)."""
        for axis in self.experiment.axes:
            key = f"experiments.{self.name}.{axis.name}"
            axis.check(key, expand(axis.default, key))
        plan = plan_experiment(self.name, experiment_defaults(self.name), "float32")
        boundary = set(self.experiment.boundary_options(plan.options))
        for spec in plan.jobs("results").values():
            seconds, memory = self.experiment.job_seconds(spec), self.experiment.job_memory_bytes(spec)
            assert 0 < seconds < math.inf and 0 < memory < math.inf, f"{spec.grid}: {seconds} s, {memory} bytes"
            assert not boundary & set(spec.options), f"boundary options {sorted(boundary)} in a job's identity"

    def test_figures_are_named_once_and_drawable(self) -> None:
        plan = self.tiny_plan()
        figures = self.experiment.figures(plan.grid, plan.options)
        assert all(isinstance(f, FigureSpec) for f in figures)
        names = [f.name for f in figures]
        assert len(set(names)) == len(names), f"figure names {names}"

    def tiny_stores(self, plan: Plan, folder: Path) -> tuple[dict[str, Path], dict[str, Path]]:
        """The store of each job (:meth:`Plan.jobs`) and of each theory job
        (:meth:`Plan.theory_jobs`) of the tiny plan, by job key: each run in this process (CPU,
        one thread) under ``folder``. A subclass whose tiny sweep a workflow run already made
        may return that run's stores instead: the checks are the same."""
        def run(jobs: dict, kind: str) -> dict[str, Path]:
            return {job: run_job(spec, folder / kind / f"{job}.zarr", device="cpu", threads=1, progress=False)
                    for job, spec in jobs.items()}

        return run(plan.jobs(), "runs"), run(plan.theory_jobs(), "theory")

    def test_tiny_sweep_keeps_the_output_contract(self, tmp_path: Path) -> None:
        """Each job's store has every axis and ``seed`` as a dimension, holding exactly its job's
        values, and its identity; the stores collect into a sweep that reduces to a summary and
        a boundary holding each target its options declare, with its interval; every figure draws."""
        plan = self.tiny_plan()
        jobs, theory_jobs = plan.jobs(), plan.theory_jobs()
        stores, theory = self.tiny_stores(plan, tmp_path)
        assert stores.keys() == jobs.keys() and theory.keys() == theory_jobs.keys(), "one store per job"
        for job, spec in jobs.items():
            store = stores[job]
            assert json.loads(root_attrs(store)["job"]) == spec.to_dict(), f"{store}: job identity"
            ds = open_store(store)
            for axis in (*self.experiment.axis_names, SEED):
                held = spec.seeds if axis == SEED else spec.grid[axis]
                assert axis in ds.dims, f"{store}: no dimension {axis!r}"
                assert [float(v) for v in ds[axis].values] == [float(v) for v in held], f"{store}: {axis} values"
        for job, spec in theory_jobs.items():
            store = theory[job]
            ds = open_store(store)
            assert SEED not in ds.dims, f"{store}: a theory store has no seeds"
            for axis in self.experiment.theory_axes:
                assert [float(v) for v in ds[axis].values] == [float(v) for v in spec.grid[axis]], f"{store}: {axis}"
        sweep = aggregate.collect(list(stores.values()), tmp_path / "sweep.zarr", grid=plan.coords())
        summary = aggregate.reduce(sweep, tmp_path / "summary.zarr", list(theory.values()))
        aggregate.boundary(sweep, summary, tmp_path / "boundary.csv", tmp_path / "boundary.zarr",
                           self.experiment.boundary_options(plan.options))
        bnd = open_store(tmp_path / "boundary.zarr")
        for target in self.experiment.targets_for(plan.options):
            for var in (target.variable, f"{target.variable}_low", f"{target.variable}_high"):
                assert var in bnd, f"boundary.zarr lacks {var!r}"
        for fig in self.experiment.figures(plan.grid, plan.options):
            aggregate.figure(fig.draw, fig.params, summary, tmp_path / "boundary.zarr",
                             tmp_path / f"{fig.name}.png", tmp_path / f"{fig.name}.pdf")
            assert (tmp_path / f"{fig.name}.png").stat().st_size > 0
